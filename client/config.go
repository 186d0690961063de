package client

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/snapstore"
)

// Config configures a [Client]. The zero value works: it uses the default
// stream, buckets and subject prefix, tenant "default", producer
// "convlog-client".
type Config struct {
	// Resources names the stream and KV buckets (provision.DefaultConfig).
	Resources provision.Config
	// Provision, when true, creates or updates the stream and buckets in
	// New (needs JetStream admin permissions). When false New only looks
	// them up.
	Provision bool
	// NoQuotas turns off the check of the tenant's quota before an
	// append (package quota: one KV get per tenant and quota.CheckTTL (0.5 s), failing
	// open). Default false: appends of a tenant over its limits fail with
	// a *QuotaError.
	NoQuotas bool
	// Tenant, when set, makes a tenant-scoped client: it acts for this one
	// tenant, connected as one of its tenant-scoped NATS users (`agentd
	// tenant create`; permissions in package tenancy and the README), with
	// nats.CustomInboxPrefix([TenantInboxPrefix](Tenant)). It appends and
	// reads snapshots as any client does; it reads logs, lists threads and
	// creates thread keys through the tenant service of a running agentd
	// (nats.ErrNoResponders without one); New looks up nothing but the
	// deployment's partition count (a direct get of its record);
	// Watch polls through the service, woken by the thread's live
	// messages. A call about another tenant returns an error wrapping
	// events.ErrOtherTenant; erasure, redaction, blobs and durable
	// consumers return [ErrTenantScoped] (use the HTTP API). Default ""
	// (every tenant, full permissions). Not with Provision.
	Tenant string
	// Producer is written on events that have none. Default "convlog-client".
	Producer string
	// Timeout applies to a call whose ctx has no deadline. Default 10 s.
	Timeout time.Duration
	// MaxRetries bounds retries of transient publish errors (timeouts, no
	// responders, 10158, 10163, leader changes) per append. Default 6.
	MaxRetries int
	// RetryBackoff is the first backoff; it doubles up to 2 s. Default 50 ms.
	RetryBackoff time.Duration
	// MaxAnyVersionAttempts bounds conflict retries of an append made with
	// [AnyVersion]. Default 100.
	MaxAnyVersionAttempts int
	// CacheThreads is how many thread states (a few newest messages each)
	// the client keeps to validate appends without a read, within 32 MiB
	// of estimated memory. Default 4096; negative disables the cache.
	CacheThreads int
	// ChunkCacheBytes bounds the client's cache of decoded snapshot
	// history chunks, which reads of a whole thread (Get, and an append
	// to a thread whose state is not in the CacheThreads cache) use, in
	// encoded chunk bytes (see snapstore.Options). Default 64 MiB
	// (snapstore.DefaultChunkCacheBytes); negative disables the cache, so
	// that every such read gets every chunk from KV. The cache holds
	// somewhat more memory than its bound: about 264 bytes per cached
	// message besides.
	ChunkCacheBytes int
	// ConsumerReadThreshold: a read of a thread's log (a replay with
	// AtSeq/AsOf/WithEvents, a Get the projector has not caught up with,
	// Events, Export) that has more than this many events left after its
	// first page of 32 reads them through an ephemeral consumer instead
	// of more batched direct gets: about a third of the server CPU per
	// event, for the cost of creating and deleting the consumer (two
	// JetStream API calls). Default 2,000; negative: never. The NATS user
	// then also needs to create, read and delete consumers on the stream
	// ($JS.API.CONSUMER.CREATE/MSG.NEXT/DELETE.<stream>.>). Without that
	// permission a read waits up to 2 s for the creation, reads on with
	// direct gets, and the client tries no consumer for 5 minutes: set a
	// negative value for such users.
	ConsumerReadThreshold int
	// ClearPayloads, when true, makes the client write event payloads in
	// the clear instead of sealing them with the thread's data key
	// (package threadkey). Erasure then cannot make them unreadable on
	// disk (docs/audit.md). Reads open sealed payloads either way.
	// Default false.
	ClearPayloads bool
	// KeyCacheThreads bounds the cache of thread data keys (about 1 KiB
	// each, and threadkey.CacheBytes in all). Default threadkey.DefaultCacheThreads (65,536);
	// negative disables the cache.
	KeyCacheThreads int
	// TrackSnapshots, when true, makes GetView skip the head's KV get of
	// a thread it read before while a watch of the snapshot bucket's heads
	// shows the head unchanged (snapstore.Store.TrackHeads: one ordered
	// consumer per partition, headers only, for the client's life): a warm
	// GetView costs no round trip, and may be older than the stored head
	// by the watch's delivery delay besides the projection lag. It needs
	// the chunk cache (ChunkCacheBytes not negative), a client with the
	// deployment's permissions (not Tenant: creating a consumer on the
	// bucket's stream) and Close to stop the watch. agentd serve sets it
	// for its HTTP API. Default false.
	TrackSnapshots bool
	// NewThreadID generates ids for threads created without one (AgentKit's
	// createThread hook). Default: a UUIDv7.
	NewThreadID func() string
	// Logger receives debug logs (nil = discard).
	Logger *slog.Logger
}

// DefaultConfig returns the defaults the zero Config means.
func DefaultConfig() Config {
	return Config{Resources: provision.DefaultConfig(), Producer: "convlog-client", Timeout: 10 * time.Second,
		MaxRetries: 6, RetryBackoff: 50 * time.Millisecond, MaxAnyVersionAttempts: 100, CacheThreads: 4096,
		ChunkCacheBytes: snapstore.DefaultChunkCacheBytes, ConsumerReadThreshold: 2000, NewThreadID: events.NewID}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Resources = c.Resources.WithDefaults()
	c.Producer = cmp.Or(c.Producer, d.Producer)
	c.Timeout = cmp.Or(c.Timeout, d.Timeout)
	c.MaxRetries = cmp.Or(c.MaxRetries, d.MaxRetries)
	c.RetryBackoff = cmp.Or(c.RetryBackoff, d.RetryBackoff)
	c.MaxAnyVersionAttempts = cmp.Or(c.MaxAnyVersionAttempts, d.MaxAnyVersionAttempts)
	c.CacheThreads = cmp.Or(c.CacheThreads, d.CacheThreads)
	c.ChunkCacheBytes = cmp.Or(c.ChunkCacheBytes, d.ChunkCacheBytes)
	c.ConsumerReadThreshold = cmp.Or(c.ConsumerReadThreshold, d.ConsumerReadThreshold)
	if c.NewThreadID == nil {
		c.NewThreadID = d.NewThreadID
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if err := c.Resources.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := (events.Subjects{Prefix: c.Resources.SubjectPrefix}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("client: Timeout must be >= 0, got %s", c.Timeout))
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("client: MaxRetries must be >= 0, got %d", c.MaxRetries))
	}
	if c.RetryBackoff < 0 {
		errs = append(errs, errors.New("client: RetryBackoff must be >= 0"))
	}
	if c.Tenant != "" {
		if err := events.ValidateTenant(c.Tenant); err != nil {
			errs = append(errs, fmt.Errorf("client: Tenant: %w", err))
		}
		if c.Provision {
			errs = append(errs, errors.New("client: Provision needs full permissions; a client with Tenant set has a tenant's"))
		}
		if c.TrackSnapshots {
			errs = append(errs, errors.New("client: TrackSnapshots needs full permissions (a consumer on the snapshot bucket's stream); a client with Tenant set has a tenant's"))
		}
	}
	if c.TrackSnapshots && c.ChunkCacheBytes < 0 {
		errs = append(errs, errors.New("client: TrackSnapshots needs the chunk cache; ChunkCacheBytes is negative"))
	}
	return errors.Join(errs...)
}

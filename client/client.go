package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/quota"
	"github.com/convlog/convlog/internal/tenancy"
	"github.com/convlog/convlog/snapstore"
	"github.com/convlog/convlog/threadkey"
)

// Client is what services use to append to and read threads. It is safe
// for concurrent use by many goroutines. It does not own the connection:
// Close does not close nc.
type Client struct {
	cfg       Config
	nc        *nats.Conn
	js        jetstream.JetStream
	stream    string
	st        jetstream.Stream
	subjects  events.Subjects
	snapshots jetstream.KeyValue
	index     jetstream.KeyValue
	snaps     *snapstore.Store
	cache     *stateCache
	blobs     blobStore
	keys      *threadkey.Keys
	// log reads stored events (logaccess.go); caller is the tenant
	// service's caller of a tenant-scoped client (nil otherwise).
	log    logAccess
	caller *tenancy.Caller
	// quotas checks the tenant's limits before an append (nil with
	// Config.NoQuotas).
	quotas *quota.Checker
	closed atomic.Bool
	// replies are the inboxes appends wait for their publish acks on
	// (append_reply.go).
	replies replyInboxes
	// untrack stops the watch of Config.TrackSnapshots (nil without).
	untrack context.CancelFunc
	// pageSize is readRaw's page size: the constant pageSize (tests of
	// the paging use smaller pages).
	pageSize int
	// consumerMin is cfg.ConsumerReadThreshold; consumerOffUntil is when
	// (Unix ns) reads may try a consumer again after one failed.
	consumerMin      int
	consumerOffUntil atomic.Int64
	// parts are the deployment's partitions' clients when it has more
	// than one (every one shares this slice; the client New returned is
	// none of them: it routes every thread call to one), nil otherwise
	// (route).
	parts []*Client
	// createConsumer is js.CreateConsumer (tests make it fail).
	createConsumer func(context.Context, string, jetstream.ConsumerConfig) (jetstream.Consumer, error)
}

// New returns a client on nc. With cfg.Provision it creates or updates the
// stream and buckets; otherwise it looks them up and returns an error naming
// the one that is missing (run `agentd serve` or provision first).
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Client, error) {
	if nc == nil {
		return nil, errors.New("client: nil *nats.Conn")
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c := &Client{cfg: cfg, nc: nc, js: js, stream: cfg.Resources.Stream,
		subjects: events.Subjects{Prefix: cfg.Resources.SubjectPrefix}, cache: newStateCache(cfg.CacheThreads),
		pageSize: pageSize, consumerMin: cfg.ConsumerReadThreshold, createConsumer: js.CreateConsumer}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if !cfg.NoQuotas {
		c.quotas = quota.NewChecker(js, cfg.Resources.UsageBucket)
	}
	if cfg.Tenant != "" {
		return c.scoped(ctx)
	}
	if _, ok := cfg.Resources.PartitionIndex(); ok {
		// one partition's client (Client.Partitions, a projector's reader)
		if cfg.Provision {
			if _, err := provision.Ensure(ctx, js, cfg.Resources); err != nil {
				return nil, err
			}
		}
		if err := c.bind(ctx); err != nil {
			return nil, err
		}
		return c, nil
	}
	k := 1
	if cfg.Provision {
		r, err := provision.Ensure(ctx, js, cfg.Resources)
		if err != nil {
			return nil, err
		}
		k = r.Partitions
	} else if k, err = provision.ReadPartitions(ctx, js, cfg.Resources); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.cfg.Resources.Partitions = k
	if k == 1 {
		if err := c.bind(ctx); err != nil {
			return nil, err
		}
		return c, nil
	}
	for p := range k {
		pc := &Client{cfg: c.cfg, nc: nc, js: js, quotas: c.quotas, pageSize: pageSize, consumerMin: cfg.ConsumerReadThreshold,
			createConsumer: js.CreateConsumer, cache: newStateCache(cfg.CacheThreads)}
		pc.cfg.Resources = c.cfg.Resources.Partition(p)
		if err := pc.bind(ctx); err != nil {
			c.Close() // the watches of the partitions bound so far
			return nil, err
		}
		c.parts = append(c.parts, pc)
	}
	for _, pc := range c.parts {
		pc.parts = c.parts
	}
	c.shareFirst()
	return c, nil
}

// shareFirst gives the root client of several partitions partition 0's
// stream, subjects, buckets, keys and snapshot store (what its Keys and
// Subjects return), bound once by c.parts[0].
func (c *Client) shareFirst() {
	p0 := c.parts[0]
	c.stream, c.subjects, c.st, c.log = p0.stream, p0.subjects, p0.st, p0.log
	c.snapshots, c.index, c.keys, c.snaps = p0.snapshots, p0.index, p0.keys, p0.snaps
}

// bind looks up the stream and buckets of c.cfg.Resources (one partition)
// and sets c's fields for them; the error names the one that is missing.
func (c *Client) bind(ctx context.Context) error {
	res := c.cfg.Resources
	c.stream, c.subjects = res.Stream, events.Subjects{Prefix: res.SubjectPrefix}
	var err error
	if c.st, err = c.js.Stream(ctx, res.Stream); err != nil {
		return fmt.Errorf("client: stream %s: %w (provision it with `agentd serve` or Config.Provision)", res.Stream, err)
	}
	c.log = directLog{js: c.js, st: c.st, stream: c.stream}
	if c.snapshots, err = c.js.KeyValue(ctx, res.SnapshotBucket); err != nil {
		return fmt.Errorf("client: KV bucket %s: %w", res.SnapshotBucket, err)
	}
	if c.index, err = c.js.KeyValue(ctx, res.IndexBucket); err != nil {
		return fmt.Errorf("client: KV bucket %s: %w", res.IndexBucket, err)
	}
	kv, err := c.js.KeyValue(ctx, res.KeyBucket)
	if err != nil {
		return fmt.Errorf("client: KV bucket %s: %w (provision it with `agentd serve` or Config.Provision)", res.KeyBucket, err)
	}
	if c.keys, err = threadkey.New(ctx, c.js, kv, c.cfg.KeyCacheThreads); err != nil {
		return err
	}
	c.snaps = c.newSnapshots()
	if c.cfg.TrackSnapshots {
		tctx, stop := context.WithCancel(context.Background())
		if err := c.snaps.TrackHeads(tctx, c.js); err != nil {
			stop()
			return fmt.Errorf("client: TrackSnapshots: %w", err)
		}
		c.untrack = stop
	}
	return nil
}

// route returns the client of the partition tenant/thread lives in
// (events.Partition over the deployment's K): c itself when K = 1.
func (c *Client) route(tenant, thread string) *Client {
	if len(c.parts) < 2 {
		return c
	}
	return c.parts[events.Partition(tenant, thread, len(c.parts))]
}

// For returns the client of the partition that tenant/thread lives in
// (c itself in a deployment of one partition): its Subjects, Keys,
// JetStream stream (Config().Resources.Stream) and ConsumeDurable are that
// partition's. Every thread method of either client works for every
// thread.
func (c *Client) For(tenant, thread string) *Client { return c.route(tenant, thread) }

// Partitions returns the clients of the deployment's K partitions in
// partition order ([c] when K = 1): a component that consumes the log
// (agent workers, a replay) runs one consumer per partition, through
// Partitions()[p].ConsumeDurable.
func (c *Client) Partitions() []*Client {
	if len(c.parts) < 2 {
		return []*Client{c}
	}
	return c.parts
}

// scoped finishes New for a tenant-scoped client (Config.Tenant): no
// lookups (its NATS user may not read stream information) but the
// deployment's partition count (a direct get of its record, unless
// Config.Resources.Partitions gives it), KV through tenancy.KV, logs
// through the tenant service, no consumers.
func (c *Client) scoped(ctx context.Context) (*Client, error) {
	k := c.cfg.Resources.Partitions
	if k == 0 {
		var err error
		if k, err = tenancy.Partitions(ctx, c.js, c.cfg.Resources); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	c.cfg.Resources.Partitions = k
	c.caller = tenancy.NewCaller(c.nc, c.cfg.Resources, c.cfg.Tenant)
	if k == 1 {
		if err := c.bindScoped(ctx, 0); err != nil {
			return nil, err
		}
		return c, nil
	}
	for p := range k {
		pc := &Client{cfg: c.cfg, nc: c.nc, js: c.js, quotas: c.quotas, caller: c.caller, pageSize: pageSize,
			createConsumer: c.js.CreateConsumer, cache: newStateCache(c.cfg.CacheThreads)}
		pc.cfg.Resources = c.cfg.Resources.Partition(p)
		if err := pc.bindScoped(ctx, p); err != nil {
			return nil, err
		}
		c.parts = append(c.parts, pc)
	}
	for _, pc := range c.parts {
		pc.parts = c.parts
	}
	c.shareFirst()
	c.consumerMin = -1
	return c, nil
}

// bindScoped sets a tenant-scoped client's fields for partition p, whose
// names c.cfg.Resources holds.
func (c *Client) bindScoped(ctx context.Context, p int) error {
	res := c.cfg.Resources
	c.stream, c.subjects = res.Stream, events.Subjects{Prefix: res.SubjectPrefix, Only: c.cfg.Tenant}
	c.log = serviceLog{caller: c.caller, subjects: c.subjects}
	c.consumerMin = -1
	c.snapshots = tenancy.NewKV(c.js, c.caller, res.SnapshotBucket, tenancy.RoleRead, p)
	c.index = tenancy.NewKV(c.js, c.caller, res.IndexBucket, tenancy.RoleIndex, p)
	var err error
	if c.keys, err = threadkey.New(ctx, c.js, tenancy.NewKV(c.js, c.caller, res.KeyBucket, tenancy.RoleKeys, p), c.cfg.KeyCacheThreads); err != nil {
		return err
	}
	c.snaps = c.newSnapshots()
	return nil
}

// TenantInboxPrefix is the inbox prefix a tenant-scoped client's
// connection must use: nats.CustomInboxPrefix(TenantInboxPrefix(tenant)),
// "_INBOX_<tenant>" (its NATS user may subscribe to no other inbox).
func TenantInboxPrefix(tenant string) string { return tenancy.InboxPrefix(tenant) }

// scopedErr returns ErrTenantScoped for op when c is tenant-scoped.
func (c *Client) scopedErr(op string) error {
	if c.caller != nil {
		return fmt.Errorf("%w: %s", ErrTenantScoped, op)
	}
	return nil
}

// Keys returns the client's thread data keys (package threadkey): what
// seals the payloads it writes and opens those it reads.
func (c *Client) Keys() *threadkey.Keys { return c.keys }

// openRaw replaces m.Data by its opened form (threadkey.Keys.OpenStored:
// an event whose key is gone keeps its sealed bytes). It returns an error
// only when the key could not be read (NATS).
func (c *Client) openRaw(ctx context.Context, m *RawEvent) error {
	if m == nil {
		return nil
	}
	data, err := c.keys.OpenStored(ctx, m.Data)
	if err != nil {
		return fmt.Errorf("client: open event at seq %d: %w", m.Sequence, err)
	}
	m.Data = data
	return nil
}

// openAll opens every message of ms (see openRaw).
func (c *Client) openAll(ctx context.Context, ms []*RawEvent) error {
	for _, m := range ms {
		if err := c.openRaw(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// newSnapshots returns the snapshot reader of c.snapshots, with the
// chunk cache sized by cfg.ChunkCacheBytes.
// A client with the deployment's permissions reads a head's deltas with
// one batched direct get; a tenant-scoped one may only get by subject, so
// it reads them one by one.
func (c *Client) newSnapshots() *snapstore.Store {
	opts := snapstore.Options{ChunkCacheBytes: c.cfg.ChunkCacheBytes, Sealer: c.keys}
	if c.cfg.Tenant == "" {
		stream := "KV_" + c.snapshots.Bucket()
		opts.Batch = func(ctx context.Context, subject string, from uint64, n int) ([]*jetstream.RawStreamMsg, error) {
			msgs, _, err := directget.Batch(ctx, c.js, stream, subject, from, n, 0)
			return msgs, err
		}
	}
	return snapstore.NewWith(c.snapshots, opts)
}

// Close marks the client closed; later calls return [ErrClosed]. It stops
// the watch of Config.TrackSnapshots and unsubscribes the inboxes appends
// wait for their acks on (at most 64, as many as appends were ever in
// flight at once; one in use is unsubscribed when its append ends); it
// does not close the NATS connection.
func (c *Client) Close() {
	for _, p := range append([]*Client{c}, c.parts...) {
		p.closed.Store(true)
		p.replies.close()
		if p.untrack != nil {
			p.untrack()
		}
	}
}

// Subjects returns the subject naming the client uses.
func (c *Client) Subjects() events.Subjects { return c.subjects }

// JetStream returns the client's JetStream context.
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// Config returns the effective configuration (defaults filled in).
func (c *Client) Config() Config { return c.cfg }

// withTimeout applies cfg.Timeout when ctx has no deadline.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

func (c *Client) check() error {
	if c.closed.Load() {
		return ErrClosed
	}
	return nil
}

// replicated reports whether the stream has more than one replica, so that
// direct gets may be answered by a lagging follower.
func (c *Client) replicated() bool {
	if c.st == nil {
		return false
	}
	info := c.st.CachedInfo()
	return info != nil && info.Config.Replicas > 1
}

// Package provision creates or updates, idempotently, the JetStream stream
// and KV buckets convlog uses, with the settings of the README's NATS
// contract (why: docs/design.md, "Facts about NATS that shape the design"). Every
// component that needs them (agentd, client, projector runner, tests) calls
// [Ensure]; concurrent calls are safe.
//
// Every JetStream API request of [Ensure], [ReadPartitions] and
// [SpreadLeaders] is bounded by an attempt timeout ([Config.AttemptTimeout],
// default [DefaultAttemptTimeout], 5 s): a request the server leaves
// unanswered, as a recovering cluster can, is made again after it, each
// retry waiting twice as long as the one before (up to 8 times the
// first), until the caller's context ends ([DefaultRequestTimeout] per
// request when it has no deadline). So a lost request costs an attempt,
// not the caller's whole deadline. Only requests that are safe to make
// twice are made again: creating or updating a stream or bucket with the
// same configuration, reads, and the conditional create of the
// partitions record (a second one finds the first's record and reads
// it). A leader step-down is made once, bounded by the attempt timeout.
package provision

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Config names and sizes the resources. The zero value works; see
// [DefaultConfig] for the values it means.
type Config struct {
	// Stream is the event stream's name. Default "CONVLOG".
	Stream string
	// SubjectPrefix is the thread subject prefix (events.Subjects.Prefix).
	// Default "conv".
	SubjectPrefix string
	// SnapshotBucket holds thread snapshots (heads and chunks). Default
	// "convlog_snapshots".
	SnapshotBucket string
	// IndexBucket holds one small thread summary per thread, for List.
	// Default "convlog_threads".
	IndexBucket string
	// BlobBucket is the JetStream object store of thread blobs (values
	// larger than one event, client.PutBlob). Default "convlog_blobs".
	BlobBucket string
	// KeyBucket holds one data key per thread (package threadkey); its
	// stream allows deletes so that erasure can overwrite a key on disk.
	// Default "convlog_keys".
	KeyBucket string
	// Replicas for the stream and buckets (1..5). Default 1.
	Replicas int
	// MaxBytes caps the stream; appends beyond it fail (discard new) rather
	// than silently dropping history. Default -1 (no cap).
	MaxBytes int64
	// Duplicates is the de-duplication window (the stream's Duplicates:
	// an event id published again within it is stored once). Default 2
	// minutes. The server keeps every id of the window in memory, about
	// 126 bytes each (nats-server 2.15): an import at 17,000
	// events/s holds about 250 MiB of ids; a shorter window lowers that
	// and shortens how long a writer may retry safely.
	Duplicates time.Duration
	// MaxMsgSize caps one event in bytes. Default -1 (the server's max
	// payload, 1 MiB by default).
	MaxMsgSize int32
	// TenantBucket is the registry of tenant-scoped NATS users (package
	// tenancy: one entry per user, "<tenant>.<public NKey>"). Default
	// "convlog_tenants".
	TenantBucket string
	// UsageBucket holds each tenant's metered usage and limits (package
	// quota). Default "convlog_usage".
	UsageBucket string
	// TenantAPI is the subject root of the tenant service (package
	// tenancy): a tenant-scoped user calls "<TenantAPI>.<tenant>.<op>".
	// Default "convlog.api". Its first token must differ from
	// SubjectPrefix, so that no thread or delta subject is a service
	// subject.
	TenantAPI string
	// Partitions is K, how many partitions the log and the snapshot,
	// index and key buckets are split into (docs/partitions-design.md):
	// a thread lives in partition
	// events.Partition(tenant, thread, K). K is fixed per deployment and
	// recorded in ConfigBucket by the first Ensure; 0 means "the
	// deployment's K" (1 for a new deployment), and Ensure refuses a K
	// that differs from the recorded one. K=1 is exactly the unpartitioned
	// layout. At most MaxPartitions.
	Partitions int
	// ConfigBucket holds the deployment's settings every process reads
	// before it writes (the record "partitions"). Default "convlog_config".
	ConfigBucket string
	// AttemptTimeout is how long the first attempt of each JetStream API
	// request of Ensure, ReadPartitions and SpreadLeaders waits for its
	// reply before the request is made again (see the package doc).
	// Default [DefaultAttemptTimeout]; negative is a Validate error.
	AttemptTimeout time.Duration

	// part is set on a partition's own Config (Config.Partition): 1 + its
	// index; 0 on a deployment's Config.
	part int
}

// MaxPartitions is the most partitions a deployment may have.
const MaxPartitions = 64

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Stream: "CONVLOG", SubjectPrefix: "conv", SnapshotBucket: "convlog_snapshots",
		IndexBucket: "convlog_threads", BlobBucket: "convlog_blobs", KeyBucket: "convlog_keys", Replicas: 1, MaxBytes: -1, Duplicates: 2 * time.Minute, MaxMsgSize: -1,
		TenantBucket: "convlog_tenants", UsageBucket: "convlog_usage", TenantAPI: "convlog.api", ConfigBucket: "convlog_config",
		AttemptTimeout: DefaultAttemptTimeout}
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	c.Stream = cmp.Or(c.Stream, d.Stream)
	c.SubjectPrefix = cmp.Or(c.SubjectPrefix, d.SubjectPrefix)
	c.SnapshotBucket = cmp.Or(c.SnapshotBucket, d.SnapshotBucket)
	c.IndexBucket = cmp.Or(c.IndexBucket, d.IndexBucket)
	c.BlobBucket = cmp.Or(c.BlobBucket, d.BlobBucket)
	c.KeyBucket = cmp.Or(c.KeyBucket, d.KeyBucket)
	c.Replicas = cmp.Or(c.Replicas, d.Replicas)
	c.MaxBytes = cmp.Or(c.MaxBytes, d.MaxBytes)
	c.Duplicates = cmp.Or(c.Duplicates, d.Duplicates)
	c.MaxMsgSize = cmp.Or(c.MaxMsgSize, d.MaxMsgSize)
	c.TenantBucket = cmp.Or(c.TenantBucket, d.TenantBucket)
	c.UsageBucket = cmp.Or(c.UsageBucket, d.UsageBucket)
	c.TenantAPI = cmp.Or(c.TenantAPI, d.TenantAPI)
	c.ConfigBucket = cmp.Or(c.ConfigBucket, d.ConfigBucket)
	c.AttemptTimeout = cmp.Or(c.AttemptTimeout, d.AttemptTimeout)
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("provision: replicas must be 1..5, got %d", c.Replicas))
	}
	if c.Duplicates < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("provision: duplicate window must be at least 100ms, got %s", c.Duplicates))
	}
	if c.SnapshotBucket == c.IndexBucket || c.KeyBucket == c.SnapshotBucket || c.KeyBucket == c.IndexBucket {
		errs = append(errs, errors.New("provision: snapshot, index and key buckets must differ"))
	}
	if c.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("provision: attempt timeout must not be negative, got %s", c.AttemptTimeout))
	}
	if c.Partitions < 0 || c.Partitions > MaxPartitions {
		errs = append(errs, fmt.Errorf("provision: partitions must be 0..%d, got %d", MaxPartitions, c.Partitions))
	}
	if first, _, _ := strings.Cut(c.TenantAPI, "."); first == c.SubjectPrefix || strings.ContainsAny(c.TenantAPI, "*> ") {
		errs = append(errs, fmt.Errorf("provision: tenant service subject %q must be a literal subject whose first token is not the subject prefix %q", c.TenantAPI, c.SubjectPrefix))
	}
	return errors.Join(errs...)
}

// StreamConfig is the event stream's configuration: the thread subjects
// "<prefix>.*.*" and the audit checkpoint subject "<prefix>.audit"
// (package audit), file storage, limits
// retention with no age or per-subject limit (the log is the record), discard
// new at the byte cap, deletes denied (immutability; purge stays allowed for
// explicit erasure of a whole thread), atomic batch publish and direct get
// allowed.
func (c Config) StreamConfig() jetstream.StreamConfig {
	c = c.WithDefaults()
	return jetstream.StreamConfig{
		Name:               c.Stream,
		Description:        "convlog conversation events, one subject per thread",
		Subjects:           []string{c.SubjectPrefix + ".*.*", c.SubjectPrefix + ".audit"},
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Replicas:           c.Replicas,
		MaxMsgs:            -1,
		MaxBytes:           c.MaxBytes,
		MaxMsgsPerSubject:  -1,
		MaxMsgSize:         c.MaxMsgSize,
		Discard:            jetstream.DiscardNew,
		Duplicates:         c.Duplicates,
		DenyDelete:         true,
		DenyPurge:          false,
		AllowRollup:        false,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
}

// Resources are the provisioned stream and buckets. The stream, snapshot,
// index and key fields are partition 0's; Parts has every partition's.
type Resources struct {
	Stream    jetstream.Stream
	Snapshots jetstream.KeyValue
	Index     jetstream.KeyValue
	Blobs     jetstream.ObjectStore
	Keys      jetstream.KeyValue
	Tenants   jetstream.KeyValue
	Usage     jetstream.KeyValue
	// Partitions is the deployment's K (1 for a partition's Config).
	Partitions int
	// Parts are the K partitions' resources, in partition order (Parts[0]
	// is the fields above); only Stream, Snapshots, Index and Keys are set
	// in each.
	Parts []Resources
}

// Ensure creates the stream and buckets, or updates them to c. It is
// idempotent and safe to call concurrently from several processes. It
// returns an error naming the resource that could not be created. For a
// deployment's Config it first settles K (Config.Partitions, recorded in
// ConfigBucket; a K that differs from the recorded one is refused) and
// provisions every partition; with K > 1 and replicas it then spreads the
// partitions' leaders over the servers (a failed move is logged by
// nobody: the partitions work wherever their leaders are). For a
// partition's Config (Config.Partition) it provisions that partition and
// the shared buckets. A request left unanswered is made again (see the
// package doc); when ctx ends first, the error wraps ctx's error.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) (Resources, error) {
	if err := c.Validate(); err != nil {
		return Resources{}, err
	}
	c = c.WithDefaults()
	k, parts := 1, []Config{c}
	if _, ok := c.PartitionIndex(); !ok {
		var err error
		if k, err = ensureRecord(ctx, js, c); err != nil {
			return Resources{}, err
		}
		parts = parts[:0]
		for p := range k {
			parts = append(parts, c.Partition(p))
		}
	}
	r := Resources{Partitions: k}
	for _, pc := range parts {
		pr, err := ensurePartition(ctx, js, pc)
		if err != nil {
			return r, err
		}
		r.Parts = append(r.Parts, pr)
	}
	r.Stream, r.Snapshots, r.Index, r.Keys = r.Parts[0].Stream, r.Parts[0].Snapshots, r.Parts[0].Index, r.Parts[0].Keys
	var err error
	if r.Tenants, err = ensureKV(ctx, js, c, c.TenantBucket, "convlog tenant-scoped NATS users"); err != nil {
		return r, err
	}
	if r.Usage, err = ensureKV(ctx, js, c, c.UsageBucket, "convlog usage per tenant and thread (quotas)"); err != nil {
		return r, err
	}
	r.Blobs, err = attempt(ctx, c, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, BlobStoreConfig(c))
	})
	if err != nil {
		return r, fmt.Errorf("provision: object store %s: %w", c.BlobBucket, err)
	}
	if k > 1 && c.Replicas > 1 {
		_, _ = spreadLeaders(ctx, js, c, k)
	}
	return r, nil
}

// ensurePartition creates or updates one partition's stream, snapshot,
// index and key buckets.
func ensurePartition(ctx context.Context, js jetstream.JetStream, c Config) (Resources, error) {
	var r Resources
	var err error
	r.Stream, err = attempt(ctx, c, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, c.StreamConfig())
	})
	if err != nil {
		return r, fmt.Errorf("provision: stream %s: %w", c.Stream, err)
	}
	if r.Snapshots, err = ensureKVWith(ctx, js, c, jetstream.KeyValueConfig{Bucket: c.SnapshotBucket,
		Description: "convlog thread snapshots (heads and immutable chunks)", LimitMarkerTTL: SnapshotMarkerTTL}); err != nil {
		return r, err
	}
	if r.Index, err = ensureKV(ctx, js, c, c.IndexBucket, "convlog thread summaries for listing"); err != nil {
		return r, err
	}
	if _, err := attempt(ctx, c, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, KeyStreamConfig(c))
	}); err != nil {
		return r, fmt.Errorf("provision: KV bucket %s: %w", c.KeyBucket, err)
	}
	if r.Keys, err = attempt(ctx, c, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.KeyValue(ctx, c.KeyBucket)
	}); err != nil {
		return r, fmt.Errorf("provision: KV bucket %s: %w", c.KeyBucket, err)
	}
	return r, nil
}

// ensureKV creates or updates the KV bucket name (history 1, file
// storage, c's replicas); the error names the bucket.
func ensureKV(ctx context.Context, js jetstream.JetStream, c Config, name, desc string) (jetstream.KeyValue, error) {
	return ensureKVWith(ctx, js, c, jetstream.KeyValueConfig{Bucket: name, Description: desc})
}

// ensureKVWith is ensureKV of kc, with history 1, file storage and c's
// replicas.
func ensureKVWith(ctx context.Context, js jetstream.JetStream, c Config, kc jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kc.History, kc.Storage, kc.Replicas = 1, jetstream.FileStorage, c.Replicas
	kv, err := attempt(ctx, c, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, kc)
	})
	if err != nil {
		return nil, fmt.Errorf("provision: KV bucket %s: %w", kc.Bucket, err)
	}
	return kv, nil
}

// SnapshotMarkerTTL is the snapshot bucket's LimitMarkerTTL: it lets the
// bucket's messages carry a TTL (nats-server 2.11+, AllowMsgTTL), which
// the projector's purge markers of old deltas use (snapstore.Writer), and
// is how long the server keeps a marker when it would remove a key for a
// limit (the bucket has none that removes keys).
const SnapshotMarkerTTL = 5 * time.Second

// KeyStreamConfig is the stream of the thread key bucket: the stream
// nats.go creates for a KV bucket of history 3 (subjects "$KV.<bucket>.>",
// rollups and direct gets allowed, discard new), except that deletes are
// not denied: threadkey.Keys.Destroy deletes a key with JetStream's secure
// delete, which overwrites it on disk. History 3 lets a key rotation
// (threadkey.Rotation) write the new records before it secure-deletes the
// old ones: a value a history limit drops is not overwritten. nats.go's KV API binds to it
// (jetstream.KeyValue checks MaxMsgsPerSubject >= 1).
func KeyStreamConfig(c Config) jetstream.StreamConfig {
	c = c.WithDefaults()
	return jetstream.StreamConfig{
		Name:              "KV_" + c.KeyBucket,
		Description:       "convlog thread data keys (erasure destroys a thread's key)",
		Subjects:          []string{"$KV." + c.KeyBucket + ".>"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Replicas:          c.Replicas,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: 3,
		MaxConsumers:      -1,
		Discard:           jetstream.DiscardNew,
		Duplicates:        2 * time.Minute,
		AllowRollup:       true,
		DenyDelete:        false,
		AllowDirect:       true,
	}
}

// BlobStoreConfig is the blob object store's configuration: file storage,
// the stream's replicas, no size cap of its own (a blob's size is capped
// where it is written).
func BlobStoreConfig(c Config) jetstream.ObjectStoreConfig {
	c = c.WithDefaults()
	return jetstream.ObjectStoreConfig{Bucket: c.BlobBucket, Description: "convlog thread blobs (values larger than one event)",
		Storage: jetstream.FileStorage, Replicas: c.Replicas}
}

// WaitConsumerDrained polls the durable consumer durable of stream (every
// 1 ms at first, backing off to 50 ms) until every message the stream
// held when it was called has been delivered and acknowledged: nothing
// left to deliver (NumPending), none awaiting an ack (NumAckPending), and
// no message on the consumer's filter subjects (every subject when it has
// none) between its last delivery and the stream's last sequence at the
// call. For the projector's consumer: until everything stored is
// projected. The last check is needed because the server counts a stored
// message in NumPending only once its consumer signal loop reaches it,
// after the publisher has its acknowledgement, so a consumer can briefly
// look drained while a message stored before the call is undelivered. A
// stream or consumer that does not exist yet is waited for. It returns
// nil when the consumer is drained, or an error wrapping ctx's error when
// ctx ends first (the caller bounds the wait with ctx).
func WaitConsumerDrained(ctx context.Context, js jetstream.JetStream, stream, durable string) error {
	var st jetstream.Stream
	var last uint64
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if st == nil {
			if s, err := js.Stream(ctx, stream); err == nil {
				st, last = s, s.CachedInfo().State.LastSeq
			}
		}
		if st != nil && consumerDrained(ctx, js, st, durable, last) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for consumer %s to drain: %w", durable, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// consumerDrained reports whether durable of st has delivered and had
// acknowledged every message up to the stream sequence last; any error
// (the consumer does not exist yet) reports false.
func consumerDrained(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, durable string, last uint64) bool {
	cons, err := js.Consumer(ctx, st.CachedInfo().Config.Name, durable)
	if err != nil {
		return false
	}
	info, err := cons.Info(ctx)
	if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
		return false
	}
	from := info.Delivered.Stream + 1
	if from > last {
		return true
	}
	filters := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		filters = append(filters, info.Config.FilterSubject)
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	for _, f := range filters {
		m, err := st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil || m.Sequence <= last {
			return false
		}
	}
	return true
}

package projector

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/provision"
)

// Config configures a [Projector]. The zero value works: every zero field
// means the default of [DefaultConfig]. Every instance that shares a
// Durable must use the same Stream, SubjectPrefix and buckets; ChunkBytes
// and TailBytes should match too (instances that disagree stay correct but
// write chunks the others do not reuse).
type Config struct {
	// Stream is the event stream. Default "CONVLOG".
	Stream string
	// SubjectPrefix is the thread subject prefix. Default "conv".
	SubjectPrefix string
	// SnapshotBucket holds heads and chunks. Default "convlog_snapshots".
	SnapshotBucket string
	// IndexBucket holds one [Summary] per thread. Default "convlog_threads".
	IndexBucket string
	// KeyBucket holds the thread data keys (package threadkey). Default
	// "convlog_keys".
	KeyBucket string
	// Partition is which partition (0..K-1) of the deployment this
	// projector projects (docs/partitions-design.md):
	// Stream, SubjectPrefix and the buckets above name the deployment
	// (partition 0), and partition p's stream, subjects and buckets are
	// derived from them (provision.Config.Partition). A deployment of K
	// partitions runs a projector for each p (one or more instances
	// each). An event on this partition's stream whose thread belongs to
	// another partition (a raw publisher that computed the partition
	// wrongly) is not projected: it is reported as FailureMisplaced.
	// Default 0; Run fails when the deployment has no such partition.
	Partition int
	// PinnedTTL, when > 0, makes the durable consumer pinned_client
	// (client.DurableConfig.PinnedTTL, nats-server 2.11+): exactly one
	// instance projects the partition at a time, and another takes over
	// when it has made no pull request for PinnedTTL (more than 5 s, the
	// pull expiry). Default 0: every instance shares the partition's
	// threads (each thread is still projected in order: per-thread
	// dispatch and compare-and-swap on its head). agentd serve pins the
	// projectors of a partitioned deployment (10 s) so that its instances
	// spread partitions instead of sharing each.
	PinnedTTL time.Duration
	// Durable is the name of the durable pull consumer that every instance
	// shares. Default "convlog-projector".
	Durable string

	// ChunkBytes is the most bytes a history chunk holds (a message larger
	// than that gets a chunk of its own). Open chunks merge like a binary
	// counter, a tail's bytes at a time, up to this size (snapstore's
	// package doc), so a bigger ChunkBytes means fewer values per read (a
	// 600 KB thread is a head and two or three chunks at the default) and
	// a few more bytes written: about log2(ChunkBytes/TailBytes) times
	// each message's size over its life in open chunks (5 at the
	// defaults). Default 768 KiB, lowered to the
	// server's max payload minus 64 KiB when that is smaller; at least 1
	// KiB and at most 960 KiB. Run fails if the server's max payload is
	// below ChunkBytes plus 64 KiB.
	ChunkBytes int
	// TailBytes is how many bytes of newest messages may wait in deltas
	// (each step's messages, written once; snapstore's package doc) before
	// they move to the open chunks; the head lists one reference per delta,
	// so it also bounds the head's size, and a reader's deltas. Default 32
	// KiB; at least 256 bytes and at most ChunkBytes.
	TailBytes int

	// Workers is how many threads one instance projects at once. Default
	// 64. A step spends most of its time waiting for the server (the delta,
	// the head and the index entry are three round trips), so the steps an
	// instance can take per second are about Workers divided by a step's
	// time, and a slow moment of the server (its garbage collection, a
	// block flush) becomes a queue when the workers are mostly busy; a
	// server across a network makes each round trip longer and more
	// workers matter more. A worker holds one thread's step at a time (its
	// head and the events it folds, which MaxBatch and MaxTriggerBytes
	// bound), so more workers cost little memory. BENCHMARKS.md (section 3,
	// and its analysis of the projector's workers) has the lag, catch-up
	// and memory with 8 and with 64 workers.
	Workers int
	// MaxBatch is the most events one projection step folds before it
	// writes the head. Default 1000.
	MaxBatch int
	// MaxAckPending bounds the triggers delivered and not yet acked, across
	// all instances. Default 50,000: in a catch-up (a backlog over many
	// threads, delivered in stream order) a step folds the triggers its
	// thread has queued, so this bounds the events per step and with them
	// the rate (BenchmarkCatchUp reports both). The memory it would take
	// is bounded by MaxTriggerBytes.
	MaxAckPending int
	// MaxTriggerBytes bounds the heap the triggers an instance holds keep,
	// delivered and not yet folded and acked: over it, the instance takes
	// no more deliveries until its workers have folded some. Default 96
	// MiB. A trigger counts its event, subject, reply subject and headers,
	// and about 1 KiB for nats.go's message and its parsed headers and
	// metadata ([Held]): 96 MiB holds about 46,000 triggers of events of
	// 500 bytes of text, enough that a catch-up's rate is that of
	// MaxAckPending alone (BenchmarkCatchUp). A single trigger larger than it is still taken. The consumer's pull
	// buffer comes on top: two of the largest events the server takes (2 x
	// its max payload + 64 KiB, in bytes on the wire).
	MaxTriggerBytes int
	// AckWait is how long the server waits for an ack before it delivers a
	// trigger again: after a crash, and after a clean shutdown for the
	// triggers the server sent while the consumer was being drained (a
	// clean shutdown naks every trigger it received, but a pull request
	// cannot be withdrawn, so a few in flight are lost and wait AckWait).
	// It bounds how long a restarted projector may leave a thread's
	// snapshot behind its log. A step that takes longer is delivered again
	// meanwhile, which costs a settled-trigger ack, nothing else. Default
	// 5 s.
	AckWait time.Duration
	// CacheThreads is how many recently projected threads an instance keeps
	// decoded in memory, to skip the head read when nobody else wrote the
	// head since (compare-and-swap tells). Each costs about TailBytes (the
	// deltas it wrote, kept to join them into the open chunks unread).
	// Default 4,096; -1 disables the cache.
	CacheThreads int
	// StepTimeout bounds one projection step's calls to the server (the
	// head and event reads, the delta, chunk, head and index writes, the
	// purges) together, when the context given to Run has no deadline:
	// a step still waiting for the server after StepTimeout fails with
	// context.DeadlineExceeded and is retried with backoff (FailureStep),
	// as any failed step. When Run's context has a deadline, that bounds
	// every step instead. Default 10 s (twice AckWait's default: a step
	// that takes longer than AckWait is delivered again meanwhile, which
	// costs an ack, nothing else). One context per step, instead of the
	// one nats.go builds for each call whose context has no deadline (its
	// default of 5 s per call), is a step's timer and a few heap objects
	// instead of one per call.
	StepTimeout time.Duration
	// CacheBytes bounds the memory of those cached heads (estimated: their
	// deltas' and tails' encoded bytes plus per-message overhead), least recently
	// projected evicted first. Default 64 MiB. A cache smaller than the
	// threads written at once costs a head read from KV per step, a large
	// share of the projector's CPU under round-robin traffic.
	CacheBytes int

	// Logger receives the runner's logs; nil discards them.
	Logger *slog.Logger
	// OnApply, when set, is called once for every event folded, after the
	// head that holds it was written. It is called from the projector's
	// worker goroutines, concurrently, and must be fast and not block.
	OnApply func(Applied)
	// OnStep, when set, is called after every projection step (one read,
	// fold and write of one thread), with the same rules as OnApply.
	OnStep func(Step)
	// OnFailure, when set, is called when a thread's projection fails (it
	// is retried with backoff) or an unreadable snapshot or index entry is
	// rebuilt from the log, with the same rules as OnApply.
	OnFailure func(Failure)
}

// Failure reports a projection that failed or a snapshot that had to be
// rebuilt.
type Failure struct {
	Tenant, Thread string
	// Seq is the highest trigger sequence of the failed step (0 for a
	// rebuild).
	Seq uint64
	// Reason is one of the Failure* constants (a metric label).
	Reason string
	// Err is what went wrong.
	Err error
}

// Failure reasons.
const (
	// FailureStep: a projection step failed; its triggers are retried.
	FailureStep = "step_failed"
	// FailureMisplaced: an event on this partition's stream belongs, by
	// events.Partition, to another partition; it is acked and not
	// projected (readers look for the thread in its own partition).
	FailureMisplaced = "misplaced_event"
	// FailureSnapshotRebuilt: the thread's head or a chunk was unreadable
	// (ErrCorrupt: garbage, or a newer format) and is rebuilt from the log.
	FailureSnapshotRebuilt = "snapshot_rebuilt"
	// FailureIndexRebuilt: the thread's index entry was unreadable and is
	// written again from its head.
	FailureIndexRebuilt = "index_rebuilt"
)

// Applied reports one event folded into a snapshot.
type Applied struct {
	Tenant, Thread string
	// Seq is the event's stream sequence.
	Seq uint64
	// Type and EventID are empty when the bytes did not decode.
	Type    events.Type
	EventID string
	// Code is "" when the event was applied, else why it was rejected.
	Code fold.Code
	// Lag is the time from the event's stream timestamp to the moment the
	// head holding it was written.
	Lag time.Duration
	// Behind is how many stream messages the projector's consumer had not
	// delivered yet when it delivered the trigger that led to this fold
	// (the consumer's num pending): the lag in sequence terms.
	Behind uint64
}

// Step reports one projection step of one thread.
type Step struct {
	Tenant, Thread string
	// From and To are the version before and after the step.
	From, To uint64
	// Events is the number of events folded; Rejected how many of them
	// were rejected.
	Events, Rejected int
	// ChunksWritten is the number of chunks created; HeadBytes the size of
	// the head written.
	ChunksWritten, HeadBytes int
	// Conflicts counts compare-and-swap conflicts met (another instance
	// wrote the head first) before this step succeeded.
	Conflicts int
	// LogReads counts the requests this step made to read events from the
	// stream: 0 when every event folded came with its trigger, chained to
	// the head by the OCC header (Nats-Expected-Last-Subject-Sequence) or
	// by this instance's delivery order (see the package doc); 1 for the
	// single next_by_subj check of a trigger that could not be chained;
	// plus one per batched read page.
	LogReads int
	// Took is the step's duration.
	Took time.Duration
}

// maxChunkBytes is the largest ChunkBytes: the default max payload (1 MiB)
// less payloadSlack.
const maxChunkBytes = 1<<20 - payloadSlack

// payloadSlack is the room a chunk leaves below the server's max payload.
const payloadSlack = 64 << 10

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	p := provision.DefaultConfig()
	return Config{
		Stream: p.Stream, SubjectPrefix: p.SubjectPrefix, SnapshotBucket: p.SnapshotBucket,
		IndexBucket: p.IndexBucket, KeyBucket: p.KeyBucket, Durable: "convlog-projector",
		ChunkBytes: 768 << 10, TailBytes: 32 << 10, Workers: 64, MaxBatch: 1000,
		MaxAckPending: 50_000, MaxTriggerBytes: 96 << 20, AckWait: 5 * time.Second, CacheThreads: 4096, CacheBytes: 64 << 20,
		StepTimeout: 10 * time.Second,
	}
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	set(&c.Stream, d.Stream)
	set(&c.SubjectPrefix, d.SubjectPrefix)
	set(&c.SnapshotBucket, d.SnapshotBucket)
	set(&c.IndexBucket, d.IndexBucket)
	set(&c.KeyBucket, d.KeyBucket)
	set(&c.Durable, d.Durable)
	seti := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	seti(&c.ChunkBytes, d.ChunkBytes)
	if c.TailBytes == 0 {
		c.TailBytes = min(d.TailBytes, c.ChunkBytes)
	}
	seti(&c.Workers, d.Workers)
	seti(&c.MaxBatch, d.MaxBatch)
	seti(&c.MaxAckPending, d.MaxAckPending)
	seti(&c.MaxTriggerBytes, d.MaxTriggerBytes)
	seti(&c.CacheThreads, d.CacheThreads)
	seti(&c.CacheBytes, d.CacheBytes)
	if c.AckWait == 0 {
		c.AckWait = d.AckWait
	}
	if c.StepTimeout == 0 {
		c.StepTimeout = d.StepTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c at once (errors.Join).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("projector: "+format, args...)) }
	if err := (events.Subjects{Prefix: c.SubjectPrefix}).Validate(); err != nil {
		bad("subject prefix: %v", err)
	}
	if c.PinnedTTL < 0 || (c.PinnedTTL > 0 && c.PinnedTTL <= 5*time.Second) {
		bad("pinned TTL must be 0 or more than 5s (the pull expiry), got %s", c.PinnedTTL)
	}
	if c.Partition < 0 || c.Partition >= provision.MaxPartitions {
		bad("partition must be 0..%d, got %d", provision.MaxPartitions-1, c.Partition)
	}
	if c.SnapshotBucket == c.IndexBucket {
		bad("snapshot and index buckets must differ, both are %q", c.SnapshotBucket)
	}
	if c.ChunkBytes < 1<<10 || c.ChunkBytes > maxChunkBytes {
		bad("ChunkBytes must be 1 KiB..960 KiB, got %d", c.ChunkBytes)
	}
	if c.TailBytes < 256 || c.TailBytes > c.ChunkBytes {
		bad("TailBytes must be 256..ChunkBytes (%d), got %d", c.ChunkBytes, c.TailBytes)
	}
	if c.Workers < 1 {
		bad("Workers must be at least 1, got %d", c.Workers)
	}
	if c.MaxBatch < 1 {
		bad("MaxBatch must be at least 1, got %d", c.MaxBatch)
	}
	if c.MaxAckPending < 1 {
		bad("MaxAckPending must be at least 1, got %d", c.MaxAckPending)
	}
	if c.MaxTriggerBytes < 1 {
		bad("MaxTriggerBytes must be at least 1, got %d", c.MaxTriggerBytes)
	}
	if c.AckWait < time.Second {
		bad("AckWait must be at least 1s, got %s", c.AckWait)
	}
	if c.StepTimeout < 0 {
		bad("StepTimeout must be 0 (default) or more, got %s", c.StepTimeout)
	}
	if c.CacheBytes < 0 {
		bad("CacheBytes must be 0 (default) or more, got %d", c.CacheBytes)
	}
	if c.CacheThreads < -1 {
		bad("CacheThreads must be -1 (off) or more, got %d", c.CacheThreads)
	}
	return errors.Join(errs...)
}

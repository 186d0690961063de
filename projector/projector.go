package projector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/lru"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/shutdown"
	"github.com/convlog/convlog/snapstore"
	"github.com/convlog/convlog/threadkey"
)

// Projector is the runner: it consumes the event stream with a durable
// pull consumer shared by every instance and keeps each thread's snapshot
// (head and chunks) and index entry up to date. See the package doc for the
// scheme that keeps several instances correct.
//
// Create it with [New], start it with [Projector.Run]. Its methods are safe
// for concurrent use.
type Projector struct {
	js       jetstream.JetStream
	cfg      Config
	log      *slog.Logger
	subjects events.Subjects
	ready    chan struct{}
	started  atomic.Bool
	gate     shutdown.Gate
	// defaultChunk: cfg.ChunkBytes was left to its default, which Run
	// lowers to fit the server's max payload.
	defaultChunk bool

	// Bound by Run.
	store  *snapstore.Writer
	reader *client.Client // reads the sources of forks by reference (any partition)
	// keys are the thread data keys of this partition (its client's).
	keys *threadkey.Keys
	// base names the deployment (partition 0); k is its partition count
	// (set by bind).
	base provision.Config
	k    int

	mu      sync.Mutex
	threads map[string]*threadState // threads with queued or running work
	// held is the heap kept by the triggers queued on threads or being
	// processed (triggerCost; Config.MaxTriggerBytes), heldN how many
	// they are; drained is signalled when workers release some. All under
	// mu.
	held, heldN int
	drained     *sync.Cond
	// cache keeps the heads this instance wrote or read last, least
	// recently used evicted first (Config.CacheThreads, CacheBytes). A
	// cached head may be stale (another instance wrote since): the
	// compare-and-swap of the next step finds out and drops it.
	cache  *lru.Cache[string, *snapstore.Head]
	window *deliveryWindow // used by Run's goroutine only
}

// threadState is one thread with triggers to process. At most one worker
// processes it at a time (running).
type threadState struct {
	tenant, thread, subject string
	k                       string // key()
	msgs                    []delivery
	running                 bool
	// rebuild: the thread's head or one of its chunks could not be read;
	// the next step folds the log from the start over it (see cursor).
	// Only the worker that runs the thread touches it.
	rebuild bool
	// redelivered: a trigger of the running step was delivered before, so
	// a step may have crashed or been cancelled after writing chunks (see
	// Projector.head). Set by process, read by the worker that runs it.
	redelivered bool
}

// delivery is one trigger as the dispatcher received it: the message, its
// metadata (nil if it did not parse) and, when the dispatcher's
// deliveryWindow proves it, the stream sequence of the thread's event
// before it (prev, hasPrev).
type delivery struct {
	msg     jetstream.Msg
	md      *jetstream.MsgMetadata
	prev    uint64
	hasPrev bool
	size    int // bytes counted in Projector.held
}

// key is the thread's key in Projector.threads and the head cache,
// "<tenant>.<thread>", built once by dispatch.
func (t *threadState) key() string { return t.k }

// newDelivery is msg held as a trigger, with its metadata md (nil if it
// did not parse), counted at the heap it keeps (triggerCost).
func newDelivery(msg jetstream.Msg, md *jetstream.MsgMetadata) delivery {
	return delivery{msg: msg, md: md, size: triggerCost(msg)}
}

// triggerOverhead is the heap a held trigger keeps beyond the bytes of
// its subject, reply subject, headers and data: nats.go's message and
// header map, the jetstream message, its parsed metadata, the delivery
// and the allocator's rounding. Measured with nats.go v1.55 by
// TestHeldTriggerCountsTheHeapItKeeps, which fails when it is 25% off.
const triggerOverhead = 1024

// triggerCost is the heap msg keeps while it is held as a trigger, in
// bytes: its subject, reply subject, header keys and values and data,
// and triggerOverhead (Projector.held, Config.MaxTriggerBytes).
func triggerCost(msg jetstream.Msg) int {
	n := len(msg.Subject()) + len(msg.Reply()) + len(msg.Data()) + triggerOverhead
	for k, vs := range msg.Headers() {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}

// New returns a projector for the stream and buckets named in cfg, reached
// through js. It validates cfg (returning every problem at once) but does
// not contact the server: [Projector.Run] does.
func New(js jetstream.JetStream, cfg Config) (*Projector, error) {
	if js == nil {
		return nil, errors.New("projector: New needs a JetStream handle")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	defaultChunk := cfg.ChunkBytes == 0
	cfg = cfg.withDefaults()
	base := provision.Config{Stream: cfg.Stream, SubjectPrefix: cfg.SubjectPrefix, SnapshotBucket: cfg.SnapshotBucket,
		IndexBucket: cfg.IndexBucket, KeyBucket: cfg.KeyBucket}
	pc := base.Partition(cfg.Partition)
	cfg.Stream, cfg.SubjectPrefix, cfg.SnapshotBucket, cfg.IndexBucket, cfg.KeyBucket = pc.Stream, pc.SubjectPrefix, pc.SnapshotBucket, pc.IndexBucket, pc.KeyBucket
	p := &Projector{base: base,
		js: js, cfg: cfg, defaultChunk: defaultChunk, log: cfg.Logger, subjects: events.Subjects{Prefix: cfg.SubjectPrefix},
		ready: make(chan struct{}), threads: map[string]*threadState{}, cache: lru.New[string, *snapstore.Head](cfg.CacheThreads, int64(cfg.CacheBytes)),
		window: newDeliveryWindow(),
	}
	p.drained = sync.NewCond(&p.mu)
	return p, nil
}

// Ready is closed once Run has bound the stream and buckets, created or
// joined the durable consumer, and started consuming. It stays open if Run
// fails before that.
func (p *Projector) Ready() <-chan struct{} { return p.ready }

// Held is what a projector instance holds of its consumer's deliveries:
// the triggers queued on threads or being folded, not yet acked (the
// consumer's pull buffer not included).
type Held struct {
	// Triggers is how many.
	Triggers int
	// Bytes is the heap they keep, in bytes, as counted against
	// Config.MaxTriggerBytes: each one's subject, reply subject, headers
	// and data, and about 1 KiB for nats.go's message, the parsed headers
	// and metadata (measured with nats.go v1.55).
	Bytes int
}

// Held returns what the projector holds now (zero before Run). Safe for
// concurrent use; agentd exports it as convlog_projector_held_triggers and
// convlog_projector_held_bytes.
func (p *Projector) Held() Held {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Held{Triggers: p.heldN, Bytes: p.held}
}

// KVWritten returns what the projector wrote to its snapshot and index
// buckets so far (snapstore.Written: heads, chunks, index entries, as
// stored), zero before Ready: with the bytes of the events it projected,
// the write amplification of projection. Safe for concurrent use.
func (p *Projector) KVWritten() snapstore.Written {
	select {
	case <-p.ready:
		return p.store.Written()
	default:
		return snapstore.Written{}
	}
}

// Run projects until ctx is cancelled or a fatal error occurs. It may be
// called once per Projector.
//
// Start-up: it looks up the stream, both buckets (they must exist: see
// internal/provision or `agentd provision`) and creates or updates the
// durable consumer cfg.Durable (no filter subject: every message of the
// stream, the audit checkpoints acked and skipped, which is the server's
// cheapest next-message path, client.DurableConfig.AllSubjects; explicit
// ack, deliver all; a consumer of an older version, filtered on
// "<prefix>.*.*", is updated), then closes Ready. Several instances (processes or
// Projectors) with the same Durable share the work.
//
// Shutdown, when ctx is cancelled:
//  1. stop pulling: the consumer subscription is drained, and the triggers
//     already buffered are handed to the workers;
//  2. abort projection steps in flight: their KV writes fail with ctx's
//     error, which is safe at any point (see the package doc);
//  3. nak every trigger not acked, so another instance (or the next start)
//     gets it at once instead of after AckWait (triggers the server sent
//     to the pull request after the drain began are lost in transit and
//     come back after AckWait, 5 s by default);
//  4. wait for every goroutine it started, then return nil.
//
// Errors: a missing stream, bucket or consumer permission, or a server
// whose max payload is too small for cfg.ChunkBytes, before Ready; after
// Ready, Run returns only when the consumer subscription fails for good.
func (p *Projector) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("projector: Run called twice")
	}
	ctx, end := p.gate.Begin(ctx)
	defer end()
	if p.gate.Requested() {
		return nil // Shutdown came first
	}
	it, err := p.bind(ctx)
	if err != nil {
		return err
	}
	// The ready queue holds each thread with unacked triggers at most once,
	// so MaxAckPending bounds it and the dispatcher never waits on it:
	// while a thread waits for a worker, its triggers pile up and one step
	// folds them all.
	work := make(chan *threadState, p.cfg.MaxAckPending+p.cfg.Workers)
	var wg sync.WaitGroup
	for range p.cfg.Workers {
		wg.Go(func() { p.worker(ctx, work) })
	}
	stop := context.AfterFunc(ctx, it.Drain)
	defer stop()
	close(p.ready)
	p.log.Info("projector running", "stream", p.cfg.Stream, "consumer", p.cfg.Durable, "workers", p.cfg.Workers)

	var runErr error
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, client.ErrDurableStopped) {
				if ctx.Err() == nil {
					runErr = fmt.Errorf("projector: consumer %s/%s stopped: %w", p.cfg.Stream, p.cfg.Durable, err)
				}
				break
			}
			p.log.Warn("projector: consumer error", "err", err)
			continue
		}
		p.dispatch(msg, work)
	}
	it.Stop()
	close(work)
	wg.Wait()
	p.log.Info("projector stopped", "consumer", p.cfg.Durable)
	return runErr
}

// Shutdown stops Run as cancelling its context does (the steps of the
// shutdown are in Run's doc) and waits until Run has returned, or until
// ctx ends: then it returns ctx's error, wrapped, and Run goes on
// stopping. Called before Run, it makes Run return at once. It is safe to
// call concurrently and more than once.
func (p *Projector) Shutdown(ctx context.Context) error { return p.gate.Shutdown(ctx) }

// bind looks up the stream and buckets and creates or joins the consumer.
func (p *Projector) bind(ctx context.Context) (*client.Durable, error) {
	c := p.cfg
	var errs []error
	if _, err := p.js.Stream(ctx, c.Stream); err != nil {
		errs = append(errs, fmt.Errorf("projector: stream %s: %w", c.Stream, err))
	}
	if mp := p.js.Conn().MaxPayload(); mp > 0 && mp < int64(c.ChunkBytes+payloadSlack) {
		if fit := int(mp) - payloadSlack; p.defaultChunk && fit >= 1<<10 {
			// Set before any worker starts, so no step sees the old value.
			p.cfg.ChunkBytes = fit
			p.cfg.TailBytes = min(p.cfg.TailBytes, fit)
		} else {
			errs = append(errs, fmt.Errorf("projector: the server's max payload (%d bytes) is too small for ChunkBytes %d (needs ChunkBytes+64 KiB)", mp, c.ChunkBytes))
		}
	}
	// The reader of a fork by reference's source (client.ApplyFork), and
	// the keeper of thread data keys (its Keys open events and seal and
	// open snapshot values).
	reader, err := client.New(ctx, p.js.Conn(), client.Config{Logger: p.log, Resources: p.base})
	if err != nil {
		errs = append(errs, err)
		return nil, errors.Join(errs...)
	}
	parts := reader.Partitions()
	if c.Partition >= len(parts) {
		return nil, fmt.Errorf("projector: partition %d of a deployment of %d partitions", c.Partition, len(parts))
	}
	p.k, p.keys = len(parts), parts[c.Partition].Keys()
	store, err := snapstore.NewWriter(ctx, p.js, snapstore.WriterConfig{
		SnapshotBucket: c.SnapshotBucket, IndexBucket: c.IndexBucket,
		ChunkBytes: p.cfg.ChunkBytes, TailBytes: p.cfg.TailBytes, Logger: p.log,
		OnIndexRebuilt: func(tenant, thread string, err error) {
			p.report(Failure{Tenant: tenant, Thread: thread, Reason: FailureIndexRebuilt, Err: err})
		},
		Sealer: p.keys,
	})
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.store, p.reader = store, reader
	// A short pull expiry (heartbeat 2.5 s) notices a consumer leader lost
	// with its NATS node within seconds instead of the default 30 s.
	return client.ConsumeDurable(ctx, p.js, c.Stream, p.subjects, client.DurableConfig{
		Name:        c.Durable,
		Description: "convlog projector: triggers snapshot updates (shared by every instance)",
		// Unfiltered: the server's cheapest way to the next message (see
		// AllSubjects); dispatch acks the audit checkpoints.
		AllSubjects:     true,
		AckWait:         c.AckWait,
		MaxAckPending:   c.MaxAckPending,
		PullMaxMessages: min(512, c.MaxAckPending),
		// The pull buffer by bytes (nats.go takes bytes or messages, not
		// both): room for two of the largest events the server takes.
		// Its messages are not yet held (not in MaxTriggerBytes).
		PullMaxBytes: 2*int(p.js.Conn().MaxPayload()) + payloadSlack,
		PullExpiry:   5 * time.Second,
		PinnedTTL:    c.PinnedTTL,
		Logger:       p.log,
	})
}

// dispatch queues msg on its thread and hands the thread to a worker if no
// worker has it. It runs on Run's goroutine, in delivery order.
func (p *Projector) dispatch(msg jetstream.Msg, work chan<- *threadState) {
	md, mdErr := msg.Metadata()
	if mdErr != nil {
		md = nil
	}
	tenant, thread, err := p.subjects.Parse(msg.Subject())
	key := ""
	if err == nil {
		key = tenant + "." + thread
		if want := events.Partition(tenant, thread, p.k); want != p.cfg.Partition {
			err = fmt.Errorf("thread %s/%s belongs to partition %d, not %d", tenant, thread, want, p.cfg.Partition)
			p.report(Failure{Tenant: tenant, Thread: thread, Reason: FailureMisplaced, Err: err})
			key = ""
		}
	}
	d := newDelivery(msg, md)
	if md != nil {
		d.prev, d.hasPrev = p.window.observe(key, md.Sequence.Consumer, md.Sequence.Stream, md.NumDelivered, true)
	} else {
		p.window.observe(key, 0, 0, 0, false)
	}
	if err != nil {
		// A stream-level message (an audit checkpoint), or a subject only
		// a raw publisher can put in the stream; it has no snapshot key.
		// Nothing to project.
		_ = msg.Ack()
		if p.streamLevel(msg.Subject()) {
			return
		}
		seq := uint64(0)
		if md != nil {
			seq = md.Sequence.Stream
		}
		p.log.Warn("projector: skipping a message that is no event of this partition's threads", "subject", msg.Subject(), "seq", seq, "err", err)
		return
	}
	// Most triggers of a burst are for events an earlier step already
	// folded (a step reads every event of its thread, not just its
	// trigger's): ack those at once. Versions only grow, so a cached head
	// at or past seq, with its index entry written, proves it.
	if c, ok := p.cache.Get(key); ok && md != nil && c.Settled(md.Sequence.Stream) {
		_ = msg.Ack()
		return
	}
	p.mu.Lock()
	ts := p.threads[key]
	if ts == nil {
		ts = &threadState{tenant: tenant, thread: thread, subject: msg.Subject(), k: key}
		p.threads[key] = ts
	}
	ts.msgs = append(ts.msgs, d)
	p.held += d.size
	p.heldN++
	start := !ts.running
	ts.running = true
	p.mu.Unlock()
	if start {
		// Workers drain work until it is closed, also after ctx ends.
		work <- ts
	}
	// Over MaxTriggerBytes: take no more deliveries until the workers
	// (which never wait for dispatch, and go on after ctx ends) have
	// folded some. The trigger just queued has a worker or will get one.
	p.mu.Lock()
	for p.held > p.cfg.MaxTriggerBytes {
		p.drained.Wait()
	}
	p.mu.Unlock()
}

// streamLevel reports whether subject is one of the stream's own
// subjects beside the threads' ("<prefix>.<name>": the audit checkpoints
// on "<prefix>.audit", audit.CheckpointSubject), which the unfiltered
// consumer delivers too.
func (p *Projector) streamLevel(subject string) bool {
	name, ok := strings.CutPrefix(subject, cmp.Or(p.subjects.Prefix, events.DefaultPrefix)+".")
	return ok && name != "" && !strings.Contains(name, ".")
}

// worker processes threads until work is closed.
func (p *Projector) worker(ctx context.Context, work <-chan *threadState) {
	for ts := range work {
		for {
			p.mu.Lock()
			msgs := ts.msgs
			ts.msgs = nil
			if len(msgs) == 0 {
				ts.running = false
				delete(p.threads, ts.key())
				p.mu.Unlock()
				break
			}
			p.mu.Unlock()
			p.process(ctx, ts, msgs)
			size := 0
			for _, d := range msgs {
				size += d.size
			}
			p.mu.Lock()
			p.held -= size
			p.heldN -= len(msgs)
			p.mu.Unlock()
			p.drained.Broadcast()
		}
	}
}

// process brings the thread's snapshot up to at least the highest trigger
// sequence, then acks the triggers it covers.
func (p *Projector) process(ctx context.Context, ts *threadState, ds []delivery) {
	var target, behind uint64
	delivered := uint64(0)
	triggers := make([]rawEvent, 0, len(ds))
	for _, d := range ds {
		md := d.md
		if md == nil {
			continue
		}
		target = max(target, md.Sequence.Stream)
		behind = md.NumPending
		delivered = max(delivered, md.NumDelivered)
		t := rawEvent{seq: md.Sequence.Stream, time: md.Timestamp, data: d.msg.Data(), prev: d.prev, hasPrev: d.hasPrev}
		if h := d.msg.Headers(); h != nil && h.Get(jetstream.ExpectedLastSubjSeqSubjHeader) == "" {
			if v := h.Get(jetstream.ExpectedLastSubjSeqHeader); v != "" {
				if prev, err := strconv.ParseUint(v, 10, 64); err == nil {
					t.prev, t.hasPrev = prev, true
				}
			}
		}
		triggers = append(triggers, t)
	}
	slices.SortFunc(triggers, func(a, b rawEvent) int { return cmp.Compare(a.seq, b.seq) })
	triggers = slices.CompactFunc(triggers, func(a, b rawEvent) bool { return a.seq == b.seq })
	if ctx.Err() != nil {
		nakAll(ds, 0)
		return
	}
	ts.redelivered = delivered > 1
	version, err := p.project(ctx, ts, behind, triggers)
	if err != nil {
		if ctx.Err() != nil {
			nakAll(ds, 0)
			return
		}
		delay := min(time.Duration(1<<min(delivered, 6))*50*time.Millisecond, 5*time.Second)
		p.log.Error("projector: projection failed; will retry", "tenant", ts.tenant, "thread", ts.thread, "seq", target, "err", err, "retry_in", delay)
		p.report(Failure{Tenant: ts.tenant, Thread: ts.thread, Seq: target, Reason: FailureStep, Err: err})
		nakAll(ds, delay)
		return
	}
	var late []delivery
	for _, d := range ds {
		if d.seq() <= version {
			_ = d.msg.Ack()
		} else {
			late = append(late, d)
		}
	}
	if len(late) == 0 {
		return
	}
	// The triggering event is not readable yet (a lagging replica served
	// the read) or no longer (its subject was purged without an erasure
	// marker after it). Retry a few times, then let it go: the log still
	// has whatever is there, and the next event of the thread triggers a
	// projection again.
	if delivered >= 5 {
		for _, d := range late {
			p.log.Warn("projector: trigger not readable after retries; acked", "tenant", ts.tenant, "thread", ts.thread, "seq", seqOf(d.msg), "version", version)
			_ = d.msg.Ack()
		}
		return
	}
	nakAll(late, time.Duration(delivered+1)*100*time.Millisecond)
}

// seq is the stream sequence of the trigger, 0 when its metadata did not
// parse (such a trigger is acked with the others).
func (d delivery) seq() uint64 {
	if d.md == nil {
		return 0
	}
	return d.md.Sequence.Stream
}

func seqOf(m jetstream.Msg) uint64 {
	if md, err := m.Metadata(); err == nil {
		return md.Sequence.Stream
	}
	return 0
}

func nakAll(ds []delivery, delay time.Duration) {
	for _, d := range ds {
		m := d.msg
		if delay > 0 {
			_ = m.NakWithDelay(delay)
		} else {
			_ = m.Nak()
		}
	}
}

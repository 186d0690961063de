package audit

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/lru"
)

// Defaults of [Config].
const (
	DefaultStream        = "CONVLOG"
	DefaultSubjectPrefix = "conv"
	// DefaultInterval is the cadence: a checkpoint at most this long after
	// the first event it covers was delivered to the checkpointer. Each
	// checkpoint records its checkpointer's (Checkpoint.IntervalMS).
	DefaultInterval = time.Second
	// DefaultMaxBytes caps one checkpoint's body (about 3,000 events of
	// one thread; fewer across many threads): a burst is cut into several
	// checkpoints, each below the server's max payload.
	DefaultMaxBytes = 256 << 10
	// DefaultHeadsBucket is Config.HeadsBucket's default.
	DefaultHeadsBucket = "convlog_audit"
	// DefaultCacheThreads is Config.CacheThreads's default.
	DefaultCacheThreads = 100_000
)

// CheckpointSubject is the subject of the signed checkpoints in the event
// stream: "<prefix>.audit" (two tokens beside the three of a thread
// subject, so no thread filter matches it; provision adds it to the
// stream's subjects).
func CheckpointSubject(prefix string) string { return cmp.Or(prefix, DefaultSubjectPrefix) + ".audit" }

// Config configures a [Checkpointer]. Key is required; the zero value of
// every other field means its default.
type Config struct {
	// Key signs the checkpoints (LoadOrCreateKey).
	Key ed25519.PrivateKey
	// Stream is the event stream (default DefaultStream).
	Stream string
	// SubjectPrefix is the thread subject prefix (default
	// DefaultSubjectPrefix).
	SubjectPrefix string
	// Interval is the cadence (default DefaultInterval), recorded in
	// every checkpoint (Checkpoint.IntervalMS, in milliseconds rounded
	// up): Verify fails when stored events after the newest checkpoint
	// are older than it allows.
	Interval time.Duration
	// MaxBytes caps a checkpoint's body (default DefaultMaxBytes, at
	// least 4 KiB, and at most half the connection's max payload).
	MaxBytes int
	// HeadsBucket is the KV bucket that keeps each thread subject's last
	// checkpointed head (key "h.<subject>") and the checkpointer's
	// position (key "position"), so a start reads only the checkpoints
	// after the position and memory holds only CacheThreads heads.
	// Default DefaultHeadsBucket; created with the stream's replicas.
	HeadsBucket string
	// CacheThreads bounds the heads kept in memory (default
	// DefaultCacheThreads, about 100 bytes each); others are read from
	// HeadsBucket when their thread is written again.
	CacheThreads int
	// OnCheckpoint, when set, is called after each checkpoint is stored,
	// with the checkpoint and its message's stream sequence (from the
	// Run goroutine; it must not block).
	OnCheckpoint func(c Checkpoint, msgSeq uint64)
	// OnRestart, when set, is called each time Run reloads after an
	// error (from the Run goroutine; it must not block).
	OnRestart func(err error)
	// Logger gets restarts and errors (nil = discard).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Stream = cmp.Or(c.Stream, DefaultStream)
	c.SubjectPrefix = cmp.Or(c.SubjectPrefix, DefaultSubjectPrefix)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.MaxBytes = max(cmp.Or(c.MaxBytes, DefaultMaxBytes), 4<<10)
	c.HeadsBucket = cmp.Or(c.HeadsBucket, DefaultHeadsBucket)
	c.CacheThreads = cmp.Or(c.CacheThreads, DefaultCacheThreads)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Checkpointer computes every thread subject's hash chain from the stream
// and stores signed checkpoints of the heads in the stream (see the package
// doc). Run it in one process per stream or in several: the checkpoints
// are published with an expected last subject sequence, so two
// checkpointers never fork the checkpoint chain (the one that loses
// reloads and goes on from the winner's checkpoint).
type Checkpointer struct {
	js    jetstream.JetStream
	cfg   Config
	ready chan struct{}

	// state, owned by Run's goroutine
	kv        jetstream.KeyValue
	heads     *lru.Cache[string, headRef] // checkpointed heads (a cache of kv)
	covered   uint64                      // the last thread sequence of the last checkpoint
	lastMsg   uint64                      // the last checkpoint message's stream sequence
	lastBody  Hash
	created   time.Time // the stream's creation time, recorded in the position
	readyOnce bool
}

// NewCheckpointer returns a checkpointer over js. It returns an error when
// cfg has no key.
func NewCheckpointer(js jetstream.JetStream, cfg Config) (*Checkpointer, error) {
	if len(cfg.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("audit: Config.Key must be an Ed25519 private key")
	}
	cfg = cfg.withDefaults()
	// A checkpoint must fit in one message: keep it under half the
	// server's max payload (the estimate of its size is rough).
	if mp := js.Conn().MaxPayload(); mp > 0 {
		cfg.MaxBytes = max(min(cfg.MaxBytes, int(mp/2)), 4<<10)
	}
	return &Checkpointer{js: js, cfg: cfg, ready: make(chan struct{})}, nil
}

// PublicKey is the key that verifies this checkpointer's signatures.
func (c *Checkpointer) PublicKey() ed25519.PublicKey { return c.cfg.Key.Public().(ed25519.PublicKey) }

// Ready is closed once Run has read the existing checkpoints and started
// consuming the stream.
func (c *Checkpointer) Ready() <-chan struct{} { return c.ready }

// Run checkpoints until ctx ends, and returns nil then. Events delivered
// but not yet checkpointed when ctx ends are checkpointed by the next Run
// (it starts after the last stored checkpoint). A failed publish (a
// conflict with another checkpointer, a timeout whose outcome is unknown,
// a lost connection) reloads the state from the stream and goes on, after
// a pause that doubles from 100 ms to 5 s.
func (c *Checkpointer) Run(ctx context.Context) error {
	pause := 100 * time.Millisecond
	for {
		err := c.run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.cfg.Logger.Warn("audit checkpointer restarting", "err", err, "pause", pause)
		if c.cfg.OnRestart != nil {
			c.cfg.OnRestart(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// run loads the state, then consumes the stream and publishes a checkpoint
// when the window reaches MaxBytes or Interval after its first event, until
// ctx ends or a step fails. It returns ctx's error or the error of load,
// consume, Next, add or publish.
func (c *Checkpointer) run(ctx context.Context) error {
	if err := c.load(ctx); err != nil {
		return err
	}
	it, err := c.consume(ctx)
	if err != nil {
		return err
	}
	defer it.Stop()
	if !c.readyOnce {
		c.readyOnce = true
		close(c.ready)
	}
	cpSubject := CheckpointSubject(c.cfg.SubjectPrefix)
	p := newPending()
	var deadline time.Time
	for {
		m, err := nextBefore(ctx, it, deadline)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded):
		case err != nil:
			return fmt.Errorf("audit: next: %w", err)
		case m.Subject() == cpSubject:
			// A checkpoint (this checkpointer's or an earlier one's): not a
			// thread's event, and no reason to write another.
			continue
		default:
			if err := c.add(ctx, &p, m); err != nil {
				return err
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(c.cfg.Interval)
			}
			if p.bytes < c.cfg.MaxBytes {
				continue
			}
		}
		if p.last == 0 || (time.Now().Before(deadline) && p.bytes < c.cfg.MaxBytes) {
			continue
		}
		if err := c.publish(ctx, &p); err != nil {
			return err
		}
		p = newPending()
		deadline = time.Time{}
	}
}

// consume starts an ordered consumer of the whole stream from the sequence
// after the last checkpointed one, and returns its message iterator. It
// returns the errors of creating the consumer and of starting to consume.
func (c *Checkpointer) consume(ctx context.Context) (jetstream.MessagesContext, error) {
	// No filter subject: the checkpoints themselves come too and are
	// skipped by run; an unfiltered consumer is nats-server's cheapest
	// next-message path (a filter "<prefix>.*.*" over the stream's two
	// subjects is matched against every subject of the message block, per
	// delivery: see client.DurableConfig.AllSubjects).
	cons, err := c.js.OrderedConsumer(ctx, c.cfg.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: c.covered + 1})
	if err != nil {
		return nil, fmt.Errorf("audit: consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("audit: consume: %w", err)
	}
	return it, nil
}

// nextBefore waits for the next message of it until deadline (at least a
// millisecond; an hour when deadline is zero) or ctx's end. It returns
// Next's error: nats.ErrTimeout or context.DeadlineExceeded when the wait
// ran out.
func nextBefore(ctx context.Context, it jetstream.MessagesContext, deadline time.Time) (jetstream.Msg, error) {
	wait := time.Hour
	if !deadline.IsZero() {
		wait = max(time.Until(deadline), time.Millisecond)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return it.Next(jetstream.NextContext(wctx))
}

// add puts m, an event of a thread subject, into p: its leaf, its
// subject's new head (after the subject's last checkpointed head, read by
// c.head on the subject's first event in p) and p's size estimate. It
// returns the errors of m's metadata and of c.head.
func (c *Checkpointer) add(ctx context.Context, p *pending, m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("audit: metadata: %w", err)
	}
	r := Record{Subject: m.Subject(), Seq: md.Sequence.Stream, Time: md.Timestamp, Header: m.Headers(), Data: m.Data()}
	prev, ok := p.heads[r.Subject]
	if !ok {
		ref, err := c.head(ctx, r.Subject)
		if err != nil {
			return err
		}
		p.prev[r.Subject], prev = ref, ref.head
	}
	leaf := Leaf(r)
	p.heads[r.Subject] = Next(prev, leaf)
	p.leaves[r.Subject] = append(p.leaves[r.Subject], LeafEntry{Seq: r.Seq, Leaf: leaf})
	p.last = r.Seq
	p.bytes += 80
	if len(p.leaves[r.Subject]) == 1 {
		p.bytes += 2*len(r.Subject) + 160
	}
	return nil
}

// pending is what was delivered since the last checkpoint.
type pending struct {
	prev   map[string]headRef // each thread's head before the window
	heads  map[string]Hash
	leaves map[string][]LeafEntry
	last   uint64
	bytes  int
}

func newPending() pending {
	return pending{prev: map[string]headRef{}, heads: map[string]Hash{}, leaves: map[string][]LeafEntry{}}
}

// headRef is a subject's last checkpointed head and the stream sequence
// of the checkpoint message that named it (0: never checkpointed). In the
// heads bucket: the 32 bytes of the head, then the sequence as 8 bytes big
// endian.
type headRef struct {
	head Hash
	cp   uint64
}

func (r headRef) bytes() []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), r.head[:]...), r.cp)
}

func parseHeadRef(b []byte) (headRef, bool) {
	var r headRef
	if len(b) != len(r.head)+8 {
		return r, false
	}
	copy(r.head[:], b)
	r.cp = binary.BigEndian.Uint64(b[len(r.head):])
	return r, true
}

// head is subject's last checkpointed head: from the cache, else the heads
// bucket, else the zero hash (a subject never checkpointed).
func (c *Checkpointer) head(ctx context.Context, subject string) (headRef, error) {
	if r, ok := c.heads.Get(subject); ok {
		return r, nil
	}
	r, err := readHeadRef(ctx, c.kv, subject)
	if err != nil {
		return r, fmt.Errorf("%w (bucket %s)", err, c.cfg.HeadsBucket)
	}
	c.heads.Put(subject, r, 1)
	return r, nil
}

// readHeadRef reads subject's entry of a heads bucket (the zero headRef
// when it has none).
func readHeadRef(ctx context.Context, kv jetstream.KeyValue, subject string) (headRef, error) {
	e, err := kv.Get(ctx, headKey(subject))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return headRef{}, nil
	case err != nil:
		return headRef{}, fmt.Errorf("audit: head of %s: %w", subject, err)
	}
	r, ok := parseHeadRef(e.Value())
	if !ok {
		return r, fmt.Errorf("audit: head of %s is %d bytes, not %d", subject, len(e.Value()), len(r.head)+8)
	}
	return r, nil
}

func headKey(subject string) string { return "h." + subject }

// position is the heads bucket's "position" value: the last checkpoint
// whose heads the bucket holds, and the creation time of the stream it is
// in (a stream deleted and created again has another).
type position struct {
	Covered       uint64    `json:"covered"`
	LastMsg       uint64    `json:"last_msg"`
	LastBody      string    `json:"last_body"`
	StreamCreated time.Time `json:"stream_created,omitzero"`
}

// storeHeads writes heads and then the position to the heads bucket
// (asynchronous publishes, then one wait), and into the cache. A crash in
// between is repaired by the next load, which re-applies every checkpoint
// after the stored position.
func (c *Checkpointer) storeHeads(ctx context.Context, heads map[string]Hash, pos position) error {
	var futures []jetstream.PubAckFuture
	for subj, h := range heads {
		f, err := c.js.PublishAsync("$KV."+c.cfg.HeadsBucket+"."+headKey(subj), headRef{h, pos.LastMsg}.bytes())
		if err != nil {
			return fmt.Errorf("audit: store head of %s: %w", subj, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("audit: store head of %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b, err := json.Marshal(pos)
	if err != nil {
		return err
	}
	if _, err := c.kv.Put(ctx, "position", b); err != nil {
		return fmt.Errorf("audit: store position: %w", err)
	}
	for subj, h := range heads {
		c.heads.Put(subj, headRef{h, pos.LastMsg}, 1)
	}
	return nil
}

func (c *Checkpointer) publish(ctx context.Context, p *pending) error {
	cp := Checkpoint{V: CheckpointVersion, Stream: c.cfg.Stream, From: c.covered + 1, Seq: p.last,
		Time: time.Now().UTC(), Prev: c.lastBody.String(), // "" before the first: the zero hash
		IntervalMS: intervalMS(c.cfg.Interval)}
	for _, subj := range slices.Sorted(maps.Keys(p.leaves)) {
		cp.Threads = append(cp.Threads, ThreadHeads{Subject: subj, Prev: p.prev[subj].head.String(),
			PrevCheckpoint: p.prev[subj].cp, Head: p.heads[subj].String(), Leaves: p.leaves[subj]})
	}
	body, sig, pub, err := Sign(cp, c.cfg.Key)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: CheckpointSubject(c.cfg.SubjectPrefix), Data: body,
		Header: nats.Header{HeaderSignature: {sig}, HeaderKey: {pub}}}
	ack, err := c.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(c.cfg.Stream), jetstream.WithExpectLastSequencePerSubject(c.lastMsg))
	if err != nil {
		return fmt.Errorf("audit: publish checkpoint of %d..%d: %w", cp.From, cp.Seq, err)
	}
	c.covered, c.lastMsg, c.lastBody = cp.Seq, ack.Sequence, BodyHash(body)
	if err := c.storeHeads(ctx, p.heads, c.position()); err != nil {
		return err
	}
	if c.cfg.OnCheckpoint != nil {
		c.cfg.OnCheckpoint(cp, ack.Sequence)
	}
	return nil
}

// intervalMS is d in milliseconds, rounded up, at least 1.
func intervalMS(d time.Duration) int64 {
	return max(int64((d+time.Millisecond-1)/time.Millisecond), 1)
}

// position is the heads bucket's position after the last checkpoint.
func (c *Checkpointer) position() position {
	return position{Covered: c.covered, LastMsg: c.lastMsg, LastBody: c.lastBody.String(), StreamCreated: c.created}
}

// load opens the heads bucket and brings it up to the last stored
// checkpoint: the checkpoints after the bucket's position (all of them
// the first time, or when the bucket is behind a stream that was
// recreated) have their heads written to it. The checkpoints are this
// checkpointer's own or another's with the same stream: they are not
// verified here (that is Verify's job), only decoded.
//
// When the checkpoint the position names is gone from the same stream
// (the checkpoint subject was purged), load goes on from the position
// and signs nothing again: the next checkpoint's Prev names the missing
// checkpoint and its From the sequence after the last one covered, so
// Verify reports the removal instead of a chain signed anew over whatever
// the stream then holds.
func (c *Checkpointer) load(ctx context.Context) error {
	c.heads = lru.New[string, headRef](c.cfg.CacheThreads, 0)
	c.covered, c.lastMsg, c.lastBody = 0, 0, Hash{}
	if err := c.openBucket(ctx); err != nil {
		return err
	}
	last, err := directget.Last(ctx, c.js, c.cfg.Stream, CheckpointSubject(c.cfg.SubjectPrefix))
	if err != nil {
		return fmt.Errorf("audit: last checkpoint: %w", err)
	}
	from, err := c.resume(ctx, last)
	if err != nil {
		return err
	}
	if last == nil || last.Sequence < from {
		return nil
	}
	return readCheckpoints(ctx, c.js, c.cfg.Stream, c.cfg.SubjectPrefix, from, 0, c.applyCheckpoint(ctx))
}

// openBucket records the stream's creation time and, the first time,
// creates or opens the heads bucket with the stream's replicas. It returns
// the errors of reading the stream's info and of creating the bucket.
func (c *Checkpointer) openBucket(ctx context.Context) error {
	st, err := c.js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return fmt.Errorf("audit: stream %s: %w", c.cfg.Stream, err)
	}
	c.created = st.CachedInfo().Created
	if c.kv != nil {
		return nil
	}
	replicas := max(st.CachedInfo().Config.Replicas, 1)
	kv, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: c.cfg.HeadsBucket,
		Description: "convlog audit: each thread's last checkpointed chain head, and the checkpointer's position",
		History:     1, Storage: jetstream.FileStorage, Replicas: replicas})
	if err != nil {
		return fmt.Errorf("audit: heads bucket %s: %w", c.cfg.HeadsBucket, err)
	}
	c.kv = kv
	return nil
}

// resume sets the state from the heads bucket's position, given last, the
// stream's last checkpoint message (nil: none), and returns the stream
// sequence of the first checkpoint still to apply: 1 without a position;
// the one after the position's checkpoint when the stream holds it; the
// one after the position's checkpoint too, above last, when the same
// stream lost it (nothing is applied, see load); 1 after purging a bucket
// ahead of the stream's checkpoints. It returns the errors of reading and
// decoding the position and of purging the bucket.
func (c *Checkpointer) resume(ctx context.Context, last *jetstream.RawStreamMsg) (from uint64, err error) {
	pos, body, ok, err := c.readPosition(ctx)
	if err != nil || !ok {
		return 1, err
	}
	switch {
	case last != nil && last.Sequence >= pos.LastMsg:
		c.covered, c.lastMsg, c.lastBody = pos.Covered, pos.LastMsg, body
	case !pos.StreamCreated.IsZero() && pos.StreamCreated.Equal(c.created):
		// The same stream, without the checkpoint the position names.
		c.cfg.Logger.Error("audit checkpoints are gone from the stream: going on from the last one applied, whose events are not signed again (audit verify reports the removal)",
			"stream", c.cfg.Stream, "covered", pos.Covered, "last_msg", pos.LastMsg)
		c.covered, c.lastBody = pos.Covered, body
		if last != nil {
			c.lastMsg = last.Sequence
		}
	default:
		// The bucket is ahead of the stream's checkpoints and names
		// another stream (one deleted and created again) or none:
		// start over.
		c.cfg.Logger.Warn("audit heads bucket is ahead of the stream's checkpoints; rebuilding it", "bucket", c.cfg.HeadsBucket)
		st, err := c.js.Stream(ctx, "KV_"+c.cfg.HeadsBucket)
		if err == nil {
			err = st.Purge(ctx)
		}
		if err != nil {
			return 0, fmt.Errorf("audit: reset %s: %w", c.cfg.HeadsBucket, err)
		}
		return 1, nil
	}
	// After the position's checkpoint: when the stream lost it, above
	// every stored checkpoint, so load applies none.
	return pos.LastMsg + 1, nil
}

// readPosition reads the heads bucket's position and its last body hash
// (ok false: the bucket has none). It returns the errors of reading the
// key and of decoding its value.
func (c *Checkpointer) readPosition(ctx context.Context) (pos position, body Hash, ok bool, err error) {
	e, err := c.kv.Get(ctx, "position")
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return pos, body, false, nil
	case err != nil:
		return pos, body, false, fmt.Errorf("audit: position: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &pos); err != nil {
		return pos, body, false, fmt.Errorf("audit: position in %s: %w", c.cfg.HeadsBucket, err)
	}
	body, err = ParseHash(pos.LastBody)
	if err != nil {
		return pos, body, false, fmt.Errorf("audit: position in %s: %w", c.cfg.HeadsBucket, err)
	}
	return pos, body, true, nil
}

// applyCheckpoint returns readCheckpoints' callback for load: it decodes
// a checkpoint (without verifying it), makes it the last one applied and
// stores its heads. The callback returns the errors of decoding the
// checkpoint and its heads and of storeHeads.
func (c *Checkpointer) applyCheckpoint(ctx context.Context) func(msgSeq uint64, body []byte, _ nats.Header) error {
	return func(msgSeq uint64, body []byte, _ nats.Header) error {
		cp, err := decodeLazy(body)
		if err != nil {
			return fmt.Errorf("audit: checkpoint at stream sequence %d: %w", msgSeq, err)
		}
		heads := make(map[string]Hash, len(cp.Threads))
		for _, th := range cp.Threads {
			h, err := ParseHash(th.Head)
			if err != nil {
				return fmt.Errorf("audit: checkpoint at stream sequence %d: %w", msgSeq, err)
			}
			heads[th.Subject] = h
		}
		c.covered, c.lastMsg, c.lastBody = cp.Seq, msgSeq, BodyHash(body)
		return c.storeHeads(ctx, heads, c.position())
	}
}

// readCheckpoints calls fn for every stored checkpoint message from stream
// sequence from, in stream order, stopping at the last one stored when it started, or after the
// one at stream sequence until when until > 0.
func readCheckpoints(ctx context.Context, js jetstream.JetStream, stream, prefix string, from, until uint64, fn func(msgSeq uint64, body []byte, h nats.Header) error) error {
	return readOrdered(ctx, js, stream, CheckpointSubject(prefix), from, until, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		return fn(md.Sequence.Stream, m.Data(), m.Headers())
	})
}

// readOrdered calls fn for each message of filter from sequence from, in
// stream order, until the last one stored when it started (or later), or
// until the one at sequence until when until > 0. A consumer that stops
// delivering while the server still counts messages for it (a pull lost
// with a restarted node, a consumer placed on a node that restarted) is
// replaced by a new one that starts after the last message read, so fn
// never sees a message twice; ctx bounds the whole read.
func readOrdered(ctx context.Context, js jetstream.JetStream, stream, filter string, from, until uint64, fn func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	next := max(from, 1)
	for {
		last, stalled, err := readOrderedOnce(ctx, js, stream, filter, next, until, fn)
		if err != nil || !stalled {
			return err
		}
		if last > 0 {
			next = last + 1
		}
	}
}

// readStall is how long readOrderedOnce waits for a message the server
// still counts before it gives up on its consumer; readCallTimeout bounds
// each request about the consumer (create, info).
const (
	readStall       = 5 * time.Second
	readCallTimeout = 10 * time.Second
)

// readOrderedOnce is readOrdered with one ephemeral consumer from sequence
// from. It returns the stream sequence of the last message it passed to
// fn (0 for none) and stalled when its consumer stopped delivering (or a
// request about it timed out) before the read was done: the caller reads
// on with a new consumer.
func readOrderedOnce(ctx context.Context, js jetstream.JetStream, stream, filter string, from, until uint64, fn func(jetstream.Msg, *jetstream.MsgMetadata) error) (last uint64, stalled bool, err error) {
	// An ephemeral consumer (not an ordered one) so that its info, with
	// the number of messages to read, comes back on creation.
	cctx, cancel := context.WithTimeout(ctx, readCallTimeout)
	cons, err := js.CreateConsumer(cctx, stream, jetstream.ConsumerConfig{FilterSubjects: []string{filter},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute, MemoryStorage: true})
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return 0, true, nil
		}
		return 0, false, fmt.Errorf("audit: read %s: %w", filter, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, stream, cons.CachedInfo().Name)
	}()
	if cons.CachedInfo().NumPending == 0 {
		return 0, false, nil
	}
	// A short pull expiry: a pull request lost with a restarted node
	// (its route gone) is made again within seconds, not after the
	// default 30 s.
	it, err := cons.Messages(jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(2*time.Second))
	if err != nil {
		return 0, false, fmt.Errorf("audit: read %s: %w", filter, err)
	}
	defer it.Stop()
	quiet := time.Now()
	for {
		// A message the server counted but cannot deliver (a block it
		// found corrupt) never comes: after a second with nothing, the
		// consumer's own count says whether anything is still to come.
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		m, err := it.Next(jetstream.NextContext(wctx))
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			if end, stalled, err := afterQuiet(ctx, cons, filter, quiet); end {
				return last, stalled, err
			}
			continue
		}
		if err != nil {
			return last, false, fmt.Errorf("audit: read %s: %w", filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return last, false, fmt.Errorf("audit: read %s: %w", filter, err)
		}
		if err := fn(m, md); err != nil {
			return last, false, err
		}
		last, quiet = md.Sequence.Stream, time.Now()
		if md.NumPending == 0 || (until > 0 && md.Sequence.Stream >= until) {
			return last, false, nil
		}
	}
}

// afterQuiet is readOrderedOnce's check when a second passed with no
// message from cons, the last one at quiet: it reports end when the read
// ends, either done (the consumer counts nothing left to read) or stalled
// (nothing came for readStall, or a request about the consumer timed
// out), or with the error of a request that failed; else the read waits
// on.
func afterQuiet(ctx context.Context, cons jetstream.Consumer, filter string, quiet time.Time) (end, stalled bool, err error) {
	ictx, cancel := context.WithTimeout(ctx, readCallTimeout)
	info, ierr := cons.Info(ictx)
	cancel()
	switch {
	case ierr != nil && ctx.Err() == nil && errors.Is(ierr, context.DeadlineExceeded):
		return true, true, nil
	case ierr != nil:
		return true, false, fmt.Errorf("audit: read %s: %w", filter, ierr)
	case info.NumPending == 0:
		return true, false, nil
	case time.Since(quiet) >= readStall:
		return true, true, nil
	}
	return false, false, nil
}

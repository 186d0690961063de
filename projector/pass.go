package projector

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/directget"
)

// readMaxBytes bounds one batched direct get of events.
const readMaxBytes = 16 << 20

// maxConflicts is how many compare-and-swap conflicts in a row one step
// tolerates before it gives up (and naks, to retry later).
const maxConflicts = 64

// errConflict means another writer changed the key first.
var errConflict = errors.New("projector: compare-and-swap conflict")

// cursor is a thread's head as this instance last read or wrote it.
// A cursor is never modified once it is in the cache; a step works on a
// copy.
type cursor struct {
	h     *head
	sizes []int  // encoded size of each tail message
	enc   []byte // the tail messages encoded (see work.tailEnc); never modified
	rev   uint64 // KV revision of the head, 0 if there is none yet
	// idxVersion is the version the index entry is known to hold (or, for
	// an erased thread, the version at which it was known to be gone).
	idxVersion uint64
	idxRev     uint64 // KV revision of the index entry, 0 if unknown
}

func (c *cursor) version() uint64 { return c.h.State.Version }

// settled reports whether the head and the index entry both hold seq, so
// a trigger for seq can be acked without a projection step.
func (c *cursor) settled(seq uint64) bool {
	v := c.version()
	return seq != 0 && seq <= v && c.idxVersion == v
}

// work returns a fresh working copy of the cursor's state.
func (c *cursor) work(p *Projector, tenant, thread string) *work {
	w := &work{
		cfg:    layoutConfig{chunkBytes: p.cfg.ChunkBytes, tailBytes: p.cfg.TailBytes},
		tenant: tenant, thread: thread,
		s:      c.h.State.Clone(),
		gen:    c.h.Gen,
		chunks: append([]ChunkRef(nil), c.h.Chunks...),
		fetch: func(ctx context.Context, key string) ([]byte, error) {
			e, err := p.snaps.Get(ctx, key)
			if err != nil {
				if errors.Is(err, jetstream.ErrKeyNotFound) {
					// A newer head extended or replaced it: ours is stale.
					return nil, fmt.Errorf("%w: chunk %s is gone", errConflict, key)
				}
				return nil, fmt.Errorf("projector: read chunk %s: %w", key, err)
			}
			return e.Value(), nil
		},
	}
	w.tailSizes = append([]int(nil), c.sizes...)
	w.tailEnc = c.enc[:len(c.enc):len(c.enc)] // appending copies
	for _, n := range c.sizes {
		w.tailBytes += n
	}
	return w
}

// rawEvent is one message read from a thread's subject.
type rawEvent struct {
	seq  uint64
	time time.Time
	data []byte
	// prev is the sequence of the event before it on the thread, known
	// only for some triggers (hasPrev): the sequence the writer expected
	// to be the subject's last (Nats-Expected-Last-Subject-Sequence; the
	// server stored the event only if it was), or the thread's previous
	// event in this instance's delivery window (deliveryWindow).
	prev    uint64
	hasPrev bool
}

// chainFrom returns the longest prefix of triggers (sorted by sequence)
// that continues version without a gap: the first expected version as the
// subject's last sequence, each next one the one before it.
func chainFrom(version uint64, triggers []rawEvent, limit int) []rawEvent {
	n := 0
	for n < len(triggers) && n < limit {
		t := triggers[n]
		want := version
		if n > 0 {
			want = triggers[n-1].seq
		}
		if !t.hasPrev || t.prev != want {
			break
		}
		n++
	}
	return triggers[:n]
}

// project runs steps until the thread's snapshot holds every event that
// was readable, and returns the version reached. behind is the consumer's
// pending count, for the hook.
func (p *Projector) project(ctx context.Context, ts *threadState, behind uint64, triggers []rawEvent) (uint64, error) {
	for {
		version, more, err := p.step(ctx, ts, behind, triggers)
		if err != nil && errors.Is(err, ErrCorrupt) && !ts.rebuild {
			// Snapshots are derived data: fold the log again over what
			// cannot be read, instead of failing this thread for ever.
			p.log.Warn("projector: unreadable snapshot; rebuilding it from the log", "tenant", ts.tenant, "thread", ts.thread, "err", err)
			p.report(Failure{Tenant: ts.tenant, Thread: ts.thread, Reason: FailureSnapshotRebuilt, Err: err})
			ts.rebuild = true
			p.cache.drop(HeadKey(ts.tenant, ts.thread))
			continue
		}
		if err != nil {
			return version, err
		}
		ts.rebuild = false
		if !more {
			return version, nil
		}
		triggers = nil
	}
}

// report calls Config.OnFailure when it is set.
func (p *Projector) report(f Failure) {
	if p.cfg.OnFailure != nil {
		p.cfg.OnFailure(f)
	}
}

// step reads the thread's head (from the cache when this instance wrote
// it last), folds up to MaxBatch events after its version, writes the new
// chunks, then the head with compare-and-swap, then the index entry. On a
// conflict it reloads and starts over. more is true when more events may
// be waiting.
//
// The events come from the stream (a batched direct get by subject), or,
// when the triggers continue the head's version without a gap (each one's
// previous event is known: from the OCC header, as appends through client/
// write it, or from this instance's delivery window), from the triggers
// themselves: one round trip less.
func (p *Projector) step(ctx context.Context, ts *threadState, behind uint64, triggers []rawEvent) (version uint64, more bool, err error) {
	start := time.Now()
	key := HeadKey(ts.tenant, ts.thread)
	reads := 0 // reads of the event log
	for conflicts := 0; ; conflicts++ {
		if conflicts > maxConflicts {
			return 0, false, fmt.Errorf("projector: thread %s/%s: %d compare-and-swap conflicts in a row", ts.tenant, ts.thread, conflicts)
		}
		cur, err := p.cursor(ctx, ts)
		if err != nil {
			return 0, false, err
		}
		// Triggers at or below the head's version are folded already.
		fresh := triggers
		for len(fresh) > 0 && fresh[0].seq <= cur.version() {
			fresh = fresh[1:]
		}
		evs := chainFrom(cur.version(), fresh, p.cfg.MaxBatch)
		if len(evs) == 0 && len(fresh) > 0 {
			// The first trigger does not say which event came before it
			// (no OCC header, and not proven by the delivery window, e.g.
			// with several instances): ask for the subject's next event
			// after the head with a single get, which skips the pending
			// count a batched read makes the server compute; if it is the
			// trigger itself, the chain starts there. (The server finds it
			// by walking the messages stored after the head's version.)
			reads++
			next, err := directget.Next(ctx, p.js, p.cfg.Stream, ts.subject, cur.version()+1)
			if err == nil && next != nil && next.Sequence == fresh[0].seq {
				evs = append([]rawEvent{fresh[0]}, chainFrom(fresh[0].seq, fresh[1:], p.cfg.MaxBatch-1)...)
			}
		}
		fromTriggers := len(evs) > 0
		if !fromTriggers && (len(triggers) == 0 || len(fresh) > 0) {
			evs, err = p.read(ctx, ts.subject, cur.version()+1, p.cfg.MaxBatch, &reads)
			if err != nil {
				return cur.version(), false, err
			}
		}
		if len(evs) == 0 {
			// Nothing new: finish what a crashed or cancelled step may have
			// left (garbage, index) and report where the thread is.
			// Cached cursors are shared (the dispatcher reads them): update
			// a copy.
			c2 := *cur
			if len(c2.h.Garbage) > 0 && len(p.purge(ctx, c2.h.Garbage)) == 0 {
				h2 := *c2.h
				h2.Garbage = nil
				c2.h = &h2
			}
			if err := p.syncIndex(ctx, ts, &c2); err != nil {
				return c2.version(), false, err
			}
			p.cache.put(key, &c2)
			return c2.version(), false, nil
		}

		w := cur.work(p, ts.tenant, ts.thread)
		// Nothing refers to the previous head's garbage: purge it now and
		// carry over only what could not be purged.
		w.garbage = p.purge(ctx, cur.h.Garbage)
		from := cur.version()
		applied := make([]Applied, 0, len(evs))
		rejected := 0
		for _, ev := range evs {
			a, err := p.fold(ctx, w, ev)
			if err != nil {
				if errors.Is(err, errConflict) {
					p.cache.drop(key)
					break
				}
				return from, false, err
			}
			if a.Code != "" {
				rejected++
			}
			a.Behind = behind
			applied = append(applied, a)
		}
		if len(applied) < len(evs) {
			continue // a chunk we needed is gone: our head is stale
		}
		if err := p.writeChunks(ctx, w); err != nil {
			return from, false, err
		}
		nh := &head{Format: headFormat, Gen: w.gen, State: w.s, Chunks: w.chunks, Garbage: w.garbage}
		data, err := encodeHead(nh, w.tailEnc)
		if err != nil {
			return from, false, fmt.Errorf("projector: encode head of %s/%s: %w", ts.tenant, ts.thread, err)
		}
		if mp := p.js.Conn().MaxPayload(); mp > 0 && int64(len(data)) > mp-1024 {
			return from, false, fmt.Errorf("projector: head of %s/%s is %d bytes, over the server's max payload %d (state, metadata or rejections too large)", ts.tenant, ts.thread, len(data), mp)
		}
		rev, err := p.cas(ctx, p.snaps, key, data, cur.rev)
		if errors.Is(err, errConflict) {
			p.cache.drop(key)
			continue
		}
		if err != nil {
			return from, false, fmt.Errorf("projector: write head of %s/%s: %w", ts.tenant, ts.thread, err)
		}
		written := time.Now()
		next := &cursor{h: nh, sizes: w.tailSizes, enc: w.tailEnc, rev: rev, idxVersion: cur.idxVersion, idxRev: cur.idxRev}
		if len(w.garbage) > 0 {
			if left := p.purge(ctx, w.garbage); len(left) == 0 {
				h2 := *nh
				h2.Garbage = nil
				next.h = &h2
			}
		}
		idxErr := p.syncIndex(ctx, ts, next)
		p.cache.put(key, next)

		if p.cfg.OnApply != nil {
			for i, a := range applied {
				a.Lag = written.Sub(evs[i].time)
				p.cfg.OnApply(a)
			}
		}
		took := time.Since(start)
		if p.cfg.OnStep != nil {
			p.cfg.OnStep(Step{Tenant: ts.tenant, Thread: ts.thread, From: from, To: w.s.Version, Events: len(evs),
				Rejected: rejected, ChunksWritten: len(w.created), HeadBytes: len(data), Conflicts: conflicts, LogReads: reads, Took: took})
		}
		if p.log.Enabled(ctx, slog.LevelDebug) {
			p.log.Debug("projected", "tenant", ts.tenant, "thread", ts.thread, "seq", w.s.Version, "events", len(evs),
				"rejected", rejected, "chunks", len(w.created), "took", took)
		}
		for _, a := range applied {
			if a.Code != "" {
				p.log.Info("event rejected", "tenant", ts.tenant, "thread", ts.thread, "seq", a.Seq, "event_type", a.Type, "code", a.Code)
			}
		}
		if fromTriggers {
			// Events after the chain may exist (delivered to another
			// instance, or not delivered yet): only a read can tell, and
			// only if a trigger beyond the chain says there are some.
			return w.s.Version, len(evs) < len(fresh), idxErr
		}
		return w.s.Version, len(evs) >= p.cfg.MaxBatch, idxErr
	}
}

// cursor returns the thread's head: the cached one when this instance
// wrote the newest head it knows of, else read from KV (a fresh empty state
// when there is none).
func (p *Projector) cursor(ctx context.Context, ts *threadState) (*cursor, error) {
	key := HeadKey(ts.tenant, ts.thread)
	if c := p.cache.get(key); c != nil {
		return c, nil
	}
	if ts.rebuild {
		return p.rebuildCursor(ctx, ts)
	}
	var sizes []int
	h, rev, _, err := getHead(ctx, p.snaps, ts.tenant, ts.thread, &sizes)
	switch {
	case errors.Is(err, ErrNoSnapshot):
		return &cursor{h: &head{Format: headFormat, State: NewState(ts.tenant, ts.thread)}}, nil
	case err != nil:
		return nil, err
	}
	enc := h.Tail
	h.Tail = nil
	return &cursor{h: h, sizes: sizes, enc: enc, rev: rev}, nil
}

// firstOnSubject returns the sequence of the first message stored on the
// thread's subject (0 when it has none).
func (p *Projector) firstOnSubject(ctx context.Context, tenant, thread string) (uint64, error) {
	subject, err := p.subjects.Thread(tenant, thread)
	if err != nil {
		return 0, err
	}
	m, err := directget.Next(ctx, p.js, p.cfg.Stream, subject, 1)
	if err != nil {
		return 0, fmt.Errorf("projector: first message of %s: %w", subject, err)
	}
	if m == nil {
		return 0, nil
	}
	return m.Sequence, nil
}

// rebuildCursor is the cursor of a thread whose head or chunks cannot be
// read (garbage, or a format this version does not know): an empty state
// at version 0, so the step folds the whole log, written over the
// unreadable head at its revision (compare-and-swap as always). Its chunks
// take generation rev, above every generation the thread used before (a
// generation only grows with a head write, and rev counts every write of
// the bucket), so no chunk key of the unreadable head is reused; those
// chunks are left behind until the thread is erased.
func (p *Projector) rebuildCursor(ctx context.Context, ts *threadState) (*cursor, error) {
	key := HeadKey(ts.tenant, ts.thread)
	var rev uint64
	e, err := p.snaps.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("projector: read head of %s/%s: %w", ts.tenant, ts.thread, err)
	default:
		rev = e.Revision()
	}
	return &cursor{h: &head{Format: headFormat, Gen: rev, State: NewState(ts.tenant, ts.thread)}, rev: rev}, nil
}

// fold applies one event to w and settles the layout. A rejection is not
// an error: it is in the returned Applied.
func (p *Projector) fold(ctx context.Context, w *work, ev rawEvent) (Applied, error) {
	a := Applied{Tenant: w.tenant, Thread: w.thread, Seq: ev.seq}
	before := w.mark()
	e, derr := events.Unmarshal(ev.data)
	a.Type, a.EventID = e.Type, e.ID
	var err error
	if derr != nil {
		err = ApplyBytes(w.s, ev.seq, ev.time, ev.data)
	} else {
		st := events.Stored{Event: e, Seq: ev.seq, StoredAt: ev.time}
		proven := false
		if e.Type == events.TypeErased && w.s.Version != 0 {
			first, ferr := p.firstOnSubject(ctx, w.tenant, w.thread)
			if ferr != nil {
				return a, ferr // retried: an unproven marker would be rejected for good
			}
			proven = first == ev.seq // the events the head holds were purged
		}
		if proven {
			err = ApplyErasure(w.s, st)
		} else {
			err = Apply(w.s, st)
		}
		if errors.Is(err, ErrNeedHistory) {
			err = p.applyWithHistory(ctx, w, st)
		}
	}
	var rej *RejectionError
	switch {
	case err == nil:
	case errors.As(err, &rej):
		a.Code = rej.Code
	default:
		return a, err
	}
	return a, w.settle(ctx, before)
}

// applyWithHistory applies an event that needs messages older than the
// tail (a compaction that cuts before it): it loads the chunks from the one
// the cut falls in, or all of them, and applies again. If the event is
// rejected the loaded messages are dropped again.
func (p *Projector) applyWithHistory(ctx context.Context, w *work, st events.Stored) error {
	froms := []int{0}
	if c, ok := st.Payload.(events.Compaction); ok {
		if f := w.compactionStart(c.UpToSeq); f > 0 {
			froms = []int{f, 0}
		}
	}
	for _, from := range froms {
		n, err := w.loadFrom(ctx, from)
		if err != nil {
			return err
		}
		err = Apply(w.s, st)
		if err == nil {
			return nil
		}
		// Rejected, or still not enough history: undo the load.
		w.s.Messages = w.s.Messages[n:]
		w.s.Base += n
		if !errors.Is(err, ErrNeedHistory) {
			return err
		}
	}
	return fmt.Errorf("projector: event %d of %s/%s needs history the full history does not give", st.Seq, w.tenant, w.thread)
}

// read returns up to limit events of subject from sequence from on, with
// batched direct gets, and adds their number to *reads.
func (p *Projector) read(ctx context.Context, subject string, from uint64, limit int, reads *int) ([]rawEvent, error) {
	var out []rawEvent
	for len(out) < limit {
		*reads++
		msgs, pending, err := directget.Batch(ctx, p.js, p.cfg.Stream, subject, from, limit-len(out), readMaxBytes)
		for _, m := range msgs {
			out = append(out, rawEvent{seq: m.Sequence, time: m.Time, data: m.Data})
		}
		if err != nil {
			return out, fmt.Errorf("projector: read %s from seq %d: %w", subject, from, err)
		}
		if len(msgs) == 0 || pending == 0 {
			break
		}
		from = msgs[len(msgs)-1].Sequence + 1
	}
	return out, nil
}

// writeChunks creates the step's new chunks. A chunk that exists already
// was written by another instance (or a crashed step) with the same bytes:
// its key names its content.
func (p *Projector) writeChunks(ctx context.Context, w *work) error {
	return forEach(ctx, len(w.created), 4, func(ctx context.Context, i int) error {
		c := w.created[i]
		key := ChunkKey(w.tenant, w.thread, w.gen, c.ref.First, c.ref.Count)
		if _, err := p.snaps.Create(ctx, key, c.data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("projector: write chunk %s: %w", key, err)
		}
		return nil
	})
}

// cas writes key: Create when rev is 0, else Update at rev. It returns
// errConflict when another writer got there first.
func (p *Projector) cas(ctx context.Context, kv jetstream.KeyValue, key string, data []byte, rev uint64) (uint64, error) {
	var (
		r   uint64
		err error
	)
	if rev == 0 {
		r, err = kv.Create(ctx, key, data)
	} else {
		r, err = kv.Update(ctx, key, data, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, errConflict
	}
	return r, err
}

// purge removes chunk keys and patterns from the snapshot bucket's stream
// (no delete markers are left). It returns those it could not purge.
func (p *Projector) purge(ctx context.Context, garbage []string) []string {
	var left []string
	for _, g := range garbage {
		subj := "$KV." + p.cfg.SnapshotBucket + "." + g
		if err := p.kvStream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			level := slog.LevelWarn
			if ctx.Err() != nil {
				level = slog.LevelDebug // shutting down
			}
			p.log.Log(ctx, level, "projector: purge of old chunks failed; the next projection of the thread retries", "subject", subj, "err", err)
			left = append(left, g)
		}
	}
	return left
}

// syncIndex makes the thread's index entry match cur's state: written (never
// moved to a lower version) for an existing thread, absent for an erased one.
// It updates cur's index fields.
func (p *Projector) syncIndex(ctx context.Context, ts *threadState, cur *cursor) error {
	s := cur.h.State
	key := IndexKey(ts.tenant, ts.thread)
	if cur.idxVersion == s.Version && s.Version != 0 {
		return nil
	}
	if !indexed(s) {
		if s.Erased {
			if err := p.dropIndex(ctx, key); err != nil {
				return err
			}
		}
		cur.idxVersion, cur.idxRev = s.Version, 0
		return nil
	}
	data, err := MarshalSummary(SummaryOf(s))
	if err != nil {
		return fmt.Errorf("projector: encode summary of %s/%s: %w", ts.tenant, ts.thread, err)
	}
	for attempt := 0; attempt < maxConflicts; attempt++ {
		if cur.idxRev != 0 {
			rev, err := p.index.Update(ctx, key, data, cur.idxRev)
			if err == nil {
				cur.idxRev, cur.idxVersion = rev, s.Version
				return nil
			}
			if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				return fmt.Errorf("projector: write index entry %s: %w", key, err)
			}
		}
		e, err := p.index.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rev, err := p.index.Create(ctx, key, data)
			if errors.Is(err, jetstream.ErrKeyExists) {
				cur.idxRev = 0
				continue
			}
			if err != nil {
				return fmt.Errorf("projector: write index entry %s: %w", key, err)
			}
			cur.idxRev, cur.idxVersion = rev, s.Version
			// An entry that was absent may have been deleted by an erasure
			// projected meanwhile by another instance: if the head moved on,
			// let the newest head decide.
			return p.recheckIndex(ctx, ts, cur)
		case err != nil:
			return fmt.Errorf("projector: read index entry %s: %w", key, err)
		}
		sum, derr := UnmarshalSummary(e.Value())
		cur.idxRev = e.Revision()
		if derr == nil && sum.Version >= s.Version {
			cur.idxVersion = s.Version // a newer projection wrote it
			return nil
		}
		if derr != nil {
			// Written over at its revision in the next round.
			p.log.Warn("projector: unreadable index entry; writing it again", "key", key, "err", derr)
			p.report(Failure{Tenant: ts.tenant, Thread: ts.thread, Reason: FailureIndexRebuilt, Err: derr})
		}
	}
	return fmt.Errorf("projector: index entry %s: too many conflicts", key)
}

// recheckIndex deletes the index entry just created if the newest head
// says the thread is erased.
func (p *Projector) recheckIndex(ctx context.Context, ts *threadState, cur *cursor) error {
	h, rev, _, err := getHead(ctx, p.snaps, ts.tenant, ts.thread, nil)
	if err != nil || rev == cur.rev {
		return nil //nolint:nilerr // best effort: the entry stands for our head
	}
	if h.State.Erased {
		return p.dropIndex(ctx, IndexKey(ts.tenant, ts.thread))
	}
	return nil
}

func (p *Projector) dropIndex(ctx context.Context, key string) error {
	_, err := p.index.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("projector: read index entry %s: %w", key, err)
	}
	if err := p.index.Purge(ctx, key); err != nil {
		return fmt.Errorf("projector: delete index entry %s: %w", key, err)
	}
	return nil
}

// headCache keeps the cursors this instance wrote last, for up to max
// threads and maxBytes of their (estimated) memory, least recently used
// evicted first. A cached cursor may be stale (another instance wrote
// since): the compare-and-swap of the next step finds out and drops it.
type headCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int
	bytes    int
	m        map[string]*list.Element
	ll       *list.List // of *cachedCursor, most recent first
}

type cachedCursor struct {
	key  string
	cur  *cursor
	size int
}

func newHeadCache(n, maxBytes int) *headCache {
	if n < 0 {
		n = 0
	}
	return &headCache{max: n, maxBytes: maxBytes, m: map[string]*list.Element{}, ll: list.New()}
}

// cursorCost estimates what a cached cursor holds in memory: its tail's
// encoded bytes (decoded strings alias them), a decoded Message per tail
// message, and the rest of the state.
func cursorCost(c *cursor) int {
	n := 1024 + 256*len(c.sizes) + cap(c.enc)
	for _, s := range c.sizes {
		n += s
	}
	return n
}

func (c *headCache) get(key string) *cursor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cachedCursor).cur
	}
	return nil
}

func (c *headCache) put(key string, cur *cursor) {
	if c.max == 0 {
		return
	}
	size := cursorCost(cur)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		cc := e.Value.(*cachedCursor)
		c.bytes += size - cc.size
		cc.cur, cc.size = cur, size
		c.ll.MoveToFront(e)
	} else {
		c.m[key] = c.ll.PushFront(&cachedCursor{key: key, cur: cur, size: size})
		c.bytes += size
	}
	for c.ll.Len() > 1 && (c.ll.Len() > c.max || c.bytes > c.maxBytes) {
		c.remove(c.ll.Back())
	}
}

func (c *headCache) remove(e *list.Element) {
	cc := e.Value.(*cachedCursor)
	c.ll.Remove(e)
	delete(c.m, cc.key)
	c.bytes -= cc.size
}

func (c *headCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.remove(e)
	}
}

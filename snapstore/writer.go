package snapstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// maxConflicts is how many compare-and-swap conflicts in a row an index
// write tolerates before it gives up.
const maxConflicts = 64

// ErrConflict is returned (wrapped) by [Writer.Commit] and [Edit] methods
// when another writer changed the thread's head first: the head the edit
// started from is stale. Read the head again and redo the edit.
var ErrConflict = errors.New("snapstore: compare-and-swap conflict")

// WriterConfig configures a [Writer].
type WriterConfig struct {
	// SnapshotBucket holds heads and chunks; IndexBucket one [Summary] per
	// thread. Both must exist (internal/provision creates them).
	SnapshotBucket, IndexBucket string
	// ChunkBytes is the most bytes a chunk's value holds unless it is one
	// message; TailBytes is how many bytes of newest messages wait in
	// deltas before they move to the open chunks (rule 1 of the package
	// doc). The projector's Config documents their defaults and ranges.
	ChunkBytes, TailBytes int
	// Logger receives warnings (failed purges, unreadable index entries);
	// nil discards them.
	Logger *slog.Logger
	// OnIndexRebuilt, when set, is called when an index entry did not
	// decode and is written again from the head. It is called from the
	// goroutine of [Writer.SyncIndex] and must not block.
	OnIndexRebuilt func(tenant, thread string, err error)
	// Sealer seals heads, chunks and index entries with the thread's data
	// key (threadkey.Keys), and opens them; nil writes them in the clear.
	// The head of an erased thread holds no content and is never sealed.
	Sealer Sealer
}

// Writer writes thread snapshots: heads, chunks and index entries, in the
// order and with the compare-and-swap rules of the package doc. It is the
// projector's side of the store; readers use [Store]. It is safe for
// concurrent use by goroutines that work on different threads; two
// goroutines (or instances) working on one thread are kept apart by the
// compare-and-swap of the head ([ErrConflict]).
type Writer struct {
	js       jetstream.JetStream
	cfg      WriterConfig
	log      *slog.Logger
	snaps    jetstream.KeyValue
	index    jetstream.KeyValue
	kvStream jetstream.Stream
	// markers is set when the snapshot bucket lets messages carry a TTL
	// (AllowMsgTTL): deltas are then removed by purge markers (purge).
	markers bool
	seal    sealing
	written writtenCounters
}

// NewWriter binds the snapshot and index buckets named in cfg through js.
// Errors name each bucket that cannot be found (errors.Join).
func NewWriter(ctx context.Context, js jetstream.JetStream, cfg WriterConfig) (*Writer, error) {
	w := &Writer{js: js, cfg: cfg, log: cfg.Logger, seal: sealing{cfg.Sealer}}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	var err error
	if w.snaps, err = js.KeyValue(ctx, cfg.SnapshotBucket); err != nil {
		errs = append(errs, fmt.Errorf("snapstore: snapshot bucket %s: %w", cfg.SnapshotBucket, err))
	}
	if w.index, err = js.KeyValue(ctx, cfg.IndexBucket); err != nil {
		errs = append(errs, fmt.Errorf("snapstore: index bucket %s: %w", cfg.IndexBucket, err))
	}
	if w.kvStream, err = js.Stream(ctx, kvStreamName(cfg.SnapshotBucket)); err != nil {
		errs = append(errs, fmt.Errorf("snapstore: snapshot bucket stream KV_%s: %w", cfg.SnapshotBucket, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	w.markers = w.kvStream.CachedInfo().Config.AllowMsgTTL
	return w, nil
}

// Head is a thread's head as a [Writer] last read or wrote it: the
// windowed fold state, the chunk list, the KV revision and what the index
// entry is known to hold. A Head is never modified once it is shared (the
// projector caches them); an edit works on a copy ([Writer.Edit]).
type Head struct {
	h     *head
	sizes []int  // encoded size of each tail message
	enc   []byte // the tail messages encoded (see Edit.tailEnc); never modified
	// deltas holds the plain values of the head's deltas this writer
	// created, by First (nil for a head read from KV): a later cut joins
	// them without reading them back. Never modified once shared.
	deltas deltaValues
	rev    uint64 // KV revision of the head, 0 if there is none yet
	// sweep is true when the next commit from this head lists the thread's
	// chunk keys (Writer.sweep): for a head read from KV (ReadHead,
	// RebuildHead), not written by this writer, since a step that crashed
	// or lost a race may have left chunks after it; and for one whose
	// commit's sweep left keys it could not judge yet.
	sweep bool
	// idxVersion is the version the index entry is known to hold (or, for
	// an erased thread, the version at which it was known to be gone).
	idxVersion uint64
	idxRev     uint64 // KV revision of the index entry, 0 if unknown
}

// Version is the thread version the head holds (the stream sequence of the
// last event folded; 0 for a thread without a head).
func (c *Head) Version() uint64 { return c.h.State.Version }

// State is the head's windowed fold state. It is shared: do not modify it.
func (c *Head) State() *fold.State { return c.h.State }

// Settled reports whether the head and the index entry both hold seq, so
// a trigger for seq needs no projection step.
func (c *Head) Settled(seq uint64) bool {
	v := c.Version()
	return seq != 0 && seq <= v && c.idxVersion == v
}

// Cost estimates what a Head holds in memory, in bytes: its tail's encoded
// bytes (decoded strings alias them), a decoded Message per tail message,
// and the rest of the state. Caches bound themselves with it.
func (c *Head) Cost() int {
	n := 1024 + 256*len(c.sizes) + cap(c.enc) + 32*len(c.h.Chunks)
	for _, s := range c.sizes {
		n += s
	}
	for _, d := range c.deltas {
		n += 64 + cap(d.data)
	}
	return n
}

// WithSweep returns a copy of c whose next commit lists the thread's chunk
// keys and makes garbage of those no head names, as a commit from a head
// read from KV does. A thread's empty head (no head in KV yet) skips that
// listing, so that creating a thread costs no request; a caller that
// knows a step may have crashed before the thread's first head (its
// events were delivered before, as a redelivery's count says) asks for
// it here, else the deltas that step wrote would stay behind for good.
// c is not modified.
func (c *Head) WithSweep() *Head {
	d := *c
	d.sweep = true
	return &d
}

// ReadHead reads the thread's head from the snapshot bucket, or returns
// the empty head (version 0, [fold.NewState]) when there is none. Errors:
// [ErrCorrupt] (wrapped) for a head that does not decode; KV and context
// errors.
func (w *Writer) ReadHead(ctx context.Context, tenant, thread string) (*Head, error) {
	var sizes []int
	h, rev, _, err := getHead(ctx, w.snaps, w.seal, tenant, thread, &sizes)
	switch {
	case errors.Is(err, ErrNoSnapshot):
		return &Head{h: &head{Format: headFormat, State: fold.NewState(tenant, thread)}}, nil
	case err != nil:
		return nil, err
	}
	enc := h.Tail
	h.Tail = nil
	return &Head{h: h, sizes: sizes, enc: enc, rev: rev, sweep: true}, nil
}

// RebuildHead is the head to fold a thread's whole log onto when its head
// or chunks cannot be read (garbage, or a format this version does not
// know): an empty state at version 0, to be written over the unreadable
// head at its revision (compare-and-swap as always). Its chunks take
// generation rev, above every generation the thread used before (a
// generation only grows with a head write, and rev counts every write of
// the bucket), so no chunk key of the unreadable head is reused; those
// chunks are left behind until the thread is erased.
func (w *Writer) RebuildHead(ctx context.Context, tenant, thread string) (*Head, error) {
	var rev uint64
	e, err := w.snaps.Get(ctx, HeadKey(tenant, thread))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("snapstore: read head of %s/%s: %w", tenant, thread, err)
	default:
		rev = e.Revision()
	}
	return &Head{h: &head{Format: headFormat, Gen: rev, State: fold.NewState(tenant, thread)}, rev: rev, sweep: true}, nil
}

// Edit starts an edit of cur: a working copy of its state, folded forward
// event by event by the caller, with the layout kept by [Edit.Settle].
// It first purges the garbage cur lists (nothing refers to it any more)
// and carries over only what could not be purged.
func (w *Writer) Edit(ctx context.Context, cur *Head) *Edit {
	s := cur.h.State
	e := &Edit{
		cfg:    layoutConfig{chunkBytes: w.cfg.ChunkBytes, tailBytes: w.cfg.TailBytes},
		tenant: s.Tenant, thread: s.Thread,
		s:        cloneWithRoom(s),
		gen:      cur.h.Gen,
		chunks:   append(make([]ChunkRef, 0, len(cur.h.Chunks)+1), cur.h.Chunks...), // room for the step's delta
		known:    cur.deltas,
		deltaRev: cur.h.DeltaRev,
		fetch: func(ctx context.Context, key string) ([]byte, error) {
			e, err := w.snaps.Get(ctx, key)
			if err != nil {
				if errors.Is(err, jetstream.ErrKeyNotFound) {
					// A newer head extended or replaced it: ours is stale.
					return nil, fmt.Errorf("%w: chunk %s is gone", ErrConflict, key)
				}
				return nil, fmt.Errorf("snapstore: read chunk %s: %w", key, err)
			}
			v, err := w.seal.open(ctx, s.Tenant, s.Thread, key, e.Value())
			if err != nil {
				return nil, fmt.Errorf("%w: chunk %s: %v", ErrCorrupt, key, err)
			}
			return v, nil
		},
	}
	e.tailSizes = append([]int(nil), cur.sizes...)
	e.tailEnc = cur.enc[:len(cur.enc):len(cur.enc)] // appending copies
	for _, n := range cur.sizes {
		e.tailBytes += n
	}
	e.garbage = w.purge(ctx, cur.h.Garbage)
	return e
}

// deltaValue is the plain value of a delta a writer created, by the index
// (First) of its first message.
type deltaValue struct {
	first int
	data  []byte
}

// deltaValues are the values of a head's deltas its writer still has: a
// run of deltas is short (the tail's bytes in steps), so a slice scanned
// by get costs less than a map rebuilt on every commit.
type deltaValues []deltaValue

// get returns the value of the delta whose first message is first, or nil
// when it is not held.
func (d deltaValues) get(first int) []byte {
	for _, v := range d {
		if v.first == first {
			return v.data
		}
	}
	return nil
}

// trailingDeltas is the number of deltas at the end of refs (the run).
func trailingDeltas(refs []ChunkRef) int {
	n := 0
	for i := len(refs) - 1; i >= 0 && refs[i].Level == LevelDelta; i-- {
		n++
	}
	return n
}

// cloneWithRoom is s.Clone() with room for one more message: an edit
// appends at least one, and a copy of exactly the tail's length would be
// copied again by that append.
func cloneWithRoom(s *fold.State) *fold.State {
	c := s.Clone0()
	c.Messages = make([]events.Message, len(s.Messages), len(s.Messages)+1)
	copy(c.Messages, s.Messages)
	return c
}

// Written counts the bytes a [Writer] wrote to KV since it was made
// (values as stored: sealed), by kind: heads, chunks and index entries,
// deltas (the chunks of level [LevelDelta], not counted in Chunks), and
// how many values of each. Purges are not counted.
type Written struct {
	HeadBytes, ChunkBytes, DeltaBytes, IndexBytes uint64
	Heads, Chunks, Deltas, Index                  uint64
}

// Bytes is the total of the four kinds.
func (w Written) Bytes() uint64 { return w.HeadBytes + w.ChunkBytes + w.DeltaBytes + w.IndexBytes }

// Sub returns w - o (the writes between two readings).
func (w Written) Sub(o Written) Written {
	return Written{HeadBytes: w.HeadBytes - o.HeadBytes, ChunkBytes: w.ChunkBytes - o.ChunkBytes, DeltaBytes: w.DeltaBytes - o.DeltaBytes,
		IndexBytes: w.IndexBytes - o.IndexBytes, Heads: w.Heads - o.Heads, Chunks: w.Chunks - o.Chunks, Deltas: w.Deltas - o.Deltas, Index: w.Index - o.Index}
}

// writtenCounters are a Writer's running Written.
type writtenCounters struct {
	headBytes, chunkBytes, deltaBytes, indexBytes atomic.Uint64
	heads, chunks, deltas, index                  atomic.Uint64
}

// Written returns what the writer wrote so far; compared with the bytes
// of the events projected, it is the projection's write amplification.
// Safe for concurrent use.
func (w *Writer) Written() Written {
	c := &w.written
	return Written{HeadBytes: c.headBytes.Load(), ChunkBytes: c.chunkBytes.Load(), DeltaBytes: c.deltaBytes.Load(), IndexBytes: c.indexBytes.Load(),
		Heads: c.heads.Load(), Chunks: c.chunks.Load(), Deltas: c.deltas.Load(), Index: c.index.Load()}
}

// Commit is what [Writer.Commit] wrote.
type Commit struct {
	// Head is the new head, to start the thread's next edit from.
	Head *Head
	// HeadBytes is the size of the head value written; ChunksWritten the
	// number of chunks created.
	HeadBytes, ChunksWritten int
}

// Commit writes an edit of cur: its new chunks, then the head with
// compare-and-swap at cur's revision. Then purge the garbage the new head
// lists with [Writer.Tidy] and write the index entry with
// [Writer.SyncIndex] (the new head's index fields are cur's).
//
// Errors: [ErrConflict] (wrapped) when another writer replaced cur first;
// an error naming the thread when the head would exceed the server's max
// payload (state, metadata or rejections too large); KV and context
// errors. After any error nothing the new head would name is missing:
// written chunks are adopted or purged by a later step.
func (w *Writer) Commit(ctx context.Context, cur *Head, e *Edit) (Commit, error) {
	e.closeStep()
	e.pruneGarbage()
	sweepLater := false
	if cur.sweep {
		sweepLater = w.sweep(ctx, e)
	}
	revs, err := w.writeChunks(ctx, e)
	if err != nil {
		return Commit{}, err
	}
	// The deltas the new head names: the first one's revision (for a
	// reader's batched get) and their values, kept for the next cut.
	deltaRev, deltas := uint64(0), deltaValues(nil)
	for i := len(e.chunks) - 1; i >= 0 && e.chunks[i].Level == LevelDelta; i-- {
		c := e.chunks[i]
		deltaRev = e.deltaRev // the run's first delta came with the head
		data := e.known.get(c.First)
		for j, n := range e.created {
			if n.ref.First == c.First && n.ref.Count == c.Count {
				data, deltaRev = n.data, revs[j]
			}
		}
		if data != nil {
			if deltas == nil {
				deltas = make(deltaValues, 0, trailingDeltas(e.chunks))
			}
			deltas = append(deltas, deltaValue{first: c.First, data: data})
		}
	}
	nh := &head{Format: headFormat, Gen: e.gen, State: e.s, Chunks: e.chunks, Garbage: e.garbage, DeltaRev: deltaRev}
	data, err := encodeHead(nh, e.tailEnc)
	if err != nil {
		return Commit{}, fmt.Errorf("snapstore: encode head of %s/%s: %w", e.tenant, e.thread, err)
	}
	hk := HeadKey(e.tenant, e.thread)
	if !nh.State.Erased {
		if data, err = w.seal.seal(ctx, e.tenant, e.thread, hk, data); err != nil {
			return Commit{}, fmt.Errorf("snapstore: seal head of %s/%s: %w", e.tenant, e.thread, err)
		}
	}
	if mp := w.js.Conn().MaxPayload(); mp > 0 && int64(len(data)) > mp-1024 {
		return Commit{}, fmt.Errorf("snapstore: head of %s/%s is %d bytes, over the server's max payload %d (state, metadata or rejections too large)", e.tenant, e.thread, len(data), mp)
	}
	rev, err := w.cas(ctx, w.snaps, hk, data, cur.rev)
	if errors.Is(err, ErrConflict) {
		return Commit{}, err
	}
	if err != nil {
		return Commit{}, fmt.Errorf("snapstore: write head of %s/%s: %w", e.tenant, e.thread, err)
	}
	w.written.headBytes.Add(uint64(len(data)))
	w.written.heads.Add(1)
	next := &Head{h: nh, sizes: e.tailSizes, enc: e.tailEnc, deltas: deltas, rev: rev, sweep: sweepLater,
		idxVersion: cur.idxVersion, idxRev: cur.idxRev}
	return Commit{Head: next, HeadBytes: len(data), ChunksWritten: len(e.created)}, nil
}

// Tidy purges the garbage cur lists (after a [Writer.Commit], or what a
// crashed or cancelled step left) and returns the head to keep: a copy of
// cur, without the garbage once it is purged. A purge that fails is
// logged and left listed for the next edit.
func (w *Writer) Tidy(ctx context.Context, cur *Head) *Head {
	c2 := *cur
	if len(c2.h.Garbage) > 0 && len(w.purge(ctx, c2.h.Garbage)) == 0 {
		h2 := *c2.h
		h2.Garbage = nil
		c2.h = &h2
	}
	return &c2
}

// writeChunks creates the edit's new chunks and returns the KV revision of
// each (0 for one that existed already). A chunk that exists already was
// written by another instance (or a crashed step) with the same bytes: its
// key names its content. The deltas are written after the other chunks,
// so that a reader's batched get of the deltas from the first one's
// revision does not also return a chunk written in the same step.
func (w *Writer) writeChunks(ctx context.Context, e *Edit) ([]uint64, error) {
	revs := make([]uint64, len(e.created))
	run := deltaRun(e.chunks)
	var chunks, deltas []int
	for i, c := range e.created {
		if c.ref.Level == LevelDelta {
			deltas = append(deltas, i)
		} else {
			chunks = append(chunks, i)
		}
	}
	for _, idx := range [][]int{chunks, deltas} {
		if len(idx) == 0 {
			continue // no closure to build: most steps write one delta
		}
		err := forEach(ctx, len(idx), 4, func(ctx context.Context, k int) error {
			i := idx[k]
			c := e.created[i]
			key := refKey(e.tenant, e.thread, e.gen, run, c.ref)
			data, err := w.seal.seal(ctx, e.tenant, e.thread, key, c.data)
			if err != nil {
				return fmt.Errorf("snapstore: seal chunk %s: %w", key, err)
			}
			rev, err := w.snaps.Create(ctx, key, data)
			switch {
			case errors.Is(err, jetstream.ErrKeyExists):
			case err != nil:
				return fmt.Errorf("snapstore: write chunk %s: %w", key, err)
			case c.ref.Level == LevelDelta:
				revs[i] = rev
				w.written.deltaBytes.Add(uint64(len(data)))
				w.written.deltas.Add(1)
			default:
				revs[i] = rev
				w.written.chunkBytes.Add(uint64(len(data)))
				w.written.chunks.Add(1)
			}
			return nil
		})
		if err != nil {
			return revs, err
		}
	}
	return revs, nil
}

// sweep lists as garbage every chunk of the edit's thread in the bucket
// that the new head will neither name nor list already: what a step that
// crashed or lost the compare-and-swap wrote after the head it started
// from (a delta whose range depends on where that step's batch ended; the
// package doc). It is called when the edit started from a head read from
// KV, so not on a writer's steady path, and costs one stream info request
// with a subject filter (the thread's chunk keys, no values). A chunk a
// newer head names (the edit is stale) is listed too, harmlessly: the
// compare-and-swap then fails and the list is dropped with the head.
// A failed listing is logged and skipped: what it would have found costs
// space, not correctness, and the next sweep finds it. Keys a later head
// may still name are left (see the loop), and later reports that some
// were: the next commit sweeps again.
func (w *Writer) sweep(ctx context.Context, e *Edit) (later bool) {
	prefix := kvSubjectPrefix(w.cfg.SnapshotBucket)
	info, err := w.kvStream.Info(ctx, jetstream.WithSubjectFilter(prefix+rangesPattern(e.tenant, e.thread)))
	if err != nil {
		w.log.Warn("snapstore: listing the chunks of a thread failed; chunks a crashed step left stay until a later sweep", "tenant", e.tenant, "thread", e.thread, "err", err)
		return false
	}
	named := make(map[string]bool, len(e.chunks))
	for _, k := range RefKeys(e.tenant, e.thread, e.gen, e.chunks) {
		named[k] = true
	}
	for subj := range info.State.Subjects {
		key := strings.TrimPrefix(subj, prefix)
		if named[key] || coveredBy(key, e.garbage) {
			continue
		}
		// A key that reaches the edit's last message or past it, or is of
		// a newer generation, may be one a concurrent step wrote before its
		// head: keys are a function of the events, so a head that follows
		// this one may name it (written again with Create, which finds it),
		// and a purge would remove it from under that head. It is judged by
		// a later commit, once the thread has moved past it.
		if gen, end, ok := keyRange(e.tenant, e.thread, key); ok && (gen > e.gen || gen == e.gen && end >= e.s.Base) {
			later = true
			continue
		}
		e.garbage = append(e.garbage, key)
	}
	return later
}

// coveredBy reports whether key is one of the garbage keys or patterns.
func coveredBy(key string, garbage []string) bool {
	for _, g := range garbage {
		if g == key || strings.HasSuffix(g, ".>") && strings.HasPrefix(key, g[:len(g)-1]) {
			return true
		}
	}
	return false
}

// cas writes key: Create when rev is 0, else Update at rev. It returns
// ErrConflict when another writer got there first.
func (w *Writer) cas(ctx context.Context, kv jetstream.KeyValue, key string, data []byte, rev uint64) (uint64, error) {
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
		return 0, ErrConflict
	}
	return r, err
}

// purge removes chunk keys and patterns from the snapshot bucket's stream
// (no delete markers are left). It returns those it could not purge.
func (w *Writer) purge(ctx context.Context, garbage []string) []string {
	if len(garbage) == 0 {
		return nil // most edits: nothing to purge, nothing to set up
	}
	var (
		mu   sync.Mutex
		left []string
	)
	failed := func(g string, err error) {
		level := slog.LevelWarn
		if ctx.Err() != nil {
			level = slog.LevelDebug // shutting down
		}
		w.log.Log(ctx, level, "snapstore: purge of old chunks failed; the next projection of the thread retries", "key", g, "err", err)
		mu.Lock()
		left = append(left, g)
		mu.Unlock()
	}
	// Deltas (literal keys, many at a cut) are removed with purge markers
	// that expire: a publish each, concurrently, instead of a stream
	// purge request each (a JetStream API call that takes the stream's
	// lock; one with a wildcard also loads every message block the
	// subjects span: both stall the projector under a steady load).
	var markers, purges []string
	for _, g := range garbage {
		if w.markers && isDeltaKey(g) {
			markers = append(markers, g)
		} else {
			purges = append(purges, g)
		}
	}
	_ = forEach(ctx, len(markers), 16, func(ctx context.Context, i int) error {
		if err := w.snaps.Purge(ctx, markers[i], jetstream.PurgeTTL(purgeMarkerTTL)); err != nil {
			failed(markers[i], err)
		}
		return nil
	})
	for _, g := range purges {
		subj := kvSubjectPrefix(w.cfg.SnapshotBucket) + g
		if err := w.kvStream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			failed(g, err)
		}
	}
	return left
}

// purgeMarkerTTL is how long the marker that removes a delta stays in the
// snapshot bucket (provision sets the bucket's LimitMarkerTTL, which lets
// messages carry a TTL): a reader that finds it treats the delta as gone.
const purgeMarkerTTL = 5 * time.Second

// isDeltaKey reports whether key is a delta's literal key (DeltaKey).
func isDeltaKey(key string) bool {
	return strings.Contains(key, ".d.") && !strings.HasSuffix(key, ".>")
}

// SyncIndex makes the thread's index entry match cur's state: written
// (never moved to a lower version) for an existing thread, absent for an
// erased one. It updates cur's index fields, so call it before cur is
// shared. Errors: KV and context errors, and too many conflicts in a row.
func (w *Writer) SyncIndex(ctx context.Context, cur *Head) error {
	s := cur.h.State
	tenant, thread := s.Tenant, s.Thread
	key := IndexKey(tenant, thread)
	if cur.idxVersion == s.Version && s.Version != 0 {
		return nil
	}
	if !indexed(s) {
		if s.Erased {
			if err := w.dropIndex(ctx, key); err != nil {
				return err
			}
		}
		cur.idxVersion, cur.idxRev = s.Version, 0
		return nil
	}
	data, err := MarshalSummary(SummaryOf(s))
	if err != nil {
		return fmt.Errorf("snapstore: encode summary of %s/%s: %w", tenant, thread, err)
	}
	if data, err = w.seal.seal(ctx, tenant, thread, key, data); err != nil {
		return fmt.Errorf("snapstore: seal index entry %s: %w", key, err)
	}
	for attempt := 0; attempt < maxConflicts; attempt++ {
		if cur.idxRev != 0 {
			rev, err := w.index.Update(ctx, key, data, cur.idxRev)
			if err == nil {
				w.countIndex(data)
				cur.idxRev, cur.idxVersion = rev, s.Version
				return nil
			}
			if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				return fmt.Errorf("snapstore: write index entry %s: %w", key, err)
			}
		}
		e, err := w.index.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if created, err := w.createIndex(ctx, cur, key, data); created || err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("snapstore: read index entry %s: %w", key, err)
		}
		if w.indexCurrent(ctx, cur, key, e) {
			return nil
		}
	}
	return fmt.Errorf("snapstore: index entry %s: too many conflicts", key)
}

// createIndex creates cur's index entry key with data and reports true,
// then rechecks it against the newest head ([Writer.recheckIndex]); it
// reports false with no error when another writer created the entry
// first (cur.idxRev is reset: the caller reads it).
func (w *Writer) createIndex(ctx context.Context, cur *Head, key string, data []byte) (bool, error) {
	rev, err := w.index.Create(ctx, key, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		cur.idxRev = 0
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("snapstore: write index entry %s: %w", key, err)
	}
	w.countIndex(data)
	cur.idxRev, cur.idxVersion = rev, cur.h.State.Version
	// An entry that was absent may have been deleted by an erasure
	// projected meanwhile by another instance: if the head moved on, let
	// the newest head decide.
	return true, w.recheckIndex(ctx, cur)
}

// indexCurrent takes e, the index entry key as read, as cur's base for
// the next update, and reports whether it already holds cur's version or
// a newer one. An entry that cannot be opened or decoded is logged (and
// Config.OnIndexRebuilt called) and written over in the next round.
func (w *Writer) indexCurrent(ctx context.Context, cur *Head, key string, e jetstream.KeyValueEntry) bool {
	s := cur.h.State
	plain, derr := w.seal.open(ctx, s.Tenant, s.Thread, key, e.Value())
	var sum Summary
	if derr == nil {
		sum, derr = UnmarshalSummary(plain)
	}
	cur.idxRev = e.Revision()
	if derr == nil && sum.Version >= s.Version {
		cur.idxVersion = s.Version // a newer projection wrote it
		return true
	}
	if derr != nil {
		// Written over at its revision in the next round.
		w.log.Warn("snapstore: unreadable index entry; writing it again", "key", key, "err", derr)
		if w.cfg.OnIndexRebuilt != nil {
			w.cfg.OnIndexRebuilt(s.Tenant, s.Thread, derr)
		}
	}
	return false
}

// recheckIndex deletes the index entry just created if the newest head
// says the thread is erased.
func (w *Writer) recheckIndex(ctx context.Context, cur *Head) error {
	s := cur.h.State
	h, rev, _, err := getHead(ctx, w.snaps, w.seal, s.Tenant, s.Thread, nil)
	if err != nil || rev == cur.rev {
		return nil //nolint:nilerr // best effort: the entry stands for our head
	}
	if h.State.Erased {
		return w.dropIndex(ctx, IndexKey(s.Tenant, s.Thread))
	}
	return nil
}

func (w *Writer) dropIndex(ctx context.Context, key string) error {
	_, err := w.index.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("snapstore: read index entry %s: %w", key, err)
	}
	if err := w.index.Purge(ctx, key); err != nil {
		return fmt.Errorf("snapstore: delete index entry %s: %w", key, err)
	}
	return nil
}

// State is the edit's working state: fold events into it with
// [fold.Apply] (between [Edit.Mark] and [Edit.Settle]).
func (e *Edit) State() *fold.State { return e.s }

// Thread returns the edit's tenant and thread.
func (e *Edit) Thread() (tenant, thread string) { return e.tenant, e.thread }

// countIndex counts an index entry written.
func (w *Writer) countIndex(data []byte) {
	w.written.indexBytes.Add(uint64(len(data)))
	w.written.index.Add(1)
}

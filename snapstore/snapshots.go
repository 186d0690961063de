package snapstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/lru"
)

// fetchConcurrency is how many chunks one read fetches at once.
const fetchConcurrency = 8

// loadAttempts is how often Load reads the head when a chunk it names was
// purged by a newer head in the meantime.
const loadAttempts = 8

// Store reads thread snapshots from the snapshot bucket (see the
// package doc for the layout). Every read is a KV Get by key, so it needs
// no more than get permission on the thread's keys
// ("$JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>.<tenant>.>"), except the
// batched get of a head's deltas when Options.Batch is set (a direct get
// request with a body: the deployment's permissions). It is safe for
// concurrent use; keep one per process.
//
// A Store keeps the chunks it read, decoded, in a cache bounded by
// their encoded size (Options.ChunkCacheBytes, 64 MiB by default,
// least recently used first out). A chunk's key names content that never
// changes, so a cached chunk the current head names is always right: a
// Load of a thread read recently costs one head get, the gets of the
// chunks added since, and copying the cached messages into a new slice.
// A chunk no head names any more is never hit again and ages out; the
// chunks of a thread are dropped at once when a Load or LoadHead sees the
// thread at a newer layout generation (reset, restore, compaction), erased,
// or without a snapshot.
//
// For [Store.LoadView] it also keeps the heads it decoded (up to 16,384,
// about 8 MiB by estimate): a head read again with the same value is not
// opened and decoded again, so a warm LoadView of an unchanged thread
// costs the head's get and a comparison of its bytes; with
// [Store.TrackHeads], not even the get while a watch of the heads shows
// the head unchanged.
//
// A Store also remembers the chunk list it last saw for each of up to
// 16,384 threads (and 65,536 chunk references in all, about 3 MiB), so
// that the next Load of a thread fetches the chunks that are not cached
// while the head is on its way instead of after it.
//
// (A multi-last direct get can return a head and all its chunks in one
// request, but for a thread of 1,000 messages it is slower than a head get
// followed by parallel chunk gets; so Store uses a batched get only for
// the deltas, which are many and small.)
type Store struct {
	kv    jetstream.KeyValue
	seal  sealing
	hints *chunkHints
	cache *chunkCache // nil: disabled
	// heads are the decoded heads LoadView read last, by head key (nil
	// without a chunk cache): see sharedHead.
	heads *lru.Cache[string, *sharedHead]
	batch func(ctx context.Context, subject string, from uint64, n int) ([]*jetstream.RawStreamMsg, error)
	// tracker vouches for heads in heads while TrackHeads runs (nil
	// otherwise).
	tracker atomic.Pointer[tracker]
}

// sharedHead is a head LoadView decoded, kept so that the next LoadView
// that gets the same value (the same revision and the same bytes: a
// bucket deleted and created again reuses revisions) skips opening and
// decoding it. Its State is handed to every such
// LoadView and never modified (LoadView's ownership rule).
type sharedHead struct {
	rev   uint64
	value []byte // as stored (sealed or not)
	h     *head
}

// Bounds of the decoded heads a Store keeps for LoadView: the entries and
// their estimated memory (headCost), least recently used out first.
const (
	sharedHeads     = 16384
	sharedHeadBytes = 8 << 20
)

// headCost estimates the memory of a decoded head kept for LoadView: its
// value, the decoded State (strings and maps, about twice the encoding)
// and fixed overhead.
func headCost(value []byte) int64 { return int64(3*len(value) + 1024) }

// New returns a reader of the snapshots in kv, the snapshot
// bucket (default "convlog_snapshots"), with a chunk cache of
// [DefaultChunkCacheBytes]: NewWith(kv, Options{}).
func New(kv jetstream.KeyValue) *Store {
	return NewWith(kv, Options{})
}

// NewWith returns a reader of the snapshots in kv configured by
// opts (see [Options]; ChunkCacheBytes < 0 disables the cache).
func NewWith(kv jetstream.KeyValue, opts Options) *Store {
	size := int64(opts.ChunkCacheBytes)
	if size == 0 {
		size = DefaultChunkCacheBytes
	}
	st := &Store{kv: kv, seal: sealing{opts.Sealer}, hints: &chunkHints{m: map[string]chunkHint{}}, cache: newChunkCache(size), batch: opts.Batch}
	if st.cache != nil {
		st.heads = lru.New[string, *sharedHead](sharedHeads, sharedHeadBytes)
	}
	return st
}

// ChunkCacheStats returns the figures of the chunk cache (all zero when it
// is disabled). It is safe to call concurrently with reads.
func (s *Store) ChunkCacheStats() ChunkCacheStats { return s.cache.currentStats() }

// Snapshot is a thread's projected state as read from the snapshot bucket.
type Snapshot struct {
	// State is the projection. From [Store.Load] it is complete (Base
	// 0, every message); from [Store.LoadHead] it is a window: Messages
	// holds no messages (heads written before deltas: the newest ones, at
	// most Config.TailBytes of them) and Base counts the ones before, so
	// MessageCount() is exact.
	// State.Version is the stream sequence of the last event folded.
	State *fold.State
	// Revision is the KV revision of the head read. It grows with every
	// projection of the thread.
	Revision uint64
	// Gen is the layout generation (the chunk keys' generation token).
	Gen uint64
	// Chunks are the immutable chunks holding the first Base messages of
	// the head, in history order.
	Chunks []ChunkRef
	// Bytes is how many value bytes this call read from KV: the head plus
	// the chunks that were not in the chunk cache.
	Bytes int
	// CachedBytes is the encoded size of the chunks [Store.Load] took
	// from the chunk cache instead of KV (0 from LoadHead): Bytes +
	// CachedBytes is the size of the whole snapshot.
	CachedBytes int
	// Segments is set by [Store.LoadView] only: the chunked history, one
	// slice per chunk in history order (together the State's first Base
	// messages), each the chunk cache's own decoded slice, shared with
	// every other reader: read-only (see LoadView).
	Segments [][]events.Message
}

// LoadHead reads a thread's head: everything but the chunked messages.
// It costs one KV get of a small value (at most a few tens of KiB).
//
// Errors: an *events.IDError for a bad tenant or thread id; [ErrNoSnapshot]
// (wrapped) when the thread has none; [ErrCorrupt] (wrapped); KV and
// context errors as returned by nats.go, which are retryable.
func (s *Store) LoadHead(ctx context.Context, tenant, thread string) (*Snapshot, error) {
	if err := validIDs(tenant, thread); err != nil {
		return nil, err
	}
	h, rev, n, err := s.readHead(ctx, tenant, thread, false)
	if err != nil {
		return nil, err
	}
	return &Snapshot{State: h.State, Revision: rev, Gen: h.Gen, Chunks: h.Chunks, Bytes: n}, nil
}

// readHead reads and decodes a thread's head and tells the chunk cache and
// the hints what it saw: a missing snapshot drops the thread's cached
// chunks, a head of a newer generation or an erased one its older chunks.
// With shared (LoadView), a head whose value is the one decoded last time
// is not decoded again: the same *head is returned, which the caller must
// not modify.
func (s *Store) readHead(ctx context.Context, tenant, thread string, shared bool) (h *head, rev uint64, n int, err error) {
	key := HeadKey(tenant, thread)
	if shared && s.heads != nil {
		h, rev, n, err = s.sharedHead(ctx, tenant, thread, key)
	} else {
		h, rev, n, err = getHead(ctx, s.kv, s.seal, tenant, thread, nil)
	}
	if err != nil {
		if errors.Is(err, ErrNoSnapshot) {
			s.cache.forget(key)
			if s.heads != nil {
				s.heads.Remove(key)
			}
		}
		return nil, 0, 0, err
	}
	s.hints.put(key, h.Gen, h.Chunks, len(h.State.Messages), h.DeltaRev)
	s.cache.sawHead(key, h.Gen, h.State.Erased)
	return h, rev, n, nil
}

// load is one attempt of Load: the head and, at the same time, the chunks
// the thread had when this reader last saw it that are not cached; then
// whatever chunks the head names that are neither cached nor on their way.
// Every chunk is decoded by its fetch as soon as it arrives, whether or not
// the head is there yet.
func (s *Store) load(ctx context.Context, f *chunkFetcher, tenant, thread string, view bool) (*Snapshot, error) {
	key := HeadKey(tenant, thread)
	if hint, ok := s.hints.get(key); ok && f.pre == nil {
		var cached []*chunkEntry
		if s.cache != nil {
			cached = make([]*chunkEntry, len(hint.chunks))
			s.cache.lookup(key, hint.gen, hint.chunks, cached, false)
		} else {
			// Without a cache the chunks are decoded straight into the
			// slice Load returns, sized as the thread was last seen; if
			// the head turns out longer, fillChunks copies them over.
			base := 0
			for _, c := range hint.chunks {
				base = max(base, c.First+c.Count)
			}
			f.pre = make([]events.Message, base+hint.tail, base+hint.tail+hintSlack)
		}
		var deltas []ChunkRef
		var intos [][]events.Message
		keys := RefKeys(tenant, thread, hint.gen, hint.chunks)
		for i, c := range hint.chunks {
			if cached == nil || cached[i] == nil {
				var into []events.Message
				if f.pre != nil && c.First >= 0 && c.Count > 0 && c.First+c.Count <= len(f.pre) {
					into = f.pre[c.First : c.First+c.Count]
				}
				if c.Level == LevelDelta && s.batch != nil && hint.deltaRev > 0 {
					deltas, intos = append(deltas, c), append(intos, into)
					continue
				}
				f.start(ctx, keys[i], c.Count, into)
			}
		}
		s.startDeltas(ctx, f, hint.gen, deltaRun(hint.chunks), hint.deltaRev, countDeltas(hint.chunks), deltas, intos)
	}
	h, rev, n, err := s.readHead(ctx, tenant, thread, view)
	if err != nil {
		return nil, err
	}
	read, cached, segs, err := s.fillChunks(ctx, f, tenant, thread, h, view)
	if err != nil {
		return nil, err
	}
	return &Snapshot{State: h.State, Revision: rev, Gen: h.Gen, Chunks: h.Chunks, Bytes: n + read, CachedBytes: cached, Segments: segs}, nil
}

// hintSlack is how many messages more than the hinted tail the slice a
// hinted Load decodes into leaves room for.
const hintSlack = 16

// chunkFetcher gets chunk values concurrently, at most fetchConcurrency at
// a time and each key once, and decodes each as it arrives. Its goroutines
// end with ctx; wg waits for them.
type chunkFetcher struct {
	kv jetstream.KeyValue
	// seal, tenant and thread open the chunks (one thread per fetcher).
	seal           sealing
	tenant, thread string
	sem            chan struct{}
	wg             sync.WaitGroup
	mu             sync.Mutex
	m              map[string]*fetch
	// pre is the slice the hinted chunks of a Load without chunk cache are
	// decoded into (nil otherwise): each fetch writes only its range.
	pre []events.Message
}

// fetch is one chunk get and its decoding; done is closed when data and
// msgs, or err, are set.
type fetch struct {
	done chan struct{}
	data []byte
	// msgs is the decoded chunk: the into slice given to start, or a new
	// one. It shares data's memory (strings), which nobody modifies.
	msgs   []events.Message
	err    error // the get failed (wraps jetstream.ErrKeyNotFound when the chunk is gone)
	decErr error // the value did not decode
	cancel context.CancelFunc
}

// start fetches key, a chunk of count messages, unless it is on its way
// already, and decodes it into into (if it has count elements) or a new
// slice.
func (f *chunkFetcher) start(ctx context.Context, key string, count int, into []events.Message) *fetch {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.m[key]; ok {
		return r
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &fetch{done: make(chan struct{}), cancel: cancel}
	f.m[key] = r
	f.wg.Go(func() {
		defer cancel()
		defer close(r.done)
		select {
		case f.sem <- struct{}{}:
		case <-ctx.Done():
			r.err = ctx.Err()
			return
		}
		e, err := f.kv.Get(ctx, key)
		<-f.sem
		if err != nil {
			r.err = fmt.Errorf("snapstore: read chunk %s: %w", key, err)
			return
		}
		f.decode(ctx, r, key, e.Value(), count, into)
	})
	return r
}

// decode opens and decodes the value of chunk key (count messages) into
// into (if it has count elements) or a new slice, setting r's data and
// msgs, or decErr.
func (f *chunkFetcher) decode(ctx context.Context, r *fetch, key string, value []byte, count int, into []events.Message) {
	var err error
	// value is the message's own buffer, which nothing else holds: opened
	// in place, the plaintext needs no copy.
	if r.data, err = f.seal.openInPlace(ctx, f.tenant, f.thread, key, value); err != nil {
		r.decErr = fmt.Errorf("%w: chunk %s: %v", ErrCorrupt, key, err)
		return
	}
	if len(into) != count {
		into = make([]events.Message, count)
	}
	if err := events.ParseMessagesInto(r.data, into); err != nil {
		r.decErr = fmt.Errorf("%w: chunk %s: %v", ErrCorrupt, key, err)
		return
	}
	r.msgs = into
}

// startDeltas fetches the deltas refs of generation gen that are not on
// their way yet with one batched get (Options.Batch) of the thread's
// chunks of gen from the stream sequence from, the first of the head's
// total deltas' KV revision, decoding each into intos[i] as start does; a
// delta the batch does not return (written without a known revision, or
// an error) is got on its own. The batch returns every delta from the
// first on, so it is used only when at least two and at least half of
// them are to be read (a cold read); otherwise each is got on its own (a
// warm reader missing the newest few).
func (s *Store) startDeltas(ctx context.Context, f *chunkFetcher, gen uint64, run int, from uint64, total int, refs []ChunkRef, intos [][]events.Message) {
	type member struct {
		key string
		i   int
		r   *fetch
	}
	var ms []member
	f.mu.Lock()
	for i, c := range refs {
		key := DeltaKey(f.tenant, f.thread, gen, run, c.First, c.Count)
		if _, ok := f.m[key]; !ok {
			ms = append(ms, member{key: key, i: i})
		}
	}
	if len(ms) < 2 || 2*len(ms) < total {
		f.mu.Unlock()
		for _, m := range ms {
			f.start(ctx, m.key, refs[m.i].Count, intos[m.i])
		}
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	for k := range ms {
		// A member's cancel (chunkFetcher.keep) cannot stop the shared
		// request; the Load's own context does.
		ms[k].r = &fetch{done: make(chan struct{}), cancel: func() {}}
		f.m[ms[k].key] = ms[k].r
	}
	f.mu.Unlock()
	prefix := kvSubjectPrefix(s.kv.Bucket())
	f.wg.Go(func() {
		defer cancel()
		var got []*jetstream.RawStreamMsg
		select {
		case f.sem <- struct{}{}:
			got, _ = s.batch(ctx, prefix+runPattern(f.tenant, f.thread, gen, run), from, total+8)
			<-f.sem
		case <-ctx.Done():
		}
		byKey := make(map[string][]byte, len(got))
		for _, m := range got {
			if m.Header.Get(kvOperationHeader) != "" {
				continue // a purge marker: the delta is gone (the get below says so)
			}
			byKey[strings.TrimPrefix(m.Subject, prefix)] = m.Data
		}
		for _, m := range ms {
			c := refs[m.i]
			value, ok := byKey[m.key]
			if !ok {
				e, err := f.kv.Get(ctx, m.key)
				if err != nil {
					m.r.err = fmt.Errorf("snapstore: read chunk %s: %w", m.key, err)
					close(m.r.done)
					continue
				}
				value = e.Value()
			}
			f.decode(ctx, m.r, m.key, value, c.Count, intos[m.i])
			close(m.r.done)
		}
	})
}

// keep cancels and forgets the fetches of keys not in need (remembered
// chunks the head no longer names), and returns them.
func (f *chunkFetcher) keep(need map[string]bool) []*fetch {
	f.mu.Lock()
	defer f.mu.Unlock()
	var dropped []*fetch
	for k, r := range f.m {
		if !need[k] {
			r.cancel()
			delete(f.m, k)
			dropped = append(dropped, r)
		}
	}
	return dropped
}

// forgetFailed forgets the fetches that ended in an error, so that they are
// made again if needed.
func (f *chunkFetcher) forgetFailed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, r := range f.m {
		select {
		case <-r.done:
			if r.err != nil || r.decErr != nil {
				delete(f.m, k)
			}
		default:
		}
	}
}

// chunkHints remembers the last chunk list seen per thread, for up to
// maxHints threads and maxHintRefs chunk references in all (about 48 bytes
// each: a few MiB at most); beyond either, random threads are forgotten.
type chunkHints struct {
	mu   sync.Mutex
	m    map[string]chunkHint
	refs int // chunk references held in m
}

type chunkHint struct {
	gen      uint64
	chunks   []ChunkRef
	tail     int    // messages in the head's tail
	deltaRev uint64 // the head's DeltaRev
}

const (
	maxHints    = 16_384
	maxHintRefs = 65_536
)

func (c *chunkHints) get(key string) (chunkHint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[key]
	return h, ok
}

func (c *chunkHints) put(key string, gen uint64, chunks []ChunkRef, tail int, deltaRev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		c.refs -= len(old.chunks)
		delete(c.m, key)
	}
	if len(chunks) > maxHintRefs {
		return // a history of over 48 GiB: not worth the memory
	}
	for k, h := range c.m { // evict at random
		if len(c.m) < maxHints && c.refs+len(chunks) <= maxHintRefs {
			break
		}
		c.refs -= len(h.chunks)
		delete(c.m, k)
	}
	c.m[key] = chunkHint{gen: gen, chunks: chunks, tail: tail, deltaRev: deltaRev}
	c.refs += len(chunks)
}

// Load reads a thread's complete snapshot: the head and every chunk it
// names, taken from the chunk cache or fetched concurrently (with the head,
// for a thread this reader has read before) and decoded as they arrive. If
// a chunk is missing because a newer head replaced the history meanwhile,
// Load reloads the head and starts over, a few times.
//
// The returned Snapshot is the caller's: State.Messages is a new slice on
// every call, which the caller may modify, re-slice and append to. The
// Message values in it are copies, but what they point to (Content.Parts,
// ToolCalls, Usage, Metadata, and the bytes of the strings) is shared with
// the chunk cache and with other Loads and must not be modified in place;
// the fold never does (it appends new messages and replaces slices).
//
// Errors: as [Store.LoadHead], plus [ErrSnapshotChanged] (wrapped,
// retryable) when the history kept being replaced while it read.
func (s *Store) Load(ctx context.Context, tenant, thread string) (*Snapshot, error) {
	return s.loadWith(ctx, tenant, thread, false)
}

// LoadView is [Store.Load] without building one slice of the whole
// history: the returned State keeps the head's window (Base chunked
// messages, the newest in Messages) and Segments holds the chunked
// messages as the chunk cache's decoded slices, so a reader whose chunks
// are cached pays the head read and no copy of the history (a 1,000-message
// thread: no 270 KB slice per call). A head whose value (revision and
// bytes) is the one this Store decoded at the last LoadView of the thread
// is not opened and decoded again: the same State is returned (up to
// 16,384 heads, about 8 MiB by estimate, least recently used out first).
// Ownership: the State (its maps, slices and messages), the Chunks, the
// segments and the messages in them are shared with the caches and with
// every other LoadView (and the messages with every Load) of the thread,
// and are never modified by the store (chunks are immutable); the caller
// must not modify them either (fold.State.Clone gives a private copy), and
// may keep them as long as it likes. Without a chunk cache (Options) it
// is Load (no segments; the State holds the whole history, Base 0, the
// caller's own). Errors: as Load.
func (s *Store) LoadView(ctx context.Context, tenant, thread string) (*Snapshot, error) {
	// Load's State holds the whole history (Base 0): no segments.
	return s.loadWith(ctx, tenant, thread, s.cache != nil)
}

func (s *Store) loadWith(ctx context.Context, tenant, thread string, view bool) (*Snapshot, error) {
	if err := validIDs(tenant, thread); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &chunkFetcher{kv: s.kv, seal: s.seal, tenant: tenant, thread: thread, sem: make(chan struct{}, fetchConcurrency), m: map[string]*fetch{}}
	defer func() {
		cancel() // stop fetches the head turned out not to need
		f.wg.Wait()
	}()
	for attempt := 0; attempt < loadAttempts; attempt++ {
		snap, err := s.load(ctx, f, tenant, thread, view)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			// A newer head extended or replaced a chunk of the one read:
			// read the head again; the chunks fetched already (they never
			// change) are used again if it still names them. A tracked
			// head is read too: the newer one may not be delivered yet.
			f.forgetFailed()
			if t := s.tracker.Load(); t != nil {
				t.distrust(HeadKey(tenant, thread))
			}
			continue
		}
		return snap, err
	}
	return nil, fmt.Errorf("%w: thread %s/%s after %d attempts", ErrSnapshotChanged, tenant, thread, loadAttempts)
}

func validIDs(tenant, thread string) error {
	if err := events.ValidateTenant(tenant); err != nil {
		return err
	}
	return events.ValidateThreadID(thread)
}

// getHead reads and decodes a head; n is the value size in bytes.
func getHead(ctx context.Context, kv jetstream.KeyValue, seal sealing, tenant, thread string, sizes *[]int) (h *head, rev uint64, n int, err error) {
	e, err := getHeadEntry(ctx, kv, tenant, thread)
	if err != nil {
		return nil, 0, 0, err
	}
	if h, err = openHead(ctx, seal, tenant, thread, e.Value(), sizes); err != nil {
		return nil, 0, 0, err
	}
	return h, e.Revision(), len(e.Value()), nil
}

// sharedHead is getHead for LoadView: a head whose value is the one the
// Store decoded last for key is taken from s.heads, not decoded again.
// With TrackHeads, a decoded head the watch vouches for is taken without
// the get.
func (s *Store) sharedHead(ctx context.Context, tenant, thread, key string) (h *head, rev uint64, n int, err error) {
	t := s.tracker.Load()
	var mark trackMark
	if t != nil {
		if c, ok := s.heads.Get(key); ok && t.trusts(key, c.rev) {
			return c.h, c.rev, len(c.value), nil
		}
		mark = t.mark()
	}
	e, err := getHeadEntry(ctx, s.kv, tenant, thread)
	if err != nil {
		return nil, 0, 0, err
	}
	if c, ok := s.heads.Get(key); ok && c.rev == e.Revision() && bytes.Equal(c.value, e.Value()) {
		h = c.h
	} else {
		if h, err = openHead(ctx, s.seal, tenant, thread, e.Value(), nil); err != nil {
			s.heads.Remove(key)
			return nil, 0, 0, err
		}
		s.heads.Put(key, &sharedHead{rev: e.Revision(), value: e.Value(), h: h}, headCost(e.Value()))
	}
	if t != nil {
		t.trust(key, e.Revision(), mark)
	}
	return h, e.Revision(), len(e.Value()), nil
}

// getHeadEntry gets a thread's head value. Errors: [ErrNoSnapshot]
// (wrapped), or the KV error.
func getHeadEntry(ctx context.Context, kv jetstream.KeyValue, tenant, thread string) (jetstream.KeyValueEntry, error) {
	e, err := kv.Get(ctx, HeadKey(tenant, thread))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w for thread %s/%s", ErrNoSnapshot, tenant, thread)
	}
	if err != nil {
		return nil, fmt.Errorf("snapstore: read head of %s/%s: %w", tenant, thread, err)
	}
	return e, nil
}

// openHead opens and decodes the head value of tenant/thread.
func openHead(ctx context.Context, seal sealing, tenant, thread string, value []byte, sizes *[]int) (*head, error) {
	plain, err := seal.open(ctx, tenant, thread, HeadKey(tenant, thread), value)
	if err != nil {
		return nil, fmt.Errorf("%w: head of %s/%s: %v", ErrCorrupt, tenant, thread, err)
	}
	h, err := decodeHead(plain, sizes)
	if err != nil {
		return nil, fmt.Errorf("thread %s/%s: %w", tenant, thread, err)
	}
	return h, nil
}

// fillChunks makes h.State complete: it puts the messages of every chunk
// the head names into a new slice before the tail (the fetcher's pre slice
// when it fits), taking them from the chunk cache or from fetches through
// f (each decoded as it arrives, and cached), and sets Base to 0. It
// returns the chunk bytes read from KV and those taken from the cache, or
// an error wrapping jetstream.ErrKeyNotFound when a chunk is gone.
//
// The new slice holds copies of the cached Message values, so the cache's
// slices are never handed out and a caller may overwrite fields of its
// messages; what the values point to (string bytes, Content.Parts,
// ToolCalls, Usage, Metadata) is shared. That is safe because nothing
// modifies what a Message in a State points to: the fold (fold.go) never
// writes to an element of State.Messages at all; it appends new Message
// values (appendMessage, closePending), builds new slices (checkHistory,
// compact) or replaces the slice (replaceHistory). State.Clone relies on
// the same rule.
// With view (a chunk cache is required), the State keeps its window and
// the chunks' cached slices are returned as segments instead.
func (s *Store) fillChunks(ctx context.Context, f *chunkFetcher, tenant, thread string, h *head, view bool) (read, cached int, segs [][]events.Message, err error) {
	st := h.State
	if len(h.Chunks) == 0 {
		if view {
			if st.Base != 0 {
				return 0, 0, nil, fmt.Errorf("%w: the head counts %d chunked messages and names no chunk", ErrCorrupt, st.Base)
			}
			segs = [][]events.Message{}
		}
		return 0, 0, segs, nil
	}
	hkey := HeadKey(tenant, thread)
	keys := RefKeys(tenant, thread, h.Gen, h.Chunks)
	if err := checkChunks(h, keys, view); err != nil {
		return 0, 0, nil, err
	}
	size := st.Base + len(st.Messages)
	hits := s.cachedChunks(f, hkey, h, keys)
	var all []events.Message
	switch {
	case view:
		segs = make([][]events.Message, len(h.Chunks))
	case s.cache == nil && len(f.pre) >= st.Base && cap(f.pre) >= size:
		all = f.pre[:size] // the hinted chunks still named are in place
	default:
		all = make([]events.Message, size)
	}
	if !view {
		copy(all[st.Base:], st.Messages)
	}
	var (
		misses []chunkMiss
		deltas []ChunkRef
		intos  [][]events.Message
	)
	for i, c := range h.Chunks {
		if hits != nil && hits[i] != nil {
			if view {
				segs[i] = hits[i].msgs
			} else {
				copy(all[c.First:c.First+c.Count], hits[i].msgs)
			}
			cached += int(hits[i].bytes)
			continue
		}
		if c.Level == LevelDelta && s.batch != nil && h.DeltaRev > 0 {
			deltas, intos = append(deltas, c), append(intos, s.into(all, c))
		}
		misses = append(misses, chunkMiss{i: i, c: c})
	}
	// The deltas not on their way yet are read with one batched get; the
	// rest each with a get of its own (start returns a fetch on its way).
	s.startDeltas(ctx, f, h.Gen, deltaRun(h.Chunks), h.DeltaRev, countDeltas(h.Chunks), deltas, intos)
	for k := range misses {
		m := &misses[k]
		m.r = f.start(ctx, keys[m.i], m.c.Count, s.into(all, m.c))
	}
	if read, err = s.awaitMisses(ctx, hkey, h.Gen, misses, all, segs); err != nil {
		return 0, 0, nil, err
	}
	if !view {
		st.Messages, st.Base = all, 0
	}
	return read, cached, segs, nil
}

// cachedChunks returns the cache's entry for each chunk h names (nil
// entries: not cached; nil: no cache), and cancels the fetches under way
// in f that the head does not need (chunks extended or replaced since the
// hint, or found cached meanwhile). One may still be decoding into f.pre,
// over a range this head puts other messages in, so it waits until they
// are all done before anything is written.
func (s *Store) cachedChunks(f *chunkFetcher, hkey string, h *head, keys []string) []*chunkEntry {
	var hits []*chunkEntry
	if s.cache != nil {
		hits = make([]*chunkEntry, len(h.Chunks))
		s.cache.lookup(hkey, h.Gen, h.Chunks, hits, true)
	}
	need := map[string]bool{}
	for i := range h.Chunks {
		if hits == nil || hits[i] == nil {
			need[keys[i]] = true
		}
	}
	for _, r := range f.keep(need) {
		<-r.done
	}
	return hits
}

// checkChunks checks that every chunk h names lies within its chunked
// messages and, with view, that they cover them in order without a gap
// (segments stand for the first Base messages). keys are the chunks' keys.
func checkChunks(h *head, keys []string, view bool) error {
	base := h.State.Base
	for i, c := range h.Chunks {
		if c.First < 0 || c.Count < 1 || c.First+c.Count > base {
			return fmt.Errorf("%w: chunk %s lies outside the head's %d chunked messages", ErrCorrupt, keys[i], base)
		}
	}
	if !view {
		return nil
	}
	next := 0
	for i, c := range h.Chunks {
		if c.First != next {
			return fmt.Errorf("%w: chunk %s does not follow the one before (which ends at %d)", ErrCorrupt, keys[i], next)
		}
		next += c.Count
	}
	if next != base {
		return fmt.Errorf("%w: the chunks hold %d messages, the head counts %d", ErrCorrupt, next, base)
	}
	return nil
}

// chunkMiss is a chunk fillChunks fetches: its index in the head, its
// reference and its fetch.
type chunkMiss struct {
	i int
	c ChunkRef
	r *fetch
}

// into is where a fetch of chunk c decodes: its place in all when the
// store has no chunk cache, else nil (a slice of the fetch's own, which
// the cache keeps).
func (s *Store) into(all []events.Message, c ChunkRef) []events.Message {
	if s.cache != nil || all == nil {
		return nil
	}
	return all[c.First : c.First+c.Count]
}

// awaitMisses waits for the fetches of misses, puts each chunk's messages
// in its place in all (or its segment in segs, when all is nil: a view),
// caches them, and returns the bytes read. The first fetch error is
// returned.
func (s *Store) awaitMisses(ctx context.Context, hkey string, gen uint64, misses []chunkMiss, all []events.Message, segs [][]events.Message) (int, error) {
	read := 0
	for _, m := range misses {
		select {
		case <-m.r.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if m.r.err != nil {
			return 0, m.r.err
		}
		if m.r.decErr != nil {
			return 0, m.r.decErr
		}
		read += len(m.r.data)
		if all == nil {
			segs[m.i] = m.r.msgs
		} else if dst := all[m.c.First : m.c.First+m.c.Count]; &m.r.msgs[0] != &dst[0] {
			copy(dst, m.r.msgs)
		}
		if s.cache != nil {
			// Decoded into a slice of the fetch's own, which the cache
			// keeps; r.data is never modified, so the strings that share
			// it stay valid.
			s.cache.put(chunkID{thread: hkey, gen: gen, first: m.c.First, count: m.c.Count}, m.r.msgs, len(m.r.data))
		}
	}
	return read, nil
}

// kvOperationHeader marks KV delete and purge markers (nats.go's KV).
const kvOperationHeader = "KV-Operation"

// countDeltas is the number of deltas in refs.
func countDeltas(refs []ChunkRef) int {
	n := 0
	for _, c := range refs {
		if c.Level == LevelDelta {
			n++
		}
	}
	return n
}

// forEach calls fn(ctx, i) for i in [0, n) on up to conc goroutines, and
// waits for them. The first error cancels the rest and is returned; if ctx
// ends first, its error is returned.
func forEach(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	switch {
	case n == 0:
		return nil
	case n == 1 || conc <= 1:
		for i := 0; i < n; i++ {
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	return forEachConc(ctx, n, conc, fn)
}

// forEachConc is forEach's concurrent case, a function of its own so that
// the single-call case (a step's one delta) moves nothing to the heap for
// the goroutines.
func forEachConc(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		done  atomic.Int64
		once  sync.Once
		first error
	)
	for range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if int(done.Load()) < n {
		return context.Cause(ctx)
	}
	return nil
}

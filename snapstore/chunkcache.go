package snapstore

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
)

// DefaultChunkCacheBytes is the size of the chunk cache of a [Store]
// made by [New]: 64 MiB of encoded chunk bytes.
const DefaultChunkCacheBytes = 64 << 20

// Options configures a [Store]. The zero value means the
// defaults ([New]).
type Options struct {
	// ChunkCacheBytes bounds the cache of decoded history chunks, in
	// encoded chunk bytes: the sum of the cached chunks' KV value sizes
	// (ChunkRef.Bytes) never exceeds it. 0 means [DefaultChunkCacheBytes];
	// a negative value disables the cache, so that every Load reads every
	// chunk from KV.
	//
	// The memory the cache holds is somewhat more than its bound: the
	// encoded bytes (decoded strings share them) plus the decoded messages,
	// about 264 bytes of events.Message per message and the tool calls,
	// content parts, usage and metadata decoded into memory of their own.
	// For messages of 512 bytes of text (606 encoded) that is about 1.45
	// times the bound; for short messages it is more.
	ChunkCacheBytes int
	// Sealer opens sealed heads and chunks (threadkey.Keys); nil reads
	// clear values only.
	Sealer Sealer
	// Batch, when set, reads in one request up to n messages of the
	// snapshot bucket's stream whose subjects match subject (a wildcard),
	// from stream sequence from on, in stream order; the messages' Subject,
	// Data and Sequence are used. client/ passes a batched direct get
	// (nats-server 2.11+, the bucket's allow_direct). A Store uses it to
	// read a head's deltas (package doc) in one round trip instead of one
	// get each; nil, or an error, falls back to a get per delta. It must
	// be safe for concurrent use.
	Batch func(ctx context.Context, subject string, from uint64, n int) ([]*jetstream.RawStreamMsg, error)
}

// ChunkCacheStats describes the chunk cache of a [Store] (see
// [Store.ChunkCacheStats]). Counters start at zero when the Store
// is made and only grow.
type ChunkCacheStats struct {
	// MaxBytes is the bound in encoded chunk bytes; 0 when the cache is
	// disabled.
	MaxBytes int64
	// Bytes is the encoded size of the chunks cached now (<= MaxBytes),
	// Chunks their number.
	Bytes  int64
	Chunks int
	// Hits and Misses count the chunks Load looked up, found in the cache
	// or read from KV.
	Hits, Misses uint64
	// Evictions counts chunks dropped to stay within MaxBytes (least
	// recently used first); Dropped counts chunks dropped because their
	// thread was seen at a newer layout generation, erased, or without a
	// snapshot.
	Evictions, Dropped uint64
}

// chunkID names a chunk: the thread's head key and the chunk key's
// generation, first index and count (ChunkKey without building the string).
type chunkID struct {
	thread       string
	gen          uint64
	first, count int
}

// chunkEntry is one cached chunk: its messages, decoded once and never
// modified afterwards, and the encoded size they are accounted for.
type chunkEntry struct {
	id         chunkID
	msgs       []events.Message
	bytes      int64
	prev, next *chunkEntry // LRU list; lru.next is the most recently used
}

// threadChunks indexes a thread's cached chunks, which are all of one
// generation.
type threadChunks struct {
	gen     uint64
	entries map[*chunkEntry]struct{}
}

// chunkCache is a byte-bounded LRU cache of decoded chunks, safe for
// concurrent use. A nil *chunkCache is a disabled cache: it holds nothing.
//
// A chunk key names immutable content (see the package doc), so an entry is
// right for as long as it exists; an entry no head names any more is just
// never hit again. Entries are indexed by thread so that those of an older
// generation are dropped as soon as a newer generation of the thread is
// seen, and all of them when the thread is erased or has no snapshot.
type chunkCache struct {
	max int64

	mu      sync.Mutex
	used    int64
	m       map[chunkID]*chunkEntry
	threads map[string]*threadChunks
	lru     chunkEntry // sentinel of the circular LRU list
	stats   ChunkCacheStats
}

// newChunkCache returns a cache of max encoded bytes, or nil (disabled)
// when max <= 0.
func newChunkCache(max int64) *chunkCache {
	if max <= 0 {
		return nil
	}
	c := &chunkCache{max: max, m: map[chunkID]*chunkEntry{}, threads: map[string]*threadChunks{}}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	return c
}

// lookup sets out[i] to the cached entry of chunk refs[i] of thread at gen,
// or nil, and returns the number found. With touch, the entries found
// become the most recently used and the lookups are counted in the stats;
// without, lookup only peeks.
func (c *chunkCache) lookup(thread string, gen uint64, refs []ChunkRef, out []*chunkEntry, touch bool) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for i, r := range refs {
		e := c.m[chunkID{thread: thread, gen: gen, first: r.First, count: r.Count}]
		out[i] = e
		if e == nil {
			continue
		}
		n++
		if touch {
			c.unlink(e)
			c.pushFront(e)
		}
	}
	if touch {
		c.stats.Hits += uint64(n)
		c.stats.Misses += uint64(len(refs) - n)
	}
	return n
}

// put caches msgs, the decoded chunk id of the given encoded size. msgs
// must never be modified afterwards. A chunk already cached (another Load
// fetched it at the same time) is kept and not counted twice; a chunk of an
// older generation than the thread's cached chunks (read from a head that
// has since been replaced) is not cached; one of a newer generation first
// drops the thread's cached chunks.
func (c *chunkCache) put(id chunkID, msgs []events.Message, size int) {
	if c == nil || int64(size) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[id]; ok {
		c.unlink(e)
		c.pushFront(e)
		return
	}
	t := c.threads[id.thread]
	switch {
	case t != nil && id.gen < t.gen:
		return
	case t != nil && id.gen > t.gen:
		c.dropThread(id.thread)
		t = nil
	}
	if t == nil {
		t = &threadChunks{gen: id.gen, entries: map[*chunkEntry]struct{}{}}
		c.threads[id.thread] = t
	}
	e := &chunkEntry{id: id, msgs: msgs, bytes: int64(size)}
	c.m[id] = e
	t.entries[e] = struct{}{}
	c.pushFront(e)
	c.used += e.bytes
	for c.used > c.max {
		c.remove(c.lru.prev)
		c.stats.Evictions++
	}
}

// sawHead tells the cache that thread's head is at generation gen (and
// erased or not): an erased thread's chunks are dropped, and so are those of
// an older generation.
func (c *chunkCache) sawHead(thread string, gen uint64, erased bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.threads[thread]; t != nil && (erased || gen > t.gen) {
		c.dropThread(thread)
	}
}

// forget drops every cached chunk of thread (it has no snapshot).
func (c *chunkCache) forget(thread string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropThread(thread)
}

// currentStats returns the current figures; the zero value for a disabled
// cache.
func (c *chunkCache) currentStats() ChunkCacheStats {
	if c == nil {
		return ChunkCacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.MaxBytes, s.Bytes, s.Chunks = c.max, c.used, len(c.m)
	return s
}

// dropThread removes every entry of thread. c.mu is held.
func (c *chunkCache) dropThread(thread string) {
	t := c.threads[thread]
	if t == nil {
		return
	}
	for e := range t.entries {
		c.remove(e)
		c.stats.Dropped++
	}
}

// remove unlinks e from every index. c.mu is held.
func (c *chunkCache) remove(e *chunkEntry) {
	c.unlink(e)
	delete(c.m, e.id)
	c.used -= e.bytes
	if t := c.threads[e.id.thread]; t != nil {
		delete(t.entries, e)
		if len(t.entries) == 0 {
			delete(c.threads, e.id.thread)
		}
	}
}

func (c *chunkCache) unlink(e *chunkEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *chunkCache) pushFront(e *chunkEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

package snapstore

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// check fails t unless the cache's indexes agree with each other: the map,
// the LRU list and the per-thread index hold the same entries, the bytes
// used are the sum of theirs and within the bound, and every thread's
// entries are of its generation.
func (c *chunkCache) check(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	n := 0
	for e := c.lru.next; e != &c.lru; e = e.next {
		require.Same(t, e, e.next.prev, "LRU list links")
		require.Same(t, e, c.m[e.id], "an entry in the LRU list is in the map")
		th := c.threads[e.id.thread]
		require.NotNil(t, th, "the thread of %v is indexed", e.id)
		require.Contains(t, th.entries, e)
		require.Equal(t, th.gen, e.id.gen, "every cached chunk of a thread is of its generation")
		sum += e.bytes
		n++
	}
	require.Equal(t, len(c.m), n, "the map and the LRU list hold the same entries")
	k := 0
	for _, th := range c.threads {
		require.NotEmpty(t, th.entries, "a thread without entries is not indexed")
		k += len(th.entries)
	}
	require.Equal(t, n, k, "the thread index holds every entry once")
	require.Equal(t, sum, c.used, "bytes used are the sum of the entries'")
	require.LessOrEqual(t, c.used, c.max, "bytes used stay within the bound")
}

// order returns the cached ids, most recently used first.
func (c *chunkCache) order() []chunkID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []chunkID
	for e := c.lru.next; e != &c.lru; e = e.next {
		ids = append(ids, e.id)
	}
	return ids
}

func msgs(n int) []events.Message {
	ms := make([]events.Message, n)
	for i := range ms {
		ms[i] = events.Message{Role: events.RoleUser, Content: events.Text(fmt.Sprint(i))}
	}
	return ms
}

func TestChunkCache(t *testing.T) {
	id := func(thread string, gen uint64, first int) chunkID {
		return chunkID{thread: thread, gen: gen, first: first, count: 1}
	}
	ref := func(first int) ChunkRef { return ChunkRef{First: first, Count: 1} }
	has := func(c *chunkCache, i chunkID) bool {
		out := make([]*chunkEntry, 1)
		return c.lookup(i.thread, i.gen, []ChunkRef{{First: i.first, Count: i.count}}, out, false) == 1
	}

	t.Run("the least recently used chunks are evicted first, and a lookup makes a chunk recent", func(t *testing.T) {
		c := newChunkCache(300)
		c.put(id("a", 0, 0), msgs(1), 100)
		c.put(id("a", 0, 1), msgs(1), 100)
		c.put(id("b", 0, 0), msgs(1), 100)
		out := make([]*chunkEntry, 1)
		require.Equal(t, 1, c.lookup("a", 0, []ChunkRef{ref(0)}, out, true))
		c.put(id("b", 0, 1), msgs(1), 100) // evicts a/0/1, the least recently used
		c.check(t)
		require.Equal(t, []chunkID{id("b", 0, 1), id("a", 0, 0), id("b", 0, 0)}, c.order())
		st := c.currentStats()
		require.Equal(t, ChunkCacheStats{MaxBytes: 300, Bytes: 300, Chunks: 3, Hits: 1, Evictions: 1}, st)
	})

	t.Run("a chunk is found only under its own thread, generation, first and count", func(t *testing.T) {
		c := newChunkCache(1000)
		c.put(chunkID{thread: "a", gen: 1, first: 4, count: 2}, msgs(2), 10)
		out := make([]*chunkEntry, 1)
		require.Equal(t, 1, c.lookup("a", 1, []ChunkRef{{First: 4, Count: 2}}, out, false))
		require.Zero(t, c.lookup("a", 2, []ChunkRef{{First: 4, Count: 2}}, out, false))
		require.Zero(t, c.lookup("a", 0, []ChunkRef{{First: 4, Count: 2}}, out, false))
		require.Zero(t, c.lookup("b", 1, []ChunkRef{{First: 4, Count: 2}}, out, false))
		require.Zero(t, c.lookup("a", 1, []ChunkRef{{First: 4, Count: 3}}, out, false))
		require.Zero(t, c.lookup("a", 1, []ChunkRef{{First: 5, Count: 2}}, out, false))
	})

	t.Run("a chunk put twice is cached and counted once", func(t *testing.T) {
		c := newChunkCache(1000)
		first := msgs(2)
		c.put(chunkID{thread: "a", count: 2}, first, 100)
		c.put(chunkID{thread: "a", count: 2}, msgs(2), 100)
		c.check(t)
		require.Equal(t, int64(100), c.currentStats().Bytes)
		out := make([]*chunkEntry, 1)
		c.lookup("a", 0, []ChunkRef{{Count: 2}}, out, true)
		require.Same(t, &first[0], &out[0].msgs[0], "the first put is kept")
	})

	t.Run("a chunk larger than the bound is not cached", func(t *testing.T) {
		c := newChunkCache(100)
		c.put(id("a", 0, 0), msgs(1), 60)
		c.put(id("a", 0, 1), msgs(1), 101)
		c.check(t)
		require.True(t, has(c, id("a", 0, 0)), "nothing was evicted for it")
		require.False(t, has(c, id("a", 0, 1)))
	})

	t.Run("a newer generation drops the thread's older chunks and no others", func(t *testing.T) {
		c := newChunkCache(1000)
		c.put(id("a", 1, 0), msgs(1), 10)
		c.put(id("a", 1, 1), msgs(1), 10)
		c.put(id("b", 1, 0), msgs(1), 10)
		c.sawHead("a", 1, false)
		require.True(t, has(c, id("a", 1, 0)), "the same generation keeps its chunks")
		c.sawHead("a", 0, false)
		require.True(t, has(c, id("a", 1, 0)), "a stale head of an older generation drops nothing")
		c.sawHead("a", 2, false)
		c.check(t)
		require.False(t, has(c, id("a", 1, 0)))
		require.False(t, has(c, id("a", 1, 1)))
		require.True(t, has(c, id("b", 1, 0)))
		require.Equal(t, uint64(2), c.currentStats().Dropped)

		c.put(id("a", 3, 0), msgs(1), 10)
		c.put(id("a", 2, 5), msgs(1), 10) // read from a head replaced meanwhile
		c.check(t)
		require.False(t, has(c, id("a", 2, 5)), "a chunk of an older generation than the cached ones is not cached")
		c.put(id("a", 4, 0), msgs(1), 10)
		c.check(t)
		require.False(t, has(c, id("a", 3, 0)), "a put of a newer generation drops the older one")
		require.Equal(t, int64(20), c.currentStats().Bytes)
	})

	t.Run("an erased thread or one without a snapshot loses all its chunks", func(t *testing.T) {
		c := newChunkCache(1000)
		c.put(id("a", 1, 0), msgs(1), 10)
		c.put(id("b", 1, 0), msgs(1), 10)
		c.put(id("c", 1, 0), msgs(1), 10)
		c.sawHead("a", 1, true)
		c.forget("b")
		c.check(t)
		require.Equal(t, []chunkID{id("c", 1, 0)}, c.order())
	})

	t.Run("a disabled cache holds nothing", func(t *testing.T) {
		c := newChunkCache(-1)
		require.Nil(t, c)
		c.put(id("a", 0, 0), msgs(1), 1)
		c.sawHead("a", 1, true)
		c.forget("a")
		require.Zero(t, c.lookup("a", 0, []ChunkRef{ref(0)}, make([]*chunkEntry, 1), true))
		require.Equal(t, ChunkCacheStats{}, c.currentStats())
	})

	t.Run("random operations keep the accounting exact and within the bound", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		c := newChunkCache(10_000)
		gens := map[string]uint64{}
		for i := 0; i < 20_000; i++ {
			th := fmt.Sprintf("t%d", rng.IntN(8))
			switch r := rng.IntN(100); {
			case r < 60:
				g := gens[th]
				if rng.IntN(10) == 0 && g > 0 {
					g-- // a reader holding an older head
				}
				c.put(chunkID{thread: th, gen: g, first: rng.IntN(20), count: 1}, msgs(1), 1+rng.IntN(1500))
			case r < 80:
				refs := make([]ChunkRef, 5)
				for k := range refs {
					refs[k] = ref(rng.IntN(20))
				}
				c.lookup(th, gens[th], refs, make([]*chunkEntry, len(refs)), rng.IntN(2) == 0)
			case r < 95:
				if rng.IntN(5) == 0 {
					gens[th]++
				}
				c.sawHead(th, gens[th], rng.IntN(50) == 0)
			default:
				c.forget(th)
			}
			if i%100 == 0 {
				c.check(t)
			}
		}
		c.check(t)
		st := c.currentStats()
		require.NotZero(t, st.Evictions)
		require.NotZero(t, st.Dropped)
		require.NotZero(t, st.Hits)
		t.Logf("%+v", st)
	})

	t.Run("concurrent use keeps the accounting exact", func(t *testing.T) {
		c := newChunkCache(5_000)
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 9))
				for i := 0; i < 5_000; i++ {
					th := fmt.Sprintf("t%d", rng.IntN(4))
					g := uint64(i / 1000)
					// Every worker puts the same chunks: racing puts of one chunk.
					c.put(chunkID{thread: th, gen: g, first: rng.IntN(10), count: 1}, msgs(1), 100+rng.IntN(400))
					c.lookup(th, g, []ChunkRef{ref(rng.IntN(10))}, make([]*chunkEntry, 1), true)
					c.sawHead(th, g, false)
				}
			})
		}
		wg.Wait()
		c.check(t)
	})
}

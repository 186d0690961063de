package projector_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/foldcases"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// smallChunks makes a few hundred messages span dozens of chunks, with
// merges of small chunks every few events.
var smallChunks = projector.Config{ChunkBytes: 4 << 10, TailBytes: 1 << 10}

// uncached returns a reader of e's snapshots without a chunk cache: every
// Load reads every byte from KV, the reference the cached reader must match.
func (e *env) uncached() *snapstore.Store {
	return e.store(e.res.Snapshots, snapstore.Options{ChunkCacheBytes: -1})
}

// appendMessages publishes n messages (user and assistant alternating,
// contents from index from on) to tenant/thread and returns their
// sequences.
func (e *env) appendMessages(t testing.TB, c *clock, tenant, thread string, from, n int) []uint64 {
	t.Helper()
	var evs []events.Event
	for i := from; i < from+n; i++ {
		if i%2 == 0 {
			evs = append(evs, c.ev(tenant, thread, events.UserMessage{Content: content512(i)}))
		} else {
			evs = append(evs, c.ev(tenant, thread, events.AssistantMessage{Content: content512(i)}))
		}
	}
	if len(evs) == 0 {
		return nil
	}
	return e.publishAsync(t, evs)
}

// requireSameLoad loads tenant/thread with the reader without a cache and
// with cached, requires the two snapshots to be equal, and returns the
// cached reader's.
func requireSameLoad(t testing.TB, plain, cached *snapstore.Store, tenant, thread string) *snapstore.Snapshot {
	t.Helper()
	ctx := context.Background()
	want, err := plain.Load(ctx, tenant, thread)
	require.NoError(t, err)
	got, err := cached.Load(ctx, tenant, thread)
	require.NoError(t, err)
	require.Equal(t, want.State, got.State, "thread %s/%s", tenant, thread)
	require.Equal(t, want.Revision, got.Revision)
	require.Equal(t, want.Gen, got.Gen)
	require.Equal(t, want.Chunks, got.Chunks)
	require.Zero(t, want.CachedBytes, "a reader without a cache reads everything from KV")
	require.Equal(t, want.Bytes, got.Bytes+got.CachedBytes, "what was read from KV and from the cache add up to the snapshot")
	return got
}

func chunkBytes(s *snapstore.Snapshot) int {
	n := 0
	for _, c := range s.Chunks {
		n += c.Bytes
	}
	return n
}

// A reader with the chunk cache returns exactly what a reader without one
// returns, for threads of several lengths, cold and warm, after more
// events, after a reset, a restore and a compaction (new generations) and
// after erasure; and a warm Load reads only the head from KV.
func TestCachedLoadsEqualUncachedLoads(t *testing.T) {
	e := newEnv(t)
	e.start(t, smallChunks)
	c := &clock{t: time.Unix(1700000000, 0)}
	plain, cached := e.uncached(), e.store(e.res.Snapshots, snapstore.Options{})
	const tenant = "cache"
	lengths := []int{0, 3, 40, 300, 1200}
	threads := make([]string, len(lengths))
	for i, n := range lengths {
		threads[i] = fmt.Sprintf("t%d", n)
		e.publish(t, c.ev(tenant, threads[i], events.ThreadCreated{}))
		e.appendMessages(t, c, tenant, threads[i], 0, n)
	}
	for _, th := range threads {
		h, err := e.res.Stream.GetLastMsgForSubject(context.Background(), "conv."+tenant+"."+th)
		require.NoError(t, err)
		e.waitVersion(t, tenant, th, h.Sequence)
	}

	t.Run("a cold load reads everything from KV, a warm one only the head", func(t *testing.T) {
		for i, th := range threads {
			cold := requireSameLoad(t, plain, cached, tenant, th)
			require.Len(t, cold.State.Messages, lengths[i])
			require.Zero(t, cold.CachedBytes, "thread %s", th)
			warm := requireSameLoad(t, plain, cached, tenant, th)
			require.Equal(t, chunkBytes(warm), warm.CachedBytes, "thread %s: every chunk came from the cache", th)
			head, err := plain.LoadHead(context.Background(), tenant, th)
			require.NoError(t, err)
			require.Equal(t, head.Bytes, warm.Bytes, "thread %s: only the head was read from KV", th)
		}
		require.Greater(t, len(requireSameLoad(t, plain, cached, tenant, "t1200").Chunks), 50)
		st := cached.ChunkCacheStats()
		require.NotZero(t, st.Hits)
		require.Equal(t, int64(snapstore.DefaultChunkCacheBytes), st.MaxBytes)
	})

	t.Run("after more events, old chunks come from the cache and new ones from KV", func(t *testing.T) {
		for i, th := range threads {
			seqs := e.appendMessages(t, c, tenant, th, lengths[i], 57)
			e.waitVersion(t, tenant, th, seqs[len(seqs)-1])
			got := requireSameLoad(t, plain, cached, tenant, th)
			require.Len(t, got.State.Messages, lengths[i]+57)
			if lengths[i] >= 300 {
				require.Positive(t, got.CachedBytes, "thread %s", th)
				require.Less(t, got.CachedBytes, chunkBytes(got), "thread %s: the new chunks were read from KV", th)
			}
			requireSameLoad(t, plain, cached, tenant, th)
		}
	})

	t.Run("a reset, a restore and a compaction start generations the cache follows", func(t *testing.T) {
		gens := map[string]uint64{}
		for _, th := range []string{"t40", "t300", "t1200"} {
			gens[th] = requireSameLoad(t, plain, cached, tenant, th).Gen
		}
		dropped := cached.ChunkCacheStats().Dropped
		// t300: reset, then enough messages for new chunks.
		e.publish(t, c.ev(tenant, "t300", events.Reset{}))
		seqs := e.appendMessages(t, c, tenant, "t300", 10_000, 80)
		e.waitVersion(t, tenant, "t300", seqs[len(seqs)-1])
		// t40: restore.
		v := e.publish(t, c.ev(tenant, "t40", events.Restore{Messages: []events.Message{
			{Role: events.RoleUser, Content: content512(1)}, {Role: events.RoleAssistant, Content: content512(2)}}}))
		e.waitVersion(t, tenant, "t40", v)
		// t1200: a compaction that cuts deep into the chunks.
		h, err := plain.Load(context.Background(), tenant, "t1200")
		require.NoError(t, err)
		cut := h.State.Messages[700].Seq
		v = e.publish(t, c.ev(tenant, "t1200", events.Compaction{UpToSeq: cut, Summary: events.Text("so far")}))
		e.waitVersion(t, tenant, "t1200", v)

		for _, th := range []string{"t40", "t300", "t1200"} {
			got := requireSameLoad(t, plain, cached, tenant, th)
			require.Greater(t, got.Gen, gens[th], "thread %s has a new generation", th)
			requireSameLoad(t, plain, cached, tenant, th)
		}
		require.Greater(t, cached.ChunkCacheStats().Dropped, dropped, "the old generations' chunks were dropped")
	})

	t.Run("an erased thread loads as erased and its chunks leave the cache", func(t *testing.T) {
		// A new reader, so that the cache holds exactly the chunks the
		// heads name (a long-lived one also holds merged-away chunks
		// until they age out).
		fresh := e.store(e.res.Snapshots, snapstore.Options{})
		gone := requireSameLoad(t, plain, fresh, tenant, "t1200")
		kept := requireSameLoad(t, plain, fresh, tenant, "t300")
		require.NotEmpty(t, gone.Chunks)
		require.NotEmpty(t, kept.Chunks)
		st := fresh.ChunkCacheStats()
		require.Equal(t, int64(chunkBytes(gone)+chunkBytes(kept)), st.Bytes)
		require.Equal(t, len(gone.Chunks)+len(kept.Chunks), st.Chunks)

		ctx := context.Background()
		require.NoError(t, e.res.Stream.Purge(ctx, jetstream.WithPurgeSubject("conv."+tenant+".t1200")))
		marker := e.publish(t, c.ev(tenant, "t1200", events.Erased{Reason: "test"}))
		e.waitVersion(t, tenant, "t1200", marker)
		got := requireSameLoad(t, plain, fresh, tenant, "t1200")
		require.True(t, got.State.Erased)
		require.Empty(t, got.State.Messages)
		st = fresh.ChunkCacheStats()
		require.Equal(t, int64(chunkBytes(kept)), st.Bytes, "only the kept thread's chunks are cached")
		require.Equal(t, len(kept.Chunks), st.Chunks)
		require.Equal(t, uint64(len(gone.Chunks)), st.Dropped)
		requireSameLoad(t, plain, cached, tenant, "t1200")

		// A snapshot that disappears (its keys purged) takes its
		// thread's chunks along too.
		require.NoError(t, e.res.Snapshots.Purge(ctx, snapstore.HeadKey(tenant, "t300")))
		_, err := fresh.Load(ctx, tenant, "t300")
		require.ErrorIs(t, err, snapstore.ErrNoSnapshot)
		st = fresh.ChunkCacheStats()
		require.Zero(t, st.Bytes)
		require.Zero(t, st.Chunks)
	})
}

// Every Load returns a slice of its own: a caller that overwrites and
// appends messages changes nothing another Load returns.
func TestCachedLoadsReturnTheCallersOwnMessages(t *testing.T) {
	e := newEnv(t)
	e.start(t, smallChunks)
	c := &clock{t: time.Unix(1700000000, 0)}
	e.publish(t, c.ev("own", "t", events.ThreadCreated{}))
	seqs := e.appendMessages(t, c, "own", "t", 0, 200)
	e.waitVersion(t, "own", "t", seqs[len(seqs)-1])
	plain, cached := e.uncached(), e.store(e.res.Snapshots, snapstore.Options{})

	a := requireSameLoad(t, plain, cached, "own", "t")
	b := requireSameLoad(t, plain, cached, "own", "t")
	require.Positive(t, b.CachedBytes)
	require.NotSame(t, &a.State.Messages[0], &b.State.Messages[0], "two Loads share no slice")
	for i := range a.State.Messages {
		a.State.Messages[i].Content = events.Text("overwritten")
		a.State.Messages[i].Seq = 0
	}
	a.State.Messages = append(a.State.Messages[:10], events.Message{Role: events.RoleUser, Content: events.Text("appended")})
	b.State.Messages = append(b.State.Messages, events.Message{Role: events.RoleUser, Content: events.Text("appended")})
	got := requireSameLoad(t, plain, cached, "own", "t")
	require.Len(t, got.State.Messages, 200)
	require.Equal(t, content512(0), got.State.Messages[0].Content)
	require.Equal(t, content512(10), got.State.Messages[10].Content)
}

// With a cache much smaller than the threads read, eviction keeps its
// bytes within the bound after every Load, and what it returns still
// equals a reader without a cache.
func TestChunkCacheStaysWithinItsBound(t *testing.T) {
	e := newEnv(t)
	e.start(t, smallChunks)
	c := &clock{t: time.Unix(1700000000, 0)}
	const bound = 48 << 10
	plain := e.uncached()
	cached := e.store(e.res.Snapshots, snapstore.Options{ChunkCacheBytes: bound})
	var threads []string
	for i := 0; i < 5; i++ {
		th := fmt.Sprintf("t%d", i)
		threads = append(threads, th)
		e.publish(t, c.ev("bound", th, events.ThreadCreated{}))
		seqs := e.appendMessages(t, c, "bound", th, 0, 40+30*i) // 24 to 100 KB each
		e.waitVersion(t, "bound", th, seqs[len(seqs)-1])
	}
	rng := rand.New(rand.NewPCG(4, 5))
	for i := 0; i < 60; i++ {
		th := threads[rng.IntN(len(threads))]
		if i%3 == 0 {
			th = threads[0] // small enough to stay: some Loads hit
		}
		requireSameLoad(t, plain, cached, "bound", th)
		st := cached.ChunkCacheStats()
		require.LessOrEqual(t, st.Bytes, int64(bound), "after load %d", i)
		require.Positive(t, st.Chunks)
	}
	st := cached.ChunkCacheStats()
	require.NotZero(t, st.Evictions)
	require.NotZero(t, st.Hits)
	require.NotZero(t, st.Misses)
	t.Logf("%+v", st)
}

// Readers sharing one cached Snapshots load threads while they are
// projected (small chunks, so the tail moves into chunks and chunks merge
// every few events; resets and compactions start new generations) and
// while a small cache evicts: every Load returns exactly the thread at the
// version it got. Run with -race.
func TestConcurrentCachedLoads(t *testing.T) {
	e := newEnv(t)
	e.start(t, projector.Config{ChunkBytes: 2 << 10, TailBytes: 512, MaxBatch: 10})
	c := &clock{t: time.Unix(1700000000, 0)}
	const tenant = "conc"
	const bound = 512 << 10 // less than the three threads in the end (1.3 MB)
	cached := e.store(e.res.Snapshots, snapstore.Options{ChunkCacheBytes: bound})
	threads := []string{"a", "b", "c"}
	evs := map[string][]events.Event{}
	for _, th := range threads {
		evs[th] = []events.Event{c.ev(tenant, th, events.ThreadCreated{})}
	}
	for i := 0; i < 700; i++ {
		for k, th := range threads {
			switch {
			case i%250 == 249 && k == 0:
				evs[th] = append(evs[th], c.ev(tenant, th, events.Reset{}))
			case i%2 == 0:
				evs[th] = append(evs[th], c.ev(tenant, th, events.UserMessage{Content: content512(i)}))
			default:
				evs[th] = append(evs[th], c.ev(tenant, th, events.AssistantMessage{Content: content512(i)}))
			}
		}
	}

	type key struct {
		thread  string
		version uint64
	}
	var (
		mu   sync.Mutex
		seen = map[key]uint64{} // fingerprint of the messages at a version
		bad  error
	)
	fingerprint := func(ms []events.Message) uint64 {
		h := fnv.New64a()
		for _, m := range ms {
			fmt.Fprintf(h, "%d %s\n", m.Seq, foldcases.Line(m))
		}
		return h.Sum64()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 6; r++ {
		wg.Go(func() {
			ctx := context.Background()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				th := threads[(r+i)%len(threads)]
				s, err := cached.Load(ctx, tenant, th)
				if errors.Is(err, snapstore.ErrNoSnapshot) {
					continue
				}
				mu.Lock()
				if err != nil && bad == nil {
					bad = err
				}
				if err == nil {
					k := key{th, s.State.Version}
					fp := fingerprint(s.State.Messages)
					if old, ok := seen[k]; ok && old != fp && bad == nil {
						bad = fmt.Errorf("two Loads of %s at version %d differ", th, k.version)
					}
					seen[k] = fp
				}
				mu.Unlock()
			}
		})
	}
	// Publish the threads' events interleaved, in rounds.
	seqs := map[string][]uint64{}
	for i := 0; i < len(evs["a"]); i += 50 {
		for _, th := range threads {
			seqs[th] = append(seqs[th], e.publishAsync(t, evs[th][i:min(i+50, len(evs[th]))])...)
		}
	}
	for _, th := range threads {
		e.waitVersion(t, tenant, th, seqs[th][len(seqs[th])-1])
	}
	close(done)
	wg.Wait()
	require.NoError(t, bad)

	// Fold each thread's events once, checking every version a reader saw.
	checked := 0
	for _, th := range threads {
		mem := fold.NewState(tenant, th)
		for i, ev := range evs[th] {
			b, err := events.Marshal(ev)
			require.NoError(t, err)
			_ = fold.ApplyBytes(mem, seqs[th][i], time.Time{}, b)
			if fp, ok := seen[key{th, seqs[th][i]}]; ok {
				require.Equal(t, fingerprint(mem.Messages), fp, "thread %s at version %d", th, seqs[th][i])
				checked++
			}
		}
	}
	require.Equal(t, len(seen), checked, "every Load was at a version of its thread")
	require.Greater(t, checked, 10)
	plain := e.uncached()
	for _, th := range threads {
		requireSameLoad(t, plain, cached, tenant, th)
	}
	st := cached.ChunkCacheStats()
	t.Logf("%d versions checked; cache %+v", checked, st)
	require.LessOrEqual(t, st.Bytes, int64(bound))
	require.NotZero(t, st.Hits)
	require.NotZero(t, st.Evictions, "the threads outgrew the cache")
}

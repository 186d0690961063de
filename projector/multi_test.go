package projector_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// The projector is cancelled at 50 random points while 10,000 events stream
// in, and restarted each time; in the end every snapshot equals a fresh
// fold of the stream. Small chunks make every step flush, merge and purge
// chunks, so cancellations land in the middle of those too.
func TestCrashAtRandomPointsLosesNothing(t *testing.T) {
	e := newEnv(t)
	cfg := projector.Config{ChunkBytes: 4 << 10, TailBytes: 1 << 10, AckWait: 2 * time.Second, MaxBatch: 50}
	tr := newTraffic(1, "crash", 60)

	rng := rand.New(rand.NewPCG(2, 3))
	var applied atomic.Int64
	cfg.OnApply = func(projector.Applied) { applied.Add(1) }
	for i := 0; i < 50; i++ {
		p, err := projector.New(e.js, cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { res <- p.Run(ctx) }()
		<-p.Ready()
		// 200 events stream in while the projector runs; it is cancelled at
		// a random point of that (this waits on purpose).
		published := make(chan struct{})
		go func() {
			defer close(published)
			for k := 0; k < 5; k++ {
				tr.round(t, e.js, 40)
			}
		}()
		time.Sleep(time.Duration(rng.IntN(80_000)) * time.Microsecond)
		cancel()
		require.NoError(t, <-res)
		<-published
	}
	require.Equal(t, 10_000, tr.events())
	t.Logf("%d events on %d threads; %d folded before the last start", tr.events(), len(tr.threads), applied.Load())
	e.start(t, cfg)
	tr.verify(t, e, e.snaps, e.res.Snapshots, e.res.Index, true)
}

// Two instances share the work on mixed traffic (many threads, tool calls,
// resets, restores, compactions) and produce exactly the snapshots and
// index entries of a single instance running beside them (own buckets, own
// consumer) and of a fresh fold.
func TestTwoInstancesMatchOneInstance(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	single, err := provision.Ensure(ctx, e.js, provision.Config{SnapshotBucket: "single_snapshots", IndexBucket: "single_threads"})
	require.NoError(t, err)

	var steps [2]atomic.Int64
	var conflicts atomic.Int64
	for i := 0; i < 2; i++ {
		e.start(t, projector.Config{Durable: "pair", ChunkBytes: 8 << 10, TailBytes: 2 << 10, Workers: 4, Logger: testLogger(t),
			OnStep: func(s projector.Step) { steps[i].Add(1); conflicts.Add(int64(s.Conflicts)) }})
	}
	e.start(t, projector.Config{Durable: "single", SnapshotBucket: "single_snapshots", IndexBucket: "single_threads",
		ChunkBytes: 8 << 10, TailBytes: 2 << 10})

	tr := newTraffic(3, "pair", 100)
	start := time.Now()
	for tr.events() < 10_000 {
		tr.round(t, e.js, 50)
	}
	t.Logf("published in %s", time.Since(start))
	tr.verify(t, e, e.snaps, e.res.Snapshots, e.res.Index, false)
	t.Logf("verified in %s", time.Since(start))
	tr.verify(t, e, e.store(single.Snapshots, snapstore.Options{}), single.Snapshots, single.Index, true)
	t.Logf("%d events on %d threads in %s; steps per instance %d/%d, %d conflicts",
		tr.events(), len(tr.threads), time.Since(start).Round(time.Millisecond), steps[0].Load(), steps[1].Load(), conflicts.Load())
	require.NotZero(t, steps[0].Load())
	require.NotZero(t, steps[1].Load())
}

// With PinnedTTL, two instances of a partition's projector never project
// at once: the server delivers to the pinned one only, the other takes
// over when the pinned one stops (a crash or shutdown: no pull request
// for PinnedTTL), and every snapshot ends equal to a fresh fold.
func TestPinnedInstancesTakeOver(t *testing.T) {
	e := newEnv(t)
	var steps [2]atomic.Int64
	cfg := func(i int) projector.Config {
		return projector.Config{PinnedTTL: 6 * time.Second, ChunkBytes: 8 << 10, TailBytes: 2 << 10, Logger: testLogger(t),
			OnStep: func(projector.Step) { steps[i].Add(1) }}
	}
	stops := [2]func(){e.start(t, cfg(0)), e.start(t, cfg(1))}
	tr := newTraffic(5, "pinned", 50)
	for tr.events() < 2_000 {
		tr.round(t, e.js, 50)
	}
	tr.verify(t, e, e.snaps, e.res.Snapshots, e.res.Index, false)
	first, second := steps[0].Load(), steps[1].Load()
	t.Logf("before the stop: steps per instance %d/%d", first, second)
	require.True(t, (first == 0) != (second == 0), "exactly one instance projects: steps %d/%d", first, second)
	pinned, other := 0, 1
	if first == 0 {
		pinned, other = 1, 0
	}
	before := steps[pinned].Load()
	stops[pinned]()
	start := time.Now()
	for tr.events() < 4_000 {
		tr.round(t, e.js, 50)
	}
	tr.verify(t, e, e.snaps, e.res.Snapshots, e.res.Index, true)
	t.Logf("after stopping the pinned instance: steps %d/%d; caught up %s after the stop", steps[0].Load(), steps[1].Load(), time.Since(start).Round(time.Millisecond))
	require.Equal(t, before, steps[pinned].Load(), "the stopped instance projected nothing more")
	require.Positive(t, steps[other].Load(), "the other instance took over")
}

package main

import (
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain lets the memory section re-execute the test binary as a child
// (server, projector or worker), as it re-executes the bench binary.
func TestMain(m *testing.M) {
	if isChild() {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// TestRunTiny runs every section at a tiny size against embedded NATS only
// (no PostgreSQL or Redis) and checks what each one measured: that the
// reads returned whole threads, that every figure has samples, and that
// the report and the chart are written. Durations are reported, never
// asserted.
func TestRunTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := tinyParams()
	res, err := Run(ctx, RunConfig{Params: p, Dir: t.TempDir(), Log: t.Logf, Sections: allSections})
	require.NoError(t, err)

	t.Run("appends were measured for convlog and raw JetStream only", func(t *testing.T) {
		a := res.Append
		require.NotNil(t, a)
		assert.Equal(t, []string{sysConvlog, sysRaw, sysRawEnc}, a.Systems)
		for _, s := range a.Systems {
			assert.Equal(t, p.Append.Rounds*p.Append.SeqOps, a.Seq[s].N, s)
			assert.Positive(t, a.Conc[s].N, s)
			assert.Positive(t, a.ConcRate[s], s)
			assert.Zero(t, a.Errors[s], s)
		}
		for _, s := range a.Systems[1:] {
			assert.Len(t, a.SeqRatio[s].Rounds, p.Append.Rounds, s)
			assert.Len(t, a.ConcRatio[s].Rounds, p.Append.Rounds, s)
			assert.Len(t, a.CPURatio[s].Rounds, p.Append.Rounds, s)
		}
		for _, s := range a.Systems {
			assert.Positive(t, a.CPU[s], "CPU per concurrent append of %s", s)
		}
	})

	t.Run("every Get returned the whole thread", func(t *testing.T) {
		g := res.Get
		require.NotNil(t, g)
		require.Len(t, g.Rows, len(p.Get.Sizes))
		for i, r := range g.Rows {
			assert.Equal(t, p.Get.Sizes[i], r.N)
			for _, s := range []string{sysConvlog, sysConvlogWarm, sysConvlogView, sysConvlogViewLocal, sysConvlogViewTracked, sysConvlogCons} {
				assert.Equal(t, r.N, r.Got[s], "%s of %d messages", s, r.N)
				assert.Equal(t, 2, r.D[s].N, "%s of %d messages", s, r.N)
			}
			assert.Equal(t, r.N+1, r.Got[sysRawKV], "raw KV of %d messages: every event", r.N)
			assert.Positive(t, r.SnapshotBytes)
			assert.Equal(t, p.Get.NextEvent, r.Next.N, "next-event projections at %d messages", r.N)
		}
		assert.Positive(t, g.Rows[1].Chunks, "1,200 messages of 512 bytes do not fit in a head")
		assert.Len(t, g.Rows[0].Ratios[ratioKey(sysConvlog, sysRawKV)].Rounds, p.Get.Rounds, "a ratio per round")
	})

	t.Run("lag was measured for the window's events", func(t *testing.T) {
		require.NotNil(t, res.Lag)
		// Each rate once with conditional publishes, once with plain ones;
		// then the split rates again with the server in its own process.
		require.Len(t, res.Lag.Rows, 4)
		assert.True(t, res.Lag.Rows[0].OCC)
		assert.False(t, res.Lag.Rows[1].OCC)
		assert.False(t, res.Lag.Rows[0].Split || res.Lag.Rows[1].Split)
		assert.True(t, res.Lag.Rows[2].Split && res.Lag.Rows[3].Split, "the last two rows ran against a server process")
		assert.True(t, res.Lag.Rows[2].OCC)
		for _, r := range res.Lag.Rows {
			assert.Positive(t, r.Published)
			assert.Equal(t, r.Published, r.Measured, "every published event of the window was projected and seen")
			assert.Equal(t, r.Published, r.Consumer.N, "the plain consumer received every event of the window")
			assert.Positive(t, r.Allocs)
			assert.Zero(t, r.Errors)
			// Every event was a step: at least one head and one index
			// entry written per event, each larger than nothing.
			assert.Positive(t, r.EventBytes)
			assert.GreaterOrEqual(t, r.KV.Heads, uint64(r.Published))
			assert.Positive(t, r.KV.IndexBytes)
			assert.Equal(t, r.KV.HeadBytes+r.KV.DeltaBytes+r.KV.ChunkBytes+r.KV.IndexBytes, r.KV.Bytes())
			assert.Greater(t, r.Amplification(), 1.0, "a head carries at least the event it folds")
		}
	})

	t.Run("replay folded the longest thread every way", func(t *testing.T) {
		require.NotNil(t, res.Replay)
		assert.Equal(t, p.Get.Sizes[len(p.Get.Sizes)-1]+1, res.Replay.Events)
		// convlog's replay, the fold alone (without and with copying the
		// strings), the raw read, the decode alone, the consumer read and
		// the audit verification (no PostgreSQL or Redis in this run).
		assert.Len(t, res.Replay.Order, 7)
		assert.Contains(t, res.Replay.Order, replayFoldCopy)
		assert.Contains(t, res.Replay.Order, replayVerify)
		for _, w := range res.Replay.Order {
			assert.Positive(t, res.Replay.Rates[w], w)
		}
		assert.Len(t, res.Replay.ConsumerRatio.Rounds, p.ReplayReps, "a replay / consumer ratio per run")
		sc := res.Replay.Sealing
		assert.True(t, sc.Seal > 0 && sc.Open > 0 && sc.Decode > 0, "sealing, opening and decoding timed: %+v", sc)
	})

	t.Run("turns were seen over SSE and Watch", func(t *testing.T) {
		require.NotNil(t, res.Turn)
		for _, k := range res.Turn.Kinds {
			assert.Equal(t, p.Turn.Samples, res.Turn.SSE[k].N, k)
			assert.Equal(t, p.Turn.Samples, res.Turn.Watch[k].N, k)
			assert.Equal(t, p.Turn.Samples, res.Turn.Worker[k].N, k)
		}
	})

	t.Run("memory was read from each child process", func(t *testing.T) {
		m := res.Memory
		require.NotNil(t, m)
		assert.Equal(t, int64(p.Mem.WorkerTurns), m.Turns)
		assert.Equal(t, p.Mem.Threads*(p.Mem.Messages+1), m.Events)
		for _, c := range []ChildMem{m.ServerIdle, m.ServerAfter, m.ProjectorIdle, m.ProjectorAfter, m.WorkerIdle, m.WorkerAfter} {
			assert.Positive(t, c.HeapAlloc, c.Role)
			assert.Positive(t, c.RSS, c.Role)
		}
		assert.Equal(t, roleServer, m.ServerAfter.Role)
		assert.Equal(t, roleWorker, m.WorkerAfter.Role)
		assert.Equal(t, roleReader, m.ReaderAfter.Role)
		assert.Equal(t, int64(p.Mem.Reads), m.ReaderAfter.Turns, "threads the client read")
		assert.Positive(t, m.ReaderAfter.HeapAlloc)
	})

	t.Run("the scale section loaded its threads and read them from a client process", func(t *testing.T) {
		m := res.Scale
		require.NotNil(t, m)
		assert.Equal(t, p.Scale.Threads*(p.Scale.Messages+1), m.Events)
		assert.Equal(t, int64(p.Scale.Reads), m.ReaderAfter.Turns)
		assert.Positive(t, m.ServerLoaded.HeapAlloc)
	})

	t.Run("the soak sampled every process while publishing at its rate", func(t *testing.T) {
		s := res.Soak
		require.NotNil(t, s)
		// one sample before, one per Every, one at the end
		require.GreaterOrEqual(t, len(s.Samples), int(p.Soak.For/p.Soak.Every)+1)
		end := s.Samples[len(s.Samples)-1]
		assert.Equal(t, int64(p.Soak.Rate)*int64(p.Soak.For/time.Second), end.Published, "events published at the rate")
		assert.Positive(t, end.Read, "threads the client read")
		for _, c := range []ChildMem{end.Server, end.Projector, end.Reader} {
			assert.Positive(t, c.HeapAlloc, c.Role)
			assert.Positive(t, c.RSS, c.Role)
		}
		assert.Positive(t, s.Base)
		assert.Zero(t, s.Errors)
	})

	t.Run("the report and the chart are written", func(t *testing.T) {
		dir := t.TempDir()
		res.chartPath = filepath.Join(dir, "get.png")
		require.NoError(t, writeChart(res.chartPath, res))
		f, err := os.Open(res.chartPath)
		require.NoError(t, err)
		defer f.Close()
		img, err := png.Decode(f)
		require.NoError(t, err)
		assert.Greater(t, img.Bounds().Dx(), 500)

		md := Markdown(res, filepath.Join(dir, "BENCHMARKS.md"), "")
		for _, want := range []string{"## Machine", "## Targets", "## Targets as ratios to a limit measured in the same run", "## 1. Append", "## 2. Get", "## 3. Projection lag",
			"## 4. Replay", "## 5. Agent turn", "## 6. Memory", "6a. Memory at a million threads", "6b. Soak", "client (10 Gets)", "](get.png)", "PostgreSQL not run",
			"From 1,000 messages on, every Get of every system starts after a forced garbage collection"} {
			assert.Contains(t, md, want)
		}
		assert.NotContains(t, md, "%!", "a format verb without its argument")
		assert.False(t, strings.Contains(md, "NaN"), "no NaN in the report")
	})
}

// TestClusterSectionTiny runs the cluster section at a tiny size on three
// real nats-server processes (built from the version go.mod requires):
// appends measured for convlog and raw JetStream, one kill of the stream
// leader under load with every acknowledged append found in the log, and
// the report's section and capacity model written. Durations are
// reported, never asserted.
func TestClusterSectionTiny(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "nats-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	build.Dir = ".."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := tinyParams()
	res, err := Run(ctx, RunConfig{Params: p, Dir: t.TempDir(), Log: t.Logf, Sections: []string{"cluster"}, NATSServer: bin})
	require.NoError(t, err)
	c := res.Cluster
	require.NotNil(t, c)
	for _, s := range []string{sysConvlog, sysRaw, sysRawEnc} {
		assert.Equal(t, p.Cluster.Append.Rounds*p.Cluster.Append.SeqOps, c.Append.Seq[s].N, s)
		assert.Positive(t, c.Append.ConcRate[s], s)
	}
	require.Len(t, c.Pauses, 1)
	assert.Positive(t, c.Acked)
	assert.Zero(t, c.Lost, "acknowledged appends missing after the leader was killed")
	// The partitioned run: K streams whose leaders are on K different
	// nodes at start, the same appends, a kill of partition 0's leader.
	pr := c.Partitioned
	require.NotNil(t, pr)
	require.Len(t, pr.Leaders, p.Cluster.Partitions)
	seen := map[string]bool{}
	for _, l := range pr.Leaders {
		assert.False(t, seen[l], "two partitions led by %s: %v", l, pr.Leaders)
		seen[l] = true
	}
	assert.Positive(t, pr.Append.ConcRate[sysConvlog])
	require.Len(t, pr.Pauses, 1)
	assert.Positive(t, pr.Acked)
	assert.Zero(t, pr.Lost, "acknowledged appends missing after a partition leader was killed")
	md := Markdown(res, "", "")
	assert.Contains(t, md, "### K=3 partitions")
	assert.Contains(t, md, "## 7. A 3-node cluster (replicas 3)")
	assert.Contains(t, md, "### Capacity model")
}

// whileRecovering tries again what timed out (a request a recovering
// cluster left unanswered), and nothing else: another error, success and
// the end of ctx stop it.
func TestWhileRecoveringRetriesOnlyTimeouts(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := whileRecovering(ctx, time.Second, func(actx context.Context) error {
		calls++
		_, ok := actx.Deadline()
		require.True(t, ok, "each attempt has a deadline of its own")
		if calls < 3 {
			return fmt.Errorf("provision: KV bucket x: %w", context.DeadlineExceeded)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, calls, "two timeouts, then success")

	// A request nobody answers: the attempt's own deadline ends it, and
	// the next attempt is made.
	calls = 0
	err = whileRecovering(ctx, 50*time.Millisecond, func(actx context.Context) error {
		calls++
		if calls == 1 {
			<-actx.Done()
			return fmt.Errorf("directget: x from seq 1: %w", actx.Err())
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 2, calls, "an unanswered attempt, then one that is answered")

	calls = 0
	other := errors.New("stream name already in use with a different configuration")
	err = whileRecovering(ctx, time.Second, func(context.Context) error { calls++; return other })
	require.ErrorIs(t, err, other)
	assert.Equal(t, 1, calls, "an error other than a timeout is not tried again")

	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	err = whileRecovering(cctx, time.Second, func(context.Context) error { calls++; cancel(); return context.DeadlineExceeded })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, calls, "the end of ctx stops it")
}

func TestSpreadOf(t *testing.T) {
	t.Run("the median of the rounds with a ratio, with the lowest and highest", func(t *testing.T) {
		s := spreadOf([]float64{2, 0, 1, 4})
		assert.Equal(t, Spread{Rounds: []float64{2, 1, 4}, Median: 2, Min: 1, Max: 4, Geomean: s.Geomean}, s)
		assert.InDelta(t, 2, s.Geomean, 1e-9, "the geometric mean of 2, 1 and 4")
		assert.Equal(t, "2.00x (1.00-4.00x over 3 rounds)", fmtSpread(s))
	})
	t.Run("no round with a ratio is not measured", func(t *testing.T) {
		assert.False(t, spreadOf([]float64{0}).Measured())
		assert.Equal(t, "–", fmtSpread(Spread{}))
	})
	t.Run("p50s are compared round by round", func(t *testing.T) {
		ms := time.Millisecond
		s := p50Ratios([][]time.Duration{{2 * ms, 2 * ms, 9 * ms}, {3 * ms}}, [][]time.Duration{{ms, ms, ms}, {ms}})
		assert.Equal(t, []float64{2, 3}, s.Rounds)
	})
}

func TestLagRoundsByRate(t *testing.T) {
	p := LagParams{For: 4 * time.Second, Rounds: 4, RoundsAt: map[int]int{5_000: 16}}
	require.Equal(t, 16, p.rounds(5_000), "a rate RoundsAt names runs its rounds")
	require.Equal(t, 4, p.rounds(1_000), "the others run Rounds")
	require.Equal(t, 500*time.Millisecond, p.window(), "every round's windows are Rounds' windows")
	require.Equal(t, 1, LagParams{}.rounds(1_000), "at least one round")
}

package projector_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/benchtest"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// Run with: go test ./projector/ -run '^$' -bench . -benchtime 1s
//
// BenchmarkSnapshots builds threads of 100, 1,000, 10,000 and 100,000
// messages (512-byte contents, user and assistant alternating; published
// asynchronously, then projected by the runner), and measures:
//
//	Load/N        Snapshots.Load of the whole thread by a long-lived reader
//	              with the chunk cache off (it read the thread before, so
//	              it fetches the chunks along with the head; every byte is
//	              read from KV each time); x-raw-kv-get is its median time
//	              over that of one raw KV get of a value of the same size
//	              (the two interleaved), for N <= 1,000: a KV value is
//	              capped at 1 MiB, so larger threads have no single-value
//	              equivalent.
//	LoadCold/N    the same with a new reader each time, chunk cache off:
//	              head get, then the chunk gets. The honest "read every
//	              byte" figure: the target "Get of 1,000 messages within
//	              1.5x of one raw KV get of the same bytes" is about it.
//	LoadCached/N  a long-lived reader with the default chunk cache (64 MiB),
//	              warm: one head get plus copying the cached messages into
//	              a new slice; x-raw-kv-get as for Load, hit-ratio the
//	              share of chunk lookups the cache answered, kv-bytes/op
//	              what a warm Load reads from KV (the head).
//	LoadViewCached/N  the same reader's LoadView, warm: one head get (an
//	              unchanged head is not decoded again) and no copy of the
//	              messages (client.GetView); x-raw-kv-get as for Load.
//	RawKVGet/N    that raw KV get alone (N <= 1,000).
//	NextEvent/N   appending one more message and waiting until its snapshot
//	              is written (publish + projection; the thread grows by one
//	              message per iteration); step-us is the projector's own step
//	              time (read event, fold, write head and index).
//
// BenchmarkLag publishes at a steady rate over 200 threads and reports the
// projection lag (stream timestamp to snapshot written) p50 and p99.

// applyWatch records the highest sequence applied per thread, from OnApply.
type applyWatch struct {
	mu     sync.Mutex
	seqs   map[string]uint64
	signal chan struct{}
	steps  map[string][]time.Duration
}

func newApplyWatch() *applyWatch {
	return &applyWatch{seqs: map[string]uint64{}, signal: make(chan struct{}, 1), steps: map[string][]time.Duration{}}
}

func (w *applyWatch) onApply(a projector.Applied) {
	w.mu.Lock()
	if a.Seq > w.seqs[a.Thread] {
		w.seqs[a.Thread] = a.Seq
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *applyWatch) onStep(s projector.Step) {
	w.mu.Lock()
	w.steps[s.Thread] = append(w.steps[s.Thread], s.Took)
	w.mu.Unlock()
}

func (w *applyWatch) wait(tb testing.TB, thread string, seq uint64) {
	deadline := time.After(60 * time.Second)
	for {
		w.mu.Lock()
		got := w.seqs[thread]
		w.mu.Unlock()
		if got >= seq {
			return
		}
		select {
		case <-w.signal:
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("thread %s: seq %d not applied in 60s (at %d)", thread, seq, got)
		}
	}
}

func BenchmarkSnapshots(b *testing.B) {
	e := newEnv(b)
	watch := newApplyWatch()
	e.start(b, projector.Config{OnApply: watch.onApply, OnStep: watch.onStep})
	ctx := context.Background()
	sizes := []int{100, 1_000, 10_000, 100_000}
	c := &clock{t: time.Unix(1700000000, 0)}
	built := time.Now()
	for _, n := range sizes {
		thread := fmt.Sprintf("t%d", n)
		evs := []events.Event{c.ev("bench", thread, events.ThreadCreated{})}
		for i := 0; i < n; i++ {
			if i%2 == 0 {
				evs = append(evs, c.ev("bench", thread, events.UserMessage{Content: content512(i)}))
			} else {
				evs = append(evs, c.ev("bench", thread, events.AssistantMessage{Content: content512(i)}))
			}
		}
		seqs := e.publishAsync(b, evs)
		watch.wait(b, thread, seqs[len(seqs)-1])
	}
	e.waitConsumerIdle(b, "convlog-projector")
	b.Logf("built threads of %v messages in %s", sizes, time.Since(built).Round(time.Millisecond))

	noCache := snapstore.Options{ChunkCacheBytes: -1}
	plain := e.store(e.res.Snapshots, noCache)              // long-lived, no chunk cache
	cached := e.store(e.res.Snapshots, snapstore.Options{}) // long-lived, default chunk cache
	for _, n := range sizes {
		thread := fmt.Sprintf("t%d", n)
		snap, err := plain.Load(ctx, "bench", thread)
		require.NoError(b, err)
		require.Len(b, snap.State.Messages, n)
		rawKey := fmt.Sprintf("raw.v%d", n)
		if snap.Bytes <= 1<<20-1024 {
			val := make([]byte, snap.Bytes)
			_, _ = rand.Read(val)
			_, err := e.res.Snapshots.Put(ctx, rawKey, val)
			require.NoError(b, err)
		}
		rawGet := func() { _, _ = e.res.Snapshots.Get(ctx, rawKey) }
		b.Run(fmt.Sprintf("Load/%d", n), func(b *testing.B) {
			cpu := benchtest.CPU()
			for b.Loop() {
				if _, err := plain.Load(ctx, "bench", thread); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((benchtest.CPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64(snap.Bytes), "snapshot-bytes")
			b.ReportMetric(float64(len(snap.Chunks)), "chunks")
			if snap.Bytes <= 1<<20-1024 {
				b.ReportMetric(interleavedRatio(b, func() {
					_, _ = plain.Load(ctx, "bench", thread)
				}, rawGet), "x-raw-kv-get")
			}
		})
		b.Run(fmt.Sprintf("LoadCold/%d", n), func(b *testing.B) {
			cpu := benchtest.CPU()
			for b.Loop() {
				if _, err := e.store(e.res.Snapshots, noCache).Load(ctx, "bench", thread); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((benchtest.CPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
			if snap.Bytes <= 1<<20-1024 {
				b.ReportMetric(interleavedRatio(b, func() {
					_, _ = e.store(e.res.Snapshots, noCache).Load(ctx, "bench", thread)
				}, rawGet), "x-raw-kv-get")
			}
		})
		b.Run(fmt.Sprintf("LoadCached/%d", n), func(b *testing.B) {
			_, err := cached.Load(ctx, "bench", thread) // warms the cache
			require.NoError(b, err)
			warm, err := cached.Load(ctx, "bench", thread)
			require.NoError(b, err)
			before := cached.ChunkCacheStats()
			cpu := benchtest.CPU()
			for b.Loop() {
				if _, err := cached.Load(ctx, "bench", thread); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((benchtest.CPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
			after := cached.ChunkCacheStats()
			if looked := (after.Hits - before.Hits) + (after.Misses - before.Misses); looked > 0 {
				b.ReportMetric(float64(after.Hits-before.Hits)/float64(looked), "hit-ratio")
			}
			b.ReportMetric(float64(warm.Bytes), "kv-bytes/op")
			if snap.Bytes <= 1<<20-1024 {
				b.ReportMetric(interleavedRatio(b, func() {
					_, _ = cached.Load(ctx, "bench", thread)
				}, rawGet), "x-raw-kv-get")
			}
		})
		b.Run(fmt.Sprintf("LoadViewCached/%d", n), func(b *testing.B) {
			_, err := cached.LoadView(ctx, "bench", thread) // warms the cache
			require.NoError(b, err)
			cpu := benchtest.CPU()
			for b.Loop() {
				if _, err := cached.LoadView(ctx, "bench", thread); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((benchtest.CPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
			if snap.Bytes <= 1<<20-1024 {
				b.ReportMetric(interleavedRatio(b, func() {
					_, _ = cached.LoadView(ctx, "bench", thread)
				}, rawGet), "x-raw-kv-get")
			}
		})
		if snap.Bytes <= 1<<20-1024 {
			b.Run(fmt.Sprintf("RawKVGet/%d", n), func(b *testing.B) {
				cpu := benchtest.CPU()
				for b.Loop() {
					if _, err := e.res.Snapshots.Get(ctx, rawKey); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((benchtest.CPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
				b.ReportMetric(float64(snap.Bytes), "value-bytes")
			})
		}
	}

	for _, n := range sizes {
		thread := fmt.Sprintf("t%d", n)
		b.Run(fmt.Sprintf("NextEvent/%d", n), func(b *testing.B) {
			watch.mu.Lock()
			skip := len(watch.steps[thread])
			watch.mu.Unlock()
			h, err := e.snaps.LoadHead(ctx, "bench", thread)
			require.NoError(b, err)
			version := h.State.Version
			i := 0
			cpu := benchtest.CPU()
			for b.Loop() {
				version = e.publishAfter(b, c.ev("bench", thread, events.UserMessage{Content: content512(n + i)}), version)
				watch.wait(b, thread, version)
				i++
			}
			b.ReportMetric(float64((benchtest.CPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
			watch.mu.Lock()
			steps := watch.steps[thread][skip:]
			watch.mu.Unlock()
			var sum time.Duration
			for _, d := range steps {
				sum += d
			}
			if len(steps) > 0 {
				b.ReportMetric(float64(sum.Microseconds())/float64(len(steps)), "step-us")
			}
			h, err = e.snaps.LoadHead(ctx, "bench", thread)
			require.NoError(b, err)
			b.ReportMetric(float64(h.Bytes), "head-bytes")
		})
	}
}

// interleavedRatio times a and b alternately 200 times and returns the
// ratio of their median times: alternating keeps both under the same
// machine load, medians keep one GC pause from counting.
func interleavedRatio(tb testing.TB, a, b func()) float64 {
	var ta, tbs []time.Duration
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		a()
		ta = append(ta, time.Since(t0))
		t0 = time.Now()
		b()
		tbs = append(tbs, time.Since(t0))
	}
	slices.Sort(ta)
	slices.Sort(tbs)
	return float64(ta[len(ta)/2]) / float64(tbs[len(tbs)/2])
}

func BenchmarkLag(b *testing.B) {
	for _, tc := range []struct {
		rate int
		occ  bool
	}{{1000, true}, {5000, true}, {1000, false}} {
		name := fmt.Sprintf("%d-per-s", tc.rate)
		if !tc.occ {
			name += "-without-OCC"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b)
			var (
				mu    sync.Mutex
				lags  []time.Duration
				begin atomic.Uint64
			)
			e.start(b, projector.Config{OnApply: func(a projector.Applied) {
				if s := begin.Load(); s != 0 && a.Seq >= s {
					mu.Lock()
					lags = append(lags, a.Lag)
					mu.Unlock()
				}
			}})
			const threads = 200
			c := &clock{t: time.Unix(1700000000, 0)}
			var created []events.Event
			for i := 0; i < threads; i++ {
				created = append(created, c.ev("lag", fmt.Sprintf("t%d", i), events.ThreadCreated{}))
			}
			seqs := e.publishAsync(b, created)
			e.waitVersion(b, "lag", fmt.Sprintf("t%d", threads-1), seqs[len(seqs)-1])
			e.waitConsumerIdle(b, "convlog-projector")
			begin.Store(seqs[len(seqs)-1] + 1)

			// Writers append like client/ does (with the version they expect,
			// known from the previous append's ack) or as raw publishers.
			last := append([]uint64(nil), seqs...)
			prev := make([]jetstream.PubAckFuture, threads)
			interval := time.Second / time.Duration(tc.rate)
			n := 0 // events published
			i := 0
			start := time.Now()
			for b.Loop() {
				if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d) // pacing to a steady rate
				}
				k := i % threads
				data, err := events.Marshal(c.ev("lag", fmt.Sprintf("t%d", k), events.UserMessage{Content: content512(i)}))
				require.NoError(b, err)
				var opts []jetstream.PublishOpt
				if tc.occ {
					if prev[k] != nil {
						select {
						case ack := <-prev[k].Ok():
							last[k] = ack.Sequence
						case err := <-prev[k].Err():
							b.Fatal(err)
						}
						prev[k] = nil // its ack is consumed
					}
					opts = append(opts, jetstream.WithExpectLastSequencePerSubject(last[k]))
				}
				f, err := e.js.PublishMsgAsync(&nats.Msg{Subject: fmt.Sprintf("conv.lag.t%d", k), Data: data}, opts...)
				require.NoError(b, err)
				prev[k] = f
				n++
				i++
			}
			b.StopTimer()
			rate := float64(n) / time.Since(start).Seconds()
			for _, f := range prev {
				if f == nil {
					continue
				}
				select {
				case <-f.Ok():
				case err := <-f.Err():
					b.Fatal(err)
				}
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				mu.Lock()
				got := len(lags)
				mu.Unlock()
				if got >= n {
					break
				}
				require.True(b, time.Now().Before(deadline), "only %d of %d events projected", got, n)
				time.Sleep(5 * time.Millisecond) // polling interval
			}
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
			b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
			b.ReportMetric(rate, "events/s")
		})
	}
}

// BenchmarkStep appends one 512-byte user message at a time over 200
// threads, as client/ writes them (with the version expected), and waits
// until it is projected: one event per step, the steady state of a
// projector that keeps up. Its allocs/op and B/op are the process's
// (publisher, server and projector) per projected event, without the
// variation of BenchmarkLag's, whose events per step follow the lag.
//
//	go test ./projector -run '^$' -bench 'BenchmarkStep$' -benchtime 3000x -benchmem
func BenchmarkStep(b *testing.B) {
	e := newEnv(b)
	watch := newApplyWatch()
	e.start(b, projector.Config{OnApply: watch.onApply})
	const threads = 200
	c := &clock{t: time.Unix(1700000000, 0)}
	var created []events.Event
	for i := 0; i < threads; i++ {
		created = append(created, c.ev("step", fmt.Sprintf("t%d", i), events.ThreadCreated{}))
	}
	last := e.publishAsync(b, created)
	watch.wait(b, fmt.Sprintf("t%d", threads-1), last[threads-1])
	e.waitConsumerIdle(b, "convlog-projector")
	i := 0
	for b.Loop() {
		k := i % threads
		ev := c.ev("step", fmt.Sprintf("t%d", k), events.UserMessage{Content: content512(i)})
		last[k] = e.publishAfter(b, ev, last[k])
		watch.wait(b, ev.Thread, last[k])
		i++
	}
}

// BenchmarkCatchUp publishes 100 user messages of 512 bytes to each of
// 1,000 threads round robin (100,000 events, conditional appends' headers
// left out: plain publishes, as a backlog after an outage holds both)
// with no projector running, then starts one and times it until the
// consumer has every trigger acked: the catch-up rate (bench/'s lag
// section measures it at 300,000 events). Reported:
// events/s, events folded per step (the triggers a thread had queued:
// Config.MaxAckPending and MaxTriggerBytes bound them) and log reads per
// step.
//
//	go test ./projector -run '^$' -bench BenchmarkCatchUp -benchtime 3x
func BenchmarkCatchUp(b *testing.B) {
	const threads, perThread = 1000, 100
	var steps, reads atomic.Int64
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b)
		c := &clock{t: time.Unix(1700000000, 0)}
		evs := make([]events.Event, 0, threads*perThread)
		for i := range threads {
			evs = append(evs, c.ev("catchup", fmt.Sprintf("t%d", i), events.ThreadCreated{}))
		}
		for i := range threads * (perThread - 1) {
			evs = append(evs, c.ev("catchup", fmt.Sprintf("t%d", i%threads), events.UserMessage{Content: content512(i)}))
		}
		seqs := e.publishAsync(b, evs)
		b.StartTimer()
		e.start(b, projector.Config{OnStep: func(s projector.Step) {
			steps.Add(1)
			reads.Add(int64(s.LogReads))
		}})
		e.waitConsumerIdle(b, "convlog-projector")
		b.StopTimer()
		e.waitVersion(b, "catchup", fmt.Sprintf("t%d", threads-1), seqs[len(seqs)-1])
		b.StartTimer()
	}
	b.ReportMetric(float64(threads*perThread*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(threads*perThread*b.N)/float64(steps.Load()), "events/step")
	b.ReportMetric(float64(reads.Load())/float64(steps.Load()), "log-reads/step")
}

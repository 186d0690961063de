package client_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// BenchmarkAppend compares client.Append (validation against the cached
// thread state, OCC, idempotency id) with a raw jetstream.PublishMsg of the
// same bytes and headers (Nats-Msg-Id, Nats-Expected-Last-Subject-Sequence,
// Nats-Expected-Stream, Convlog-Type, Convlog-Schema), in the same run on
// one embedded server (R1, file storage). raw publishes bytes encoded once;
// raw-encoding encodes a new event for every publish, as any writer of the
// event must (neither validates):
//
//   - sequential: one writer, one thread, each append conditional on the
//     version the previous one returned;
//   - concurrent: 32 writers across 1,000 threads (each writer owns ~31
//     threads and cycles through them);
//   - paired: the same, alternating a client append and a raw publish in
//     one loop, so that both see the same machine load (on a shared box
//     the ratios are steadier than across sub-benchmarks);
//   - sealed-vs-clear: a client append (payload sealed with the thread's
//     key, the default) alternated with one of a client with
//     ClearPayloads: what sealing costs.
//
// Metrics: p50-µs and p99-µs per append, appends/s; paired: both p50s,
// p50-ratio (client/raw, target <= 1.25) and throughput-ratio (client/raw,
// target >= 0.8). B/op includes the embedded server's allocations. Run:
//
//	go test ./client/ -run '^$' -bench BenchmarkAppend -benchtime 3s -count 3
func BenchmarkAppend(b *testing.B) {
	s := natstest.Run(b)
	ctx := context.Background()
	c, err := client.New(ctx, s.NC, client.Config{Provision: true, Resources: provision.Config{}})
	require.NoError(b, err)
	js, err := jetstream.New(s.NC)
	require.NoError(b, err)
	// A ~512-byte event, as in the facts file's measurements.
	payload := events.UserMessage{Content: events.Text(strings.Repeat("x", 400))}
	stream := provision.DefaultConfig().Stream

	// raw publishes data (fixed bytes) with the client's headers and a new id.
	raw := func(subject string, data []byte, expect uint64) (uint64, error) {
		m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{
			events.HeaderType:                   {string(events.TypeUserMessage)},
			events.HeaderSchema:                 {strconv.Itoa(events.SchemaVersion)},
			jetstream.MsgIDHeader:               {events.NewID()},
			jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(expect, 10)},
			jetstream.ExpectedStreamHeader:      {stream},
		}}
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	}
	type thread struct {
		name    string
		subject string
		data    []byte
		version uint64
	}
	newThread := func() *thread {
		tenant, name, v, err := c.CreateThread(ctx, client.CreateOptions{})
		require.NoError(b, err)
		subject, err := c.Subjects().Thread(tenant, name)
		require.NoError(b, err)
		data, err := events.Marshal(events.New(tenant, name, "convlog-client", payload))
		require.NoError(b, err)
		return &thread{name: name, subject: subject, data: data, version: v}
	}
	appendClient := func(th *thread) error {
		res, err := c.Append(ctx, events.DefaultTenant, th.name, []events.Event{{Payload: payload}}, client.ExpectVersion(th.version))
		if err != nil {
			return err
		}
		th.version = res.Version
		return nil
	}
	appendRaw := func(th *thread) error {
		v, err := raw(th.subject, th.data, th.version)
		if err != nil {
			return err
		}
		th.version = v
		return nil
	}

	// appendRawEncoding is appendRaw encoding a new event each time, as any
	// writer of the event must (not validated).
	appendRawEncoding := func(th *thread) error {
		data, err := events.Marshal(events.New(events.DefaultTenant, th.name, "convlog-client", payload))
		if err != nil {
			return err
		}
		v, err := raw(th.subject, data, th.version)
		if err != nil {
			return err
		}
		th.version = v
		return nil
	}

	// Threads are created on a sub-benchmark's first run, so that filtered
	// out sub-benchmarks cost nothing.
	sequential := func(do func(*thread) error) func(*testing.B) {
		var th *thread
		return func(b *testing.B) {
			if th == nil {
				th = newThread()
			}
			var lat []time.Duration
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				if err := do(th); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatencies(b, lat, time.Since(start))
		}
	}
	const writers, threads = 32, 1000
	concurrent := func(do func(*thread) error) func(*testing.B) {
		var ths []*thread
		return func(b *testing.B) {
			if ths == nil {
				ths = make([]*thread, threads)
				for i := range ths {
					ths[i] = newThread()
				}
				b.ResetTimer()
			}
			var (
				next int64 = -1
				mu   sync.Mutex
				lat  []time.Duration
			)
			b.SetParallelism((writers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				w := int(atomic.AddInt64(&next, 1))
				var mine []*thread // threads w, w+writers, ...: one writer per thread
				for i := w % writers; i < threads; i += writers {
					mine = append(mine, ths[i])
				}
				local := make([]time.Duration, 0, 1024)
				for i := 0; pb.Next(); i++ {
					t0 := time.Now()
					if err := do(mine[i%len(mine)]); err != nil {
						b.Error(err)
						return
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			})
			reportLatencies(b, lat, time.Since(start))
		}
	}

	b.Run("sequential/client", sequential(appendClient))
	b.Run("sequential/raw", sequential(appendRaw))
	b.Run("sequential/raw-encoding", sequential(appendRawEncoding))
	// The two alternated in one loop: on a shared, noisy machine the ratio
	// of their p50s is steadier than across sub-benchmarks.
	var pc, pr *thread
	b.Run("sequential/paired", func(b *testing.B) {
		if pc == nil {
			pc, pr = newThread(), newThread()
		}
		var lc, lr []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := appendClient(pc); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := appendRaw(pr); err != nil {
				b.Fatal(err)
			}
			lc, lr = append(lc, t1.Sub(t0)), append(lr, time.Since(t1))
		}
		reportPaired(b, lc, lr)
	})
	// What sealing payloads with the thread key costs an append: a sealed
	// client append (the default) alternated with one of a client with
	// ClearPayloads, on threads of their own; p50-ratio is sealed/clear.
	clearClient, err := client.New(ctx, s.NC, client.Config{Resources: provision.Config{}, ClearPayloads: true})
	require.NoError(b, err)
	var ps, pp *thread
	b.Run("sequential/sealed-vs-clear", func(b *testing.B) {
		if ps == nil {
			ps, pp = newThread(), newThread()
		}
		var ls, lp []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := appendClient(ps); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			res, err := clearClient.Append(ctx, events.DefaultTenant, pp.name, []events.Event{{Payload: payload}}, client.ExpectVersion(pp.version))
			if err != nil {
				b.Fatal(err)
			}
			pp.version = res.Version
			ls, lp = append(ls, t1.Sub(t0)), append(lp, time.Since(t1))
		}
		reportPaired(b, ls, lp)
	})
	b.Run(fmt.Sprintf("concurrent-%dx%d/client", writers, threads), concurrent(appendClient))
	b.Run(fmt.Sprintf("concurrent-%dx%d/raw", writers, threads), concurrent(appendRaw))
	b.Run(fmt.Sprintf("concurrent-%dx%d/raw-encoding", writers, threads), concurrent(appendRawEncoding))
	// Each writer alternates a client append on one of its threads and a raw
	// publish on a thread of the raw set: both see the same load.
	var pcs, prs []*thread
	b.Run(fmt.Sprintf("concurrent-%dx%d/paired", writers, threads), func(b *testing.B) {
		if pcs == nil {
			pcs, prs = make([]*thread, threads/2), make([]*thread, threads/2)
			for i := range pcs {
				pcs[i], prs[i] = newThread(), newThread()
			}
			b.ResetTimer()
		}
		var (
			next   int64 = -1
			mu     sync.Mutex
			lc, lr []time.Duration
		)
		b.SetParallelism((writers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			w := int(atomic.AddInt64(&next, 1))
			var mc, mr []*thread
			for i := w % writers; i < len(pcs); i += writers {
				mc, mr = append(mc, pcs[i]), append(mr, prs[i])
			}
			var c, r []time.Duration
			for i := 0; pb.Next(); i++ {
				t0 := time.Now()
				if err := appendClient(mc[i%len(mc)]); err != nil {
					b.Error(err)
					return
				}
				t1 := time.Now()
				if err := appendRaw(mr[i%len(mr)]); err != nil {
					b.Error(err)
					return
				}
				c, r = append(c, t1.Sub(t0)), append(r, time.Since(t1))
			}
			mu.Lock()
			lc, lr = append(lc, c...), append(lr, r...)
			mu.Unlock()
		})
		reportPaired(b, lc, lr)
	})
}

// reportPaired reports the p50 of client and raw latencies measured side by
// side, their ratio, and the throughput ratio: with the writers always busy,
// throughput is writers / mean latency, so it is mean(raw) / mean(client).
func reportPaired(b *testing.B, lc, lr []time.Duration) {
	if len(lc) == 0 || len(lr) == 0 {
		return
	}
	slices.Sort(lc)
	slices.Sort(lr)
	mean := func(l []time.Duration) float64 {
		var sum time.Duration
		for _, d := range l {
			sum += d
		}
		return float64(sum) / float64(len(l))
	}
	c50, r50 := lc[len(lc)/2], lr[len(lr)/2]
	b.ReportMetric(float64(c50.Nanoseconds())/1e3, "client-p50-µs")
	b.ReportMetric(float64(r50.Nanoseconds())/1e3, "raw-p50-µs")
	b.ReportMetric(float64(c50)/float64(r50), "p50-ratio")
	b.ReportMetric(mean(lr)/mean(lc), "throughput-ratio")
}

func reportLatencies(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "appends/s")
}

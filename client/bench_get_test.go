package client_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/benchtest"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// BenchmarkGetCold is a Get of a projected, sealed thread of 1,000
// messages of 512 bytes of text (one turn of 1,000 events, as the bench's
// get section builds it) by a client without a chunk cache, so that every
// chunk is read from KV and opened (the bench's cold Get), beside its
// limit, one raw KV get of a value as large as the snapshot it reads.
// "get" alone is for profiles and allocations (-cpuprofile, -memprofile,
// -benchmem: they count the embedded server's too). "ratio" runs a Get
// and the raw get back to back per round, in alternating order, and
// reports the median over rounds of get/raw-get (the target is at most
// 1.25), each one's median time, and the process CPU (getrusage: client
// and server) each took per call. "fetch", "open" and "decode" are
// "ratio" with the Get replaced by its parts: the KV gets of the head and
// every chunk at once, as Load makes them, with nothing opened
// (fetch/raw-get); each value also opened in place as it arrives
// (open/raw-get); each chunk also decoded into a slice of its own
// (decode/raw-get), which leaves out the head's decoding and the one
// slice of all messages that a Get returns. "split/N" is "ratio" with the
// Get replaced by getting, at once, random values holding the snapshot's
// bytes in N values of equal size (and, for N = 1, a value of 500 bytes
// beside it, as a head): what reading the same bytes as several values
// costs by itself. CONVLOG_BENCH_CHUNK_KIB sets the projector's
// ChunkBytes in KiB (default 768), to compare chunk sizes.
//
//	go test ./client -run '^$' -bench 'BenchmarkGetCold/[^g]' -benchtime 400x -count 3
//	go test ./client -run '^$' -bench 'BenchmarkGetCold/get' -benchtime 1000x -cpuprofile /tmp/get.prof
func BenchmarkGetCold(b *testing.B) {
	s := natstest.Run(b)
	ctx := context.Background()
	res := provision.DefaultConfig()
	c, err := client.New(ctx, s.NC, client.Config{Provision: true})
	require.NoError(b, err)
	pc := projector.Config{}
	if kib, err := strconv.Atoi(os.Getenv("CONVLOG_BENCH_CHUNK_KIB")); err == nil {
		pc.ChunkBytes = kib << 10
	}
	clienttest.RunProjector(b, s.JS, pc)
	tenant, thread, version, err := c.CreateThread(ctx, client.CreateOptions{})
	require.NoError(b, err)
	const n = 1_000
	const words = "the quick brown fox jumps over the lazy dog while an agent answers a user about a tool result "
	text := events.Text(strings.Repeat(words, 512/len(words)+1)[:512])
	evs := make([]events.Event, n)
	for j := range evs {
		if j%2 == 0 {
			evs[j].Payload = events.UserMessage{Content: text}
		} else {
			evs[j].Payload = events.AssistantMessage{Content: text}
		}
	}
	r, err := c.Append(ctx, tenant, thread, evs, client.ExpectVersion(version))
	require.NoError(b, err)
	version = r.Version
	cold, err := client.New(ctx, s.NC, client.Config{ChunkCacheBytes: -1})
	require.NoError(b, err)
	b.Cleanup(cold.Close)
	require.Eventually(b, func() bool {
		th, err := cold.Get(ctx, tenant, thread)
		return err == nil && th.FromSnapshot && th.Version == version
	}, time.Minute, 10*time.Millisecond, "projected up to %d", version)

	kv, err := s.JS.KeyValue(ctx, res.SnapshotBucket)
	require.NoError(b, err)
	snap, err := snapstore.NewWith(kv, snapstore.Options{ChunkCacheBytes: -1, Sealer: c.Keys()}).Load(ctx, tenant, thread)
	require.NoError(b, err)
	raw := make([]byte, snap.Bytes)
	_, _ = rand.Read(raw)
	_, err = kv.Put(ctx, "raw.cold", raw)
	require.NoError(b, err)

	get := func() {
		th, err := cold.Get(ctx, tenant, thread)
		if err != nil {
			b.Fatal(err)
		}
		if !th.FromSnapshot || th.MessageCount() != n {
			b.Fatalf("get: %d messages (from the snapshot: %v), want %d", th.MessageCount(), th.FromSnapshot, n)
		}
	}
	rawGet := func() {
		if _, err := kv.Get(ctx, "raw.cold"); err != nil {
			b.Fatal(err)
		}
	}
	keys := append(snapstore.RefKeys(tenant, thread, snap.Gen, snap.Chunks), snapstore.HeadKey(tenant, thread))
	// fetch gets the head and every chunk at once, as Load does, and with
	// open opens each in place, with parse decodes each chunk too.
	fetch := func(open, parse bool) func() {
		return func() {
			var wg sync.WaitGroup
			for i, k := range keys {
				wg.Go(func() {
					e, err := kv.Get(ctx, k)
					if err != nil {
						b.Error(err)
						return
					}
					if !open {
						return
					}
					plain, err := c.Keys().OpenValueInPlace(ctx, tenant, thread, k, e.Value())
					if err != nil {
						b.Error(err)
						return
					}
					if parse && i < len(snap.Chunks) {
						if err := events.ParseMessagesInto(plain, make([]events.Message, snap.Chunks[i].Count)); err != nil {
							b.Error(err)
						}
					}
				})
			}
			wg.Wait()
		}
	}
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			get()
		}
		b.ReportMetric(float64(snap.Bytes), "snapshot-bytes")
		b.ReportMetric(float64(len(snap.Chunks)), "chunks")
	})
	b.Run("ratio", func(b *testing.B) { alternate(b, "get", get, rawGet) })
	b.Run("fetch", func(b *testing.B) { alternate(b, "fetch", fetch(false, false), rawGet) })
	b.Run("open", func(b *testing.B) { alternate(b, "open", fetch(true, false), rawGet) })
	b.Run("decode", func(b *testing.B) { alternate(b, "decode", fetch(true, true), rawGet) })
	for _, n := range []int{1, 2, 4, 8} {
		keys := splitValues(b, kv, snap.Bytes, n)
		b.Run(fmt.Sprintf("split/%d", n), func(b *testing.B) { alternate(b, "split", getAll(b, kv, keys), rawGet) })
	}
}

// splitValues puts n random values of size/n bytes (and, for n == 1, a
// value of 500 bytes as a head) in kv and returns their keys.
func splitValues(b *testing.B, kv jetstream.KeyValue, size, n int) []string {
	var keys []string
	put := func(key string, size int) {
		v := make([]byte, size)
		_, _ = rand.Read(v)
		_, err := kv.Put(context.Background(), key, v)
		require.NoError(b, err)
		keys = append(keys, key)
	}
	for i := range n {
		put(fmt.Sprintf("split.%d.%d", n, i), size/n)
	}
	if n == 1 {
		put("split.head", 500)
	}
	return keys
}

// getAll returns a function that gets keys from kv at once and waits for
// them.
func getAll(b *testing.B, kv jetstream.KeyValue, keys []string) func() {
	return func() {
		var wg sync.WaitGroup
		for _, k := range keys {
			wg.Go(func() {
				if _, err := kv.Get(context.Background(), k); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
}

// alternate runs f and the raw get back to back once per round, in
// alternating order, and reports the median over rounds of name/raw-get,
// each one's median time, and the process CPU each took per call.
func alternate(b *testing.B, name string, f, rawGet func()) {
	var fs, raws, ratios []float64
	var cpuF, cpuRaw time.Duration
	timed := func(g func(), cpu *time.Duration) float64 {
		c0 := benchtest.CPU()
		t0 := time.Now()
		g()
		d := time.Since(t0)
		*cpu += benchtest.CPU() - c0
		return float64(d)
	}
	round := 0
	for b.Loop() {
		var x, r float64
		if round%2 == 0 {
			x, r = timed(f, &cpuF), timed(rawGet, &cpuRaw)
		} else {
			r, x = timed(rawGet, &cpuRaw), timed(f, &cpuF)
		}
		round++
		fs, raws, ratios = append(fs, x), append(raws, r), append(ratios, x/r)
	}
	b.ReportMetric(benchtest.Median(ratios), name+"/raw-get")
	b.ReportMetric(benchtest.Median(fs), "ns/"+name)
	b.ReportMetric(benchtest.Median(raws), "ns/raw-get")
	b.ReportMetric(float64(cpuF.Microseconds())/float64(b.N), "cpu-us/"+name)
	b.ReportMetric(float64(cpuRaw.Microseconds())/float64(b.N), "cpu-us/raw-get")
}

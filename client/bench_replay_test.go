package client_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/benchtest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// BenchmarkReplay is a replay of one sealed thread of 10,001 events of
// about 500 bytes from its log (client.Get with AtSeq: read, open, fold)
// beside its limit, reading the same events through an ordered consumer
// without decoding them (as the bench's replay section does). "replay"
// alone is for profiles (-cpuprofile, -memprofile); "ratio" runs the two
// back to back per round, in alternating order, each after a collection
// (so neither pays for the other's garbage), and reports the median over
// rounds of replay/consumer (events per second, target >= 0.9) and each
// one's median rate.
//
//	go test ./client -run '^$' -bench 'BenchmarkReplay/ratio' -benchtime 20x -count 3
//	go test ./client -run '^$' -bench 'BenchmarkReplay/replay' -benchtime 30x -cpuprofile /tmp/replay.prof
func BenchmarkReplay(b *testing.B) {
	s := natstest.Run(b)
	ctx := context.Background()
	c, err := client.New(ctx, s.NC, client.Config{Provision: true, Resources: provision.Config{}})
	require.NoError(b, err)
	js, err := jetstream.New(s.NC)
	require.NoError(b, err)
	tenant, thread, version, err := c.CreateThread(ctx, client.CreateOptions{})
	require.NoError(b, err)
	const n, batch = 10_000, 500
	text := events.Text(strings.Repeat("x", 400))
	for i := 0; i < n; i += batch {
		evs := make([]events.Event, batch)
		for j := range evs {
			if j%2 == 0 {
				evs[j].Payload = events.UserMessage{Content: text}
			} else {
				evs[j].Payload = events.AssistantMessage{Content: text}
			}
		}
		res, err := c.Append(ctx, tenant, thread, evs, client.ExpectVersion(version))
		require.NoError(b, err)
		version = res.Version
	}
	subject, err := c.Subjects().Thread(tenant, thread)
	require.NoError(b, err)
	replay := func() {
		th, err := c.Get(ctx, tenant, thread, client.AtSeq(version))
		if err != nil {
			b.Fatal(err)
		}
		if th.MessageCount() != n {
			b.Fatalf("replay: %d messages, want %d", th.MessageCount(), n)
		}
	}
	consumer := func() {
		got, err := natstest.ReadOrdered(ctx, js, provision.DefaultConfig().Stream, subject, version)
		if err != nil {
			b.Fatal(err)
		}
		if got != n+1 {
			b.Fatalf("consumer read: %d events, want %d", got, n+1)
		}
	}
	b.Run("replay", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			replay()
		}
		b.ReportMetric(float64(b.N*(n+1))/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("ratio", func(b *testing.B) {
		var replays, reads, ratios []float64
		timed := func(f func()) float64 {
			runtime.GC()
			t0 := time.Now()
			f()
			return float64(n+1) / time.Since(t0).Seconds()
		}
		round := 0
		for b.Loop() {
			var r, cr float64
			if round%2 == 0 {
				r, cr = timed(replay), timed(consumer)
			} else {
				cr, r = timed(consumer), timed(replay)
			}
			round++
			replays, reads, ratios = append(replays, r), append(reads, cr), append(ratios, r/cr)
		}
		b.ReportMetric(benchtest.Median(ratios), "replay/consumer")
		b.ReportMetric(benchtest.Median(replays), "replay-events/s")
		b.ReportMetric(benchtest.Median(reads), "consumer-events/s")
	})
}

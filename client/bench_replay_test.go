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
// alone is for profiles (-cpuprofile, -memprofile); "ratio" reads with
// each four times per round, one read at a time in the order AB BA AB BA,
// each after a collection (so neither pays for the other's garbage),
// takes each one's fastest read of the round (the one other processes'
// load disturbed least), and reports the median over rounds of
// replay/consumer (events per second, target >= 0.9) and each one's
// median rate.
//
//	go test ./client -run '^$' -bench 'BenchmarkReplay/ratio' -benchtime 5x -count 3
//	go test ./client -run '^$' -bench 'BenchmarkReplay/replay' -benchtime 30x -cpuprofile /tmp/replay.prof
func BenchmarkReplay(b *testing.B) {
	const n = 10_000
	s := natstest.Run(b)
	c, err := client.New(context.Background(), s.NC, client.Config{Provision: true, Resources: provision.Config{}})
	require.NoError(b, err)
	rc := newReplayCase(b, s, c, n)
	replay, consumer := rc.replay(b, c), rc.consumer(b)
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
		for b.Loop() {
			// AB BA AB BA, the fastest read of each: the load of other
			// processes only adds time to a read.
			var r, cr float64
			for i := range 4 {
				if i%2 == 0 {
					r, cr = max(r, timed(replay)), max(cr, timed(consumer))
				} else {
					cr, r = max(cr, timed(consumer)), max(r, timed(replay))
				}
			}
			replays, reads, ratios = append(replays, r), append(reads, cr), append(ratios, r/cr)
		}
		b.ReportMetric(benchtest.Median(ratios), "replay/consumer")
		b.ReportMetric(benchtest.Median(replays), "replay-events/s")
		b.ReportMetric(benchtest.Median(reads), "consumer-events/s")
	})
}

// BenchmarkReplayShort is BenchmarkReplay's ratio for a thread of 300
// events, read as the default configuration reads it (more than
// Config.ConsumerReadThreshold events after the first page: through a
// consumer) and with direct gets only (ConsumerReadThreshold -1), each
// beside the consumer read in the same rounds, alternated and each after
// a collection. Reported: the medians over rounds of replay/consumer for
// each way.
//
//	go test ./client -run '^$' -bench 'BenchmarkReplayShort' -benchtime 100x -count 3
func BenchmarkReplayShort(b *testing.B) {
	const n = 300
	s := natstest.Run(b)
	ctx := context.Background()
	c, err := client.New(ctx, s.NC, client.Config{Provision: true, Resources: provision.Config{}})
	require.NoError(b, err)
	pages, err := client.New(ctx, s.NC, client.Config{Resources: provision.Config{}, ConsumerReadThreshold: -1})
	require.NoError(b, err)
	rc := newReplayCase(b, s, c, n)
	ways := []func(){rc.replay(b, c), rc.replay(b, pages), rc.consumer(b)}
	var byConsumer, byPages []float64
	round := 0
	for b.Loop() {
		var t [3]time.Duration
		for k := range ways {
			i := (k + round) % len(ways)
			runtime.GC()
			t0 := time.Now()
			ways[i]()
			t[i] = time.Since(t0)
		}
		round++
		byConsumer = append(byConsumer, float64(t[2])/float64(t[0]))
		byPages = append(byPages, float64(t[2])/float64(t[1]))
	}
	b.ReportMetric(benchtest.Median(byConsumer), "default/consumer")
	b.ReportMetric(benchtest.Median(byPages), "pages-only/consumer")
}

// replayCase is a sealed thread of n events (and thread.created) for the
// replay benchmarks: user and assistant messages of 400 bytes in turn.
type replayCase struct {
	js             jetstream.JetStream
	tenant, thread string
	subject        string
	version        uint64
	n              int
}

// newReplayCase appends the thread through c, in atomic appends of up
// to 500 events.
func newReplayCase(b *testing.B, s *natstest.Server, c *client.Client, n int) *replayCase {
	ctx := context.Background()
	js, err := jetstream.New(s.NC)
	require.NoError(b, err)
	tenant, thread, version, err := c.CreateThread(ctx, client.CreateOptions{})
	require.NoError(b, err)
	text := events.Text(strings.Repeat("x", 400))
	for i := 0; i < n; i += 500 {
		evs := make([]events.Event, min(500, n-i))
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
	return &replayCase{js: js, tenant: tenant, thread: thread, subject: subject, version: version, n: n}
}

// replay returns a replay of the thread by c (client.Get with AtSeq).
func (rc *replayCase) replay(b *testing.B, c *client.Client) func() {
	return func() {
		th, err := c.Get(context.Background(), rc.tenant, rc.thread, client.AtSeq(rc.version))
		if err != nil {
			b.Fatal(err)
		}
		if th.MessageCount() != rc.n {
			b.Fatalf("replay: %d messages, want %d", th.MessageCount(), rc.n)
		}
	}
}

// consumer returns a read of the thread through an ordered consumer,
// without decoding (the replay's limit).
func (rc *replayCase) consumer(b *testing.B) func() {
	return func() {
		got, err := natstest.ReadOrdered(context.Background(), rc.js, provision.DefaultConfig().Stream, rc.subject, rc.version)
		if err != nil {
			b.Fatal(err)
		}
		if got != rc.n+1 {
			b.Fatalf("consumer read: %d events, want %d", got, rc.n+1)
		}
	}
}

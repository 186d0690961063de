package directget_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/benchtest"
	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/natstest"
)

// benchMessages is the length of the subject the read benchmarks read,
// and benchBody the size of each message: about a convlog event with 512
// bytes of text.
const (
	benchMessages = 10_000
	benchBody     = 700
)

// benchStream starts a server with one stream holding benchMessages
// messages on "s.t" with the three headers convlog writes on every event.
func benchStream(b *testing.B) *natstest.Server {
	b.Helper()
	s := natstest.Run(b)
	ctx := context.Background()
	_, err := s.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: true})
	require.NoError(b, err)
	body := []byte(strings.Repeat("x", benchBody))
	for i := range benchMessages {
		m := &nats.Msg{Subject: "s.t", Data: body, Header: nats.Header{
			"Convlog-Type":   {"message.user"},
			"Convlog-Schema": {"1"},
			"Nats-Msg-Id":    {fmt.Sprintf("0195a3c4-5e2b-7cc1-9a40-%012d", i)},
		}}
		_, err := s.JS.PublishMsgAsync(m)
		require.NoError(b, err)
	}
	select {
	case <-s.JS.PublishAsyncComplete():
	case <-ctx.Done():
	}
	return s
}

// BenchmarkBatch reads a whole subject of benchMessages messages page by
// page, for several page sizes (messages per batch, max bytes per batch);
// the figure to compare is msgs/s.
func BenchmarkBatch(b *testing.B) {
	s := benchStream(b)
	ctx := context.Background()
	for _, tc := range []struct{ batch, maxBytes int }{
		{250, 0}, {500, 0}, {1000, 0}, {1000, 8 << 20}, {2000, 8 << 20}, {5000, 8 << 20}, {10000, 16 << 20},
	} {
		b.Run(fmt.Sprintf("batch=%d/max_bytes=%d", tc.batch, tc.maxBytes), func(b *testing.B) {
			cpu0 := benchtest.CPU()
			for b.Loop() {
				from, n := uint64(1), 0
				for {
					msgs, pending, err := directget.Batch(ctx, s.JS, "S", "s.t", from, tc.batch, tc.maxBytes)
					require.NoError(b, err)
					n += len(msgs)
					if len(msgs) == 0 || pending == 0 {
						break
					}
					from = msgs[len(msgs)-1].Sequence + 1
				}
				require.Equal(b, benchMessages, n)
			}
			reportRead(b, cpu0)
		})
	}
}

// reportRead reports the read rate and the CPU time (server and client:
// the server runs in this process) per message, which the shared
// machine's noise moves less than the rate.
func reportRead(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(benchMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((benchtest.CPU()-cpu0).Nanoseconds())/float64(benchMessages*b.N), "cpu-ns/msg")
}

// BenchmarkOrderedConsumer reads the same messages with an ordered
// consumer (nats.go jetstream, pull batches of 1,000), as a reference for
// what the direct get costs: consumer creation included, per message
// metadata parsed (sequence, time) as a reader needs it.
func BenchmarkOrderedConsumer(b *testing.B) {
	s := benchStream(b)
	ctx := context.Background()
	cpu0 := benchtest.CPU()
	for b.Loop() {
		cons, err := s.JS.OrderedConsumer(ctx, "S", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"s.t"},
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 1})
		require.NoError(b, err)
		it, err := cons.Messages(jetstream.PullMaxMessages(1000))
		require.NoError(b, err)
		for range benchMessages {
			m, err := it.Next()
			require.NoError(b, err)
			_, err = m.Metadata()
			require.NoError(b, err)
		}
		it.Stop()
	}
	reportRead(b, cpu0)
}

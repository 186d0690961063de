package projector

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
)

// A held trigger counts, in the bytes MaxTriggerBytes bounds, the heap it
// keeps: nats.go's message (subject, reply subject, parsed headers, data),
// its parsed metadata and the delivery. Measured by holding 10,000 pulled
// events as dispatch holds them, then letting them go: the bytes counted
// are within 25% of the heap that held them, for events of 20 bytes of
// text to 8,000.
func TestHeldTriggerCountsTheHeapItKeeps(t *testing.T) {
	for _, size := range []int{20, 500, 8000} {
		t.Run(fmt.Sprintf("%d bytes of text", size), func(t *testing.T) { testHeldTriggerCost(t, size) })
	}
}

func testHeldTriggerCost(t *testing.T, size int) {
	const n = 10_000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := natstest.Run(t)
	c, err := client.New(ctx, srv.NC, client.Config{Provision: true})
	require.NoError(t, err)
	_, thread, v, err := c.CreateThread(ctx, client.CreateOptions{})
	require.NoError(t, err)
	text := strings.Repeat("x", size)
	for i := 0; i < n; {
		k := min(client.MaxTurnEvents, n-i)
		evs := make([]events.Event, k)
		for j := range evs {
			evs[j] = events.Event{Payload: events.UserMessage{Content: events.Text(text)}}
		}
		r, err := c.Append(ctx, "default", thread, evs, client.ExpectVersion(v))
		require.NoError(t, err)
		v, i = r.Version, i+k
	}
	rc := c.Config().Resources
	cons, err := srv.JS.CreateConsumer(ctx, rc.Stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 2 * n})
	require.NoError(t, err)
	it, err := cons.Messages(jetstream.PullMaxBytes(16 << 20))
	require.NoError(t, err)
	// One more message stays reachable through both measurements: it
	// keeps the subscription (and its channel) that every message points
	// to, as a running projector's subscription is.
	keep, err := it.Next()
	require.NoError(t, err)
	held := make([]delivery, 0, n)
	counted := 0
	for range n {
		m, err := it.Next()
		require.NoError(t, err)
		md, err := m.Metadata()
		require.NoError(t, err)
		d := newDelivery(m, md)
		held = append(held, d)
		counted += d.size
	}
	it.Stop()
	with := heapAfterGC()
	runtime.KeepAlive(held)
	held = nil
	without := heapAfterGC()
	runtime.KeepAlive(keep)
	kept := float64(with-without) / n
	perTrigger := float64(counted) / n
	t.Logf("a held trigger keeps %.0f bytes of heap and counts %.0f", kept, perTrigger)
	require.InDelta(t, 1, perTrigger/kept, 0.25, "bytes counted per held trigger (%.0f) against the heap one keeps (%.0f)", perTrigger, kept)
}

// heapAfterGC is the live heap after two collections, in bytes.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

package client_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

// A watch whose reader does not read holds a bounded number of bytes, not
// the thread: the ordered consumer fetches at most MaxBytes ahead, so a
// stalled reader of a 32 MiB thread (the chat stream, the CLI's tail, the
// adapters) never holds the whole thread in memory.
func TestAWatchThatIsNotReadHoldsBoundedBytes(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	thread, _ := clienttest.Thread(t, c, clienttest.RepliesOff("acme", ""), 0)
	big := strings.Repeat("x", 512<<10)
	for range 64 {
		_, err := c.Append(ctx, "acme", thread, []events.Event{{Payload: events.UserMessage{Content: events.Text(big)}}}, client.AnyVersion())
		require.NoError(t, err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	w, err := c.Watch(ctx, "acme", thread, client.WatchOptions{Buffer: 1})
	require.NoError(t, err)
	defer w.Stop()
	// Give the consumer time to fetch all it is allowed to.
	time.Sleep(2 * time.Second)
	grown := int64(heap()) - int64(before)
	// MaxBytes (2 MiB) in the pull buffer, one event in C and one in
	// hand (about 2.5 MiB with their decoded copies), and the in-process
	// server's block cache for the reads (up to about 8 MiB here): well
	// below the 32 MiB thread.
	const bound = 20 << 20
	t.Logf("heap grew %.1f MiB with a 32 MiB thread not read (bound %d MiB)", float64(grown)/(1<<20), bound>>20)
	require.Less(t, grown, int64(bound))
	// It still delivers every event, in order, once read.
	n := 0
	for u := range w.C {
		require.NotNil(t, u.Event)
		n++
		if n == 65 {
			break
		}
	}
	require.Equal(t, 65, n)
}

package projector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
)

// StartLocal returns once its projector is ready, and the function it
// returns comes back only after the projector has folded every event the
// stream held, then stops it: each thread's head is at its last event.
func TestStartLocalCatchesUpWithTheStreamThenStops(t *testing.T) {
	e := newEnv(t)
	c := &clock{t: time.Unix(1700000000, 0)}
	last := map[string]uint64{}
	for i := range 5 {
		thread := fmt.Sprintf("t%d", i)
		e.publish(t, c.ev("acme", thread, events.ThreadCreated{Title: "hello"}))
		for range 20 {
			last[thread] = e.publish(t, c.ev("acme", thread, events.UserMessage{Content: events.Text("hi")}))
		}
	}
	ctx := context.Background()
	wait, err := projector.StartLocal(ctx, e.js, projector.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, wait())
	for thread, v := range last {
		h, err := e.snaps.LoadHead(ctx, "acme", thread)
		require.NoError(t, err, thread)
		require.Equal(t, v, h.State.Version, "thread %s is projected up to its last event", thread)
	}

	_, err = projector.StartLocal(ctx, e.js, projector.Config{Stream: "bad stream name"})
	require.Error(t, err, "a configuration New refuses")
}

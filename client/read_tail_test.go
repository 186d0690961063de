package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
)

// A consistent Get is the projector's snapshot plus the log past it. The
// tail is read by probing the subject's last sequence first; whatever the
// tail holds (nothing, the last event only, several events, an atomic
// batch), the answer must equal a fold of the whole log (client.AtSeq
// folds from the first event), at the log's current version.
func TestConsistentGetReadsEveryTailShape(t *testing.T) {
	s, _ := natstest.Provisioned(t, provision.Config{})
	ctx := context.Background()
	c, err := client.New(ctx, s.NC, client.Config{})
	require.NoError(t, err)
	// A second client appends, so the first one's state cache cannot help.
	w, err := client.New(ctx, s.NC, client.Config{})
	require.NoError(t, err)

	thread, v := clienttest.Thread(t, w, clienttest.RepliesOff(events.DefaultTenant, ""), 0)
	tenant := events.DefaultTenant
	appendEvs := func(ps ...events.Payload) {
		evs := make([]events.Event, len(ps))
		for i, p := range ps {
			evs[i] = events.Event{Payload: p}
		}
		res, err := w.Append(ctx, tenant, thread, evs, client.ExpectVersion(v))
		require.NoError(t, err)
		v = res.Version
	}
	// Other threads' events between ours, as on a shared stream.
	noise := func() {
		clienttest.Thread(t, w, client.CreateOptions{}, 0)
	}
	for i := range 20 {
		appendEvs(events.UserMessage{Content: events.Text(fmt.Sprint("q", i))})
		noise()
		appendEvs(events.AssistantMessage{Content: events.Text(fmt.Sprint("a", i))})
	}

	// Project, then stop the projector: the snapshot stays at v.
	p, err := projector.New(s.JS, projector.Config{})
	require.NoError(t, err)
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	require.Eventually(t, func() bool {
		th, err := c.Get(ctx, tenant, thread)
		return err == nil && th.FromSnapshot && th.Version == v
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	check := func(name string) {
		t.Helper()
		got, err := c.Get(ctx, tenant, thread, client.Consistent())
		require.NoError(t, err, name)
		want, err := c.Get(ctx, tenant, thread, client.AtSeq(v))
		require.NoError(t, err, name)
		require.Equal(t, v, got.Version, name)
		require.Equal(t, want.Messages, got.Messages, name)
		require.Equal(t, want.Pending, got.Pending, name)
		require.Equal(t, want.Version, got.Version, name)
	}
	check("no tail")
	appendEvs(events.UserMessage{Content: events.Text("only the last")})
	check("a tail of the last event only")
	noise()
	appendEvs(events.AssistantMessage{Content: events.Text("x")})
	noise()
	appendEvs(events.UserMessage{Content: events.Text("y")})
	check("a tail of several events with others between")
	appendEvs(events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}, {ID: "c2", Name: "f", Arguments: "{}"}}},
		events.ToolResult{ToolCallID: "c1", Content: events.Text("1")},
		events.ToolResult{ToolCallID: "c2", Content: events.Text("2")})
	check("an atomic batch at the end")
	got, err := c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, 40+1+2+3, got.MessageCount())
}

package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

func TestAppendSmoke(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	tenant, thread, v, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
	require.NoError(t, err)
	require.Equal(t, uint64(1), v)
	res, err := c.Append(ctx, tenant, thread, []events.Event{clienttest.User("hi")}, client.ExpectVersion(v))
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Version)
	// stale version
	_, err = c.Append(ctx, tenant, thread, []events.Event{clienttest.User("again")}, client.ExpectVersion(1))
	var ce *client.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(2), ce.Actual)
	// retry of the same event is idempotent
	again, err := c.Append(ctx, tenant, thread, []events.Event{res.Events[0].Event}, client.ExpectVersion(v))
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, uint64(2), again.Version)
	// a turn: assistant with 3 calls + 3 results
	turn := []events.Event{{Payload: events.AssistantMessage{ToolCalls: []events.ToolCall{
		{ID: "a", Name: "clock", Arguments: "{}"}, {ID: "b", Name: "clock", Arguments: "{}"}, {ID: "c", Name: "clock", Arguments: "{}"}}}}}
	for _, id := range []string{"b", "a", "c"} {
		turn = append(turn, events.Event{Payload: events.ToolResult{ToolCallID: id, Content: events.Text("x")}})
	}
	tr, err := c.Append(ctx, tenant, thread, turn, client.ExpectVersion(2))
	require.NoError(t, err)
	require.Equal(t, uint64(6), tr.Version)
	retry := make([]events.Event, len(tr.Events))
	for i, e := range tr.Events {
		retry[i] = e.Event
	}
	dup, err := c.Append(ctx, tenant, thread, retry, client.ExpectVersion(2))
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, uint64(6), dup.Version)

	th, err := c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Len(t, th.Messages, 5)
	require.Zero(t, th.RejectedCount)
	// rejected before publishing
	_, err = c.Append(ctx, tenant, thread, []events.Event{{Payload: events.ToolResult{ToolCallID: "zzz", Content: events.Text("x")}}}, client.AnyVersion())
	require.Error(t, err)
	th2, err := c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, th.Version, th2.Version)
}

func TestConcurrentWritersOneThread(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	tenant, thread, _, err := c.CreateThread(ctx, client.CreateOptions{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				_, err := c.Append(ctx, tenant, thread, []events.Event{clienttest.User("m")}, client.AnyVersion())
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	th, err := c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, 160, len(th.Messages))
	_ = time.Now
}

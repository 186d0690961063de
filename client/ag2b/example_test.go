package ag2b_test

import (
	"context"
	"fmt"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/ag2b"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
)

// Reading, subscribing, resetting and restoring, as in AG2B's docs; the
// messages are appended by another service (an agent worker) through the
// log, and the History sees them.
func Example() {
	nc, stop := natstest.RunExample() // an embedded JetStream, as `agentd serve` runs
	defer stop()
	ctx := context.Background()
	c, err := client.New(ctx, nc, client.Config{Provision: true})
	if err != nil {
		panic(err)
	}
	if _, _, _, err := c.CreateThread(ctx, client.CreateOptions{ThreadID: "chat-1"}); err != nil {
		panic(err)
	}

	history, err := ag2b.New(ctx, c, "", "chat-1")
	if err != nil {
		panic(err)
	}
	defer history.Close()

	// Subscribing
	rendered := make(chan int, 16)
	unsubscribe := history.Subscribe(func() {
		rendered <- len(history.Snapshot()) // render(history.Snapshot())
	})
	defer unsubscribe()

	// A turn appended by the agent worker.
	res, err := c.Append(ctx, events.DefaultTenant, "chat-1", []events.Event{
		{Payload: events.UserMessage{Content: events.Text("What time is it?")}},
		{Payload: events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "call_1", Name: "clock", Arguments: `{}`}}}},
		{Payload: events.ToolResult{ToolCallID: "call_1", Content: events.Text(`"12:00"`)}},
		{Payload: events.AssistantMessage{Content: events.Text("It is noon.")}},
	}, client.AnyVersion())
	if err != nil {
		panic(err)
	}
	if err := history.WaitVersion(ctx, res.Version); err != nil {
		panic(err)
	}

	// Reading
	messages := history.Snapshot()
	fmt.Printf("%d messages so far\n", len(messages))
	for _, m := range messages {
		switch {
		case len(m.ToolCalls) > 0:
			fmt.Printf("  %s calls %s\n", m.Role, m.ToolCalls[0].Name)
		default:
			fmt.Printf("  %s: %s\n", m.Role, m.Content.String())
		}
	}
	waitFor(rendered, 4)

	// Saving and resetting
	saved := history.Snapshot()
	if _, err := history.Reset(ctx); err != nil {
		panic(err)
	}
	fmt.Printf("after reset: %d messages\n", len(history.Snapshot()))
	waitFor(rendered, 0)

	// Restoring
	if _, err := history.Restore(ctx, saved); err != nil {
		panic(err)
	}
	fmt.Printf("after restore: %d messages\n", len(history.Snapshot()))
	waitFor(rendered, 4)
	// Output:
	// 4 messages so far
	//   user: What time is it?
	//   assistant calls clock
	//   tool: "12:00"
	//   assistant: It is noon.
	// after reset: 0 messages
	// after restore: 4 messages
}

// waitFor reads what the listener rendered until it rendered n messages.
func waitFor(rendered <-chan int, n int) {
	for got := range rendered {
		if got == n {
			return
		}
	}
}

package deepagents_test

import (
	"context"
	"fmt"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/deepagents"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
)

// run is a stand-in for agent.run(messages, threadId): it loads the
// thread's memory, prepends it to the input, "runs" the agent (an echo),
// and saves the updated history.
func run(ctx context.Context, memory deepagents.Checkpointer, threadID, input string) []events.Message {
	history, err := memory.Load(ctx, threadID)
	if err != nil {
		panic(err)
	}
	messages := append(history, events.Message{Role: events.RoleUser, Content: events.Text(input)})
	reply := fmt.Sprintf("you said %q; context: %d message(s)", input, len(messages))
	messages = append(messages, events.Message{Role: events.RoleAssistant, Content: events.Text(reply)})
	if err := memory.Save(ctx, threadID, messages); err != nil {
		panic(err)
	}
	return messages
}

// Wiring a durable checkpointer: with a thread id, a follow-up run picks up
// where the previous one left off; without one, the run is stateless.
func ExampleLogCheckpointer() {
	nc, stop := natstest.RunExample() // an embedded JetStream, as `agentd serve` runs
	defer stop()
	ctx := context.Background()
	c, err := client.New(ctx, nc, client.Config{Provision: true})
	if err != nil {
		panic(err)
	}
	memory := deepagents.NewLogCheckpointer(c, deepagents.LogConfig{})

	run(ctx, memory, "user-session-42", "What files are in my project?")
	msgs := run(ctx, memory, "user-session-42", "And which one is the largest?")
	fmt.Println(msgs[len(msgs)-1].Content.String())

	msgs = run(ctx, memory, "", "Hello?") // threadId nil: stateless
	fmt.Println(msgs[len(msgs)-1].Content.String())

	// Summarization middleware replaces the first exchange with a summary.
	stored, err := memory.Load(ctx, "user-session-42")
	if err != nil {
		panic(err)
	}
	summary := events.Message{Role: events.RoleUser, Content: events.Text("Summary: the user asked about their files.")}
	if err := memory.Save(ctx, "user-session-42", append([]events.Message{summary}, stored[2:]...)); err != nil {
		panic(err)
	}

	// The user starts a fresh conversation.
	if err := memory.Clear(ctx, "user-session-42"); err != nil {
		panic(err)
	}

	// The log kept every step.
	for ev, err := range c.Events(ctx, events.DefaultTenant, "user-session-42", 0, 0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(ev.Type)
	}
	// Output:
	// you said "And which one is the largest?"; context: 3 message(s)
	// you said "Hello?"; context: 1 message(s)
	// thread.created
	// message.user
	// message.assistant
	// message.user
	// message.assistant
	// thread.compacted
	// thread.reset
}

// The in-memory checkpointer of tests keeps the same contract.
func ExampleInMemoryCheckpointer() {
	ctx := context.Background()
	memory := deepagents.NewInMemoryCheckpointer()
	image := events.Message{Role: events.RoleUser, Content: events.Parts(
		events.Part{Type: events.PartText, Text: "What is this?"},
		events.Part{Type: events.PartImage, Data: "iVBORw0KGgo=", MediaType: "image/png"},
	)}
	if err := memory.Save(ctx, "t1", []events.Message{image}); err != nil {
		panic(err)
	}
	got, _ := memory.Load(ctx, "t1")
	fmt.Println(got[0].Content.Parts[1].MediaType, got[0].Content.Parts[1].Data)
	miss, _ := memory.Load(ctx, "unknown")
	fmt.Println(len(miss))
	// Output:
	// image/png iVBORw0KGgo=
	// 0
}

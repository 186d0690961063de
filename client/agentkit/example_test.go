package agentkit_test

import (
	"context"
	"fmt"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/agentkit"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
)

// Persisting an agent's conversations: the adapter is created once and
// used around every run. A new conversation gets its thread id from the
// createThread hook; a follow-up passes the thread id, and the history is
// loaded from the log before the run.
func Example() {
	nc, stop := natstest.RunExample() // an embedded JetStream, as `agentd serve` runs
	defer stop()
	ctx := context.Background()
	c, err := client.New(ctx, nc, client.Config{Provision: true})
	if err != nil {
		panic(err)
	}

	history := agentkit.NewHistory(c, agentkit.Config{
		// createThread: the application picks the id of a new conversation.
		CreateThread: func(ctx context.Context, req agentkit.CreateThreadRequest) (string, error) {
			return "support-1001", nil
		},
	})

	// First run: no thread id, so createThread makes one.
	run, err := history.Begin(ctx, agentkit.RunRequest{Input: "What is 12*(3+4)?"})
	if err != nil {
		panic(err)
	}
	fmt.Println("thread:", run.ThreadID, "from", run.Source)
	if _, err := history.AppendUserMessage(ctx, run.ThreadID, agentkit.UserMessage{Content: events.Text("What is 12*(3+4)?")}); err != nil {
		panic(err)
	}
	// The agent's results: a tool call with its result, then the answer.
	_, err = history.AppendResults(ctx, run.ThreadID, []agentkit.InferenceResult{
		{
			Agent: "calculator",
			Output: []events.Message{{Role: events.RoleAssistant,
				ToolCalls: []events.ToolCall{{ID: "call_1", Name: "calculate", Arguments: `{"expression":"12*(3+4)"}`}}}},
			ToolCalls: []events.Message{{Role: events.RoleTool, ToolCallID: "call_1", Content: events.Text("84")}},
		},
		{
			Agent:  "calculator",
			Output: []events.Message{{Role: events.RoleAssistant, Content: events.Text("It is 84.")}},
		},
	})
	if err != nil {
		panic(err)
	}

	// Follow-up run: the thread id is passed, so the history is read.
	run, err = history.Begin(ctx, agentkit.RunRequest{ThreadID: "support-1001"})
	if err != nil {
		panic(err)
	}
	fmt.Println("history from the", run.HistoryFrom)
	for _, r := range run.Results {
		fmt.Printf("%s answered %q: output %q, %d tool result(s)\n",
			r.Agent, r.Input, r.Output[0].Content.String(), len(r.ToolCalls))
	}
	// Output:
	// thread: support-1001 from create_thread
	// history from the log
	// calculator answered "What is 12*(3+4)?": output "", 1 tool result(s)
	// calculator answered "What is 12*(3+4)?": output "It is 84.", 0 tool result(s)
}

// Client-provided history: the UI already holds the conversation and sends
// it with the thread id, so the run starts without reading the log.
func ExampleHistory_Begin_clientProvidedHistory() {
	nc, stop := natstest.RunExample()
	defer stop()
	ctx := context.Background()
	c, err := client.New(ctx, nc, client.Config{Provision: true})
	if err != nil {
		panic(err)
	}
	history := agentkit.NewHistory(c, agentkit.Config{})

	fromUI := []agentkit.InferenceResult{{Agent: "helper", Input: "hi",
		Output: []events.Message{{Role: events.RoleAssistant, Content: events.Text("Hello!")}}}}
	run, err := history.Begin(ctx, agentkit.RunRequest{ThreadID: "chat-7", Results: fromUI})
	if err != nil {
		panic(err)
	}
	fmt.Println(run.HistoryFrom, len(run.Results))
	// Output:
	// client 1
}

// The seed's key-value store, kept on the thread: it outlives the run and
// every service on the thread sees it.
func ExampleState() {
	nc, stop := natstest.RunExample()
	defer stop()
	ctx := context.Background()
	c, err := client.New(ctx, nc, client.Config{Provision: true})
	if err != nil {
		panic(err)
	}
	history := agentkit.NewHistory(c, agentkit.Config{})
	ref, err := history.CreateThread(ctx, agentkit.CreateThreadRequest{ThreadID: "coding-session"})
	if err != nil {
		panic(err)
	}
	kv := history.State(ref.ThreadID)

	// Set a value
	if _, err := kv.Set(ctx, "user-name", "Alice"); err != nil {
		panic(err)
	}
	// Get a value
	name, _, _ := agentkit.GetAs[string](ctx, kv, "user-name")
	fmt.Println("user-name:", name)

	// A tool keeps the files it writes.
	files, _, _ := agentkit.GetAs[map[string]string](ctx, kv, "files")
	if files == nil {
		files = map[string]string{}
	}
	files["main.go"] = "package main"
	if _, err := kv.Set(ctx, "files", files); err != nil {
		panic(err)
	}

	// Delete a value
	if _, err := kv.Delete(ctx, "user-name"); err != nil {
		panic(err)
	}
	// Check if a value exists
	exists, _ := kv.Has(ctx, "user-name")
	fmt.Println("user-name exists:", exists)
	all, _ := kv.All(ctx)
	fmt.Println("files:", string(all["files"]))
	// Output:
	// user-name: Alice
	// user-name exists: false
	// files: {"main.go":"package main"}
}

// Package checkpointertest is the conformance suite of
// deepagents.Checkpointer: one test function that every implementation
// runs, so that an agent gets the same behaviour from the in-memory
// checkpointer of its tests and the durable one of production.
package checkpointertest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/deepagents"
	"github.com/convlog/convlog/events"
)

// Run checks the contract of deepagents.Checkpointer (and of
// deepagents.VersionedCheckpointer when the implementation has it) on
// checkpointers made by newCheckpointer. Each subtest calls
// newCheckpointer once and uses thread ids of its own, so an
// implementation may return the same backing store every time.
func Run(t *testing.T, newCheckpointer func(t *testing.T) deepagents.Checkpointer) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newCheckpointer(t), threadID(t))
		})
	}
	for _, tc := range versionedCases {
		t.Run(tc.name, func(t *testing.T) {
			cp, ok := newCheckpointer(t).(deepagents.VersionedCheckpointer)
			if !ok {
				t.Logf("%T is not a VersionedCheckpointer: nothing to check", cp)
				return
			}
			tc.run(t, cp, threadID(t))
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, cp deepagents.Checkpointer, thread string)
}

type versionedCase struct {
	name string
	run  func(t *testing.T, cp deepagents.VersionedCheckpointer, thread string)
}

var nextThread struct {
	sync.Mutex
	n int
}

// threadID returns a thread id no other subtest uses.
func threadID(t *testing.T) string {
	nextThread.Lock()
	defer nextThread.Unlock()
	nextThread.n++
	return fmt.Sprintf("cp-%d-%s", nextThread.n, events.NewID())
}

// Message builders of the suite.

// User returns a user message with text content.
func User(s string) events.Message {
	return events.Message{Role: events.RoleUser, Content: events.Text(s)}
}

// Assistant returns an assistant message with text content and calls.
func Assistant(s string, calls ...events.ToolCall) events.Message {
	m := events.Message{Role: events.RoleAssistant, ToolCalls: calls}
	if s != "" {
		m.Content = events.Text(s)
	}
	return m
}

// Call returns a tool call.
func Call(id, name, args string) events.ToolCall {
	return events.ToolCall{ID: id, Name: name, Arguments: args}
}

// Tool returns a tool result.
func Tool(id, s string) events.Message {
	return events.Message{Role: events.RoleTool, ToolCallID: id, Content: events.Text(s)}
}

// Conversation returns n user/assistant exchanges, the odd ones with a
// tool round trip, named with prefix.
func Conversation(prefix string, n int) []events.Message {
	var ms []events.Message
	for i := range n {
		ms = append(ms, User(fmt.Sprintf("%s question %d", prefix, i)))
		if i%2 == 1 {
			id := fmt.Sprintf("%s-call-%d", prefix, i)
			ms = append(ms, Assistant("", Call(id, "search", `{"q":"x"}`)), Tool(id, "found"))
		}
		ms = append(ms, Assistant(fmt.Sprintf("%s answer %d", prefix, i)))
	}
	return ms
}

// Rich returns a history with every kind of content DeepAgents persists:
// multimodal user content (text, images by URL and base64, a file),
// reasoning, parallel tool calls, an error result, usage, names, metadata
// and a system message.
func Rich() []events.Message {
	return []events.Message{
		{Role: events.RoleSystem, Content: events.Text("Be terse."), Name: "policy"},
		{Role: events.RoleUser, Name: "alice", Metadata: json.RawMessage(`{"client":"ios"}`), Content: events.Parts(
			events.Part{Type: events.PartText, Text: "What is in these images? <b>&</b>"},
			events.Part{Type: events.PartImage, URL: "https://example.com/cat.png", Detail: "high"},
			events.Part{Type: events.PartImage, Data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", MediaType: "image/png"},
			events.Part{Type: events.PartImage, URL: "data:image/gif;base64,R0lGODlhAQABAAAAACw=", Detail: "low"},
			events.Part{Type: events.PartFile, Data: "JVBERi0xLjQK", MediaType: "application/pdf", Filename: "spec.pdf"},
			events.Part{Type: events.PartFile, FileID: "file-abc123"},
		)},
		{Role: events.RoleAssistant, Reasoning: "Two images; look them up.", Agent: "vision", Model: "gpt-x",
			Usage:     &events.Usage{InputTokens: 1200, OutputTokens: 30, TotalTokens: 1230},
			Metadata:  json.RawMessage(`{"provider":{"id":"resp_1"}}`),
			ToolCalls: []events.ToolCall{Call("c1", "describe", `{"image": 1}`), Call("c2", "describe", `{"image":2}`)}},
		{Role: events.RoleTool, ToolCallID: "c2", Name: "describe", Content: events.Text("a dog")},
		{Role: events.RoleTool, ToolCallID: "c1", Name: "describe", Content: events.Text(`{"error":"timeout"}`), IsError: true},
		{Role: events.RoleAssistant, Content: events.Parts(events.Part{Type: events.PartText, Text: "A dog; the cat timed out."}), Name: "bot"},
		{Role: events.RoleUser, Content: events.Text("")},
		{Role: events.RoleAssistant, Content: events.Text("")},
	}
}

func load(t *testing.T, cp deepagents.Checkpointer, thread string) []events.Message {
	t.Helper()
	ms, err := cp.Load(context.Background(), thread)
	require.NoError(t, err)
	require.NotNil(t, ms, "Load of a thread id returns a non-nil slice")
	return ms
}

func save(t *testing.T, cp deepagents.Checkpointer, thread string, ms []events.Message) {
	t.Helper()
	require.NoError(t, cp.Save(context.Background(), thread, ms))
}

func concat(parts ...[]events.Message) []events.Message {
	var out []events.Message
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var cases = []testCase{
	{"load of an unknown thread is an empty history, not an error", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		require.Empty(t, load(t, cp, thread))
	}},
	{"an empty thread id is stateless: save stores nothing and load returns nil", func(t *testing.T, cp deepagents.Checkpointer, _ string) {
		ctx := context.Background()
		require.NoError(t, cp.Save(ctx, "", Conversation("s", 1)))
		ms, err := cp.Load(ctx, "")
		require.NoError(t, err)
		require.Nil(t, ms)
		require.NoError(t, cp.Clear(ctx, ""))
	}},
	{"a saved history loads back exactly", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		h := Conversation("a", 3)
		save(t, cp, thread, h)
		require.Equal(t, h, load(t, cp, thread))
	}},
	{"multimodal content, reasoning, parallel calls and metadata round-trip exactly", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		save(t, cp, thread, Rich())
		require.Equal(t, Rich(), load(t, cp, thread))
		// And as new messages appended to a stored history.
		other := thread + "-appended"
		save(t, cp, other, Conversation("p", 1))
		h := concat(Conversation("p", 1), Rich()[1:])
		save(t, cp, other, h)
		require.Equal(t, h, load(t, cp, other))
	}},
	{"the log fields of saved messages are ignored", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		h := Conversation("f", 1)
		withFields := append([]events.Message(nil), h...)
		withFields[0].Seq, withFields[0].EventID, withFields[0].Synthetic = 99, events.NewID(), true
		save(t, cp, thread, withFields)
		require.Equal(t, h, load(t, cp, thread))
	}},
	{"a save that extends the history keeps what was stored", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		h := Conversation("e", 4)
		save(t, cp, thread, h[:3])
		save(t, cp, thread, h[:5])
		save(t, cp, thread, h)
		require.Equal(t, h, load(t, cp, thread))
	}},
	{"saving the same history again keeps it", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		h := Conversation("same", 2)
		save(t, cp, thread, h)
		save(t, cp, thread, h)
		require.Equal(t, h, load(t, cp, thread))
	}},
	{"a summarized history replaces the older messages", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		h := Conversation("z", 4)
		save(t, cp, thread, h)
		summary := User("Summary: the user asked four questions.")
		next := concat([]events.Message{summary}, h[len(h)-4:], Conversation("after", 1))
		save(t, cp, thread, next)
		require.Equal(t, next, load(t, cp, thread))
		// A second summarization of the summarized history.
		again := concat([]events.Message{Assistant("Summary of the summary.")}, next[len(next)-2:])
		save(t, cp, thread, again)
		require.Equal(t, again, load(t, cp, thread))
	}},
	{"a rewritten history replaces the stored one", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		h := Conversation("r", 3)
		save(t, cp, thread, h)
		regenerated := append(append([]events.Message(nil), h[:len(h)-1]...), Assistant("a better answer"))
		save(t, cp, thread, regenerated)
		require.Equal(t, regenerated, load(t, cp, thread))
		other := Conversation("other", 2)
		save(t, cp, thread, other)
		require.Equal(t, other, load(t, cp, thread))
	}},
	{"a history saved empty loads empty", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		save(t, cp, thread, Conversation("x", 2))
		save(t, cp, thread, []events.Message{})
		require.Empty(t, load(t, cp, thread))
	}},
	{"an empty history saved to an unknown thread stores nothing", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		save(t, cp, thread, nil)
		require.Empty(t, load(t, cp, thread))
	}},
	{"clear discards the history and the next save starts fresh", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		ctx := context.Background()
		save(t, cp, thread, Conversation("old", 2))
		require.NoError(t, cp.Clear(ctx, thread))
		require.Empty(t, load(t, cp, thread))
		require.NoError(t, cp.Clear(ctx, thread), "clearing twice")
		fresh := Conversation("new", 1)
		save(t, cp, thread, fresh)
		require.Equal(t, fresh, load(t, cp, thread))
		require.NoError(t, cp.Clear(ctx, thread+"-unknown"), "clearing an unknown thread")
	}},
	{"threads are independent", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		a, b := Conversation("a", 1), Conversation("b", 2)
		save(t, cp, thread+"-a", a)
		save(t, cp, thread+"-b", b)
		require.NoError(t, cp.Clear(context.Background(), thread+"-a"))
		require.Empty(t, load(t, cp, thread+"-a"))
		require.Equal(t, b, load(t, cp, thread+"-b"))
	}},
	{"a history with calls pending at its end round-trips and is then answered", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		h := []events.Message{User("delete the file"), Assistant("", Call("approve-1", "rm", `{"path":"a.txt"}`))}
		save(t, cp, thread, h)
		require.Equal(t, h, load(t, cp, thread))
		h = append(h, Tool("approve-1", "approved and deleted"), Assistant("Done."))
		save(t, cp, thread, h)
		require.Equal(t, h, load(t, cp, thread))
	}},
	{"the loaded and saved slices stay the caller's", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		h := Rich()
		save(t, cp, thread, h)
		h[1].Content.Parts[0].Text = "changed after save"
		h[2].ToolCalls[0].Name = "changed"
		got := load(t, cp, thread)
		require.Equal(t, Rich(), got)
		got[1].Content.Parts[0].Text = "changed after load"
		got[2].Usage.TotalTokens = 1
		require.Equal(t, Rich(), load(t, cp, thread))
	}},
	{"invalid histories are refused and leave the stored one", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		stored := Conversation("v", 1)
		save(t, cp, thread, stored)
		bad := []struct {
			name string
			ms   []events.Message
		}{
			{"a tool result answering no call", concat(stored, []events.Message{Tool("nobody", "x")})},
			{"a user message while a call is pending", concat(stored, []events.Message{Assistant("", Call("k", "t", `{}`)), User("hi")})},
			{"a user message without content", concat(stored, []events.Message{{Role: events.RoleUser}})},
			{"a user message with tool calls", []events.Message{{Role: events.RoleUser, Content: events.Text("x"), ToolCalls: []events.ToolCall{Call("k", "t", `{}`)}}}},
			{"a tool message with metadata", concat(stored, []events.Message{Assistant("", Call("m", "t", `{}`)), {Role: events.RoleTool, ToolCallID: "m", Content: events.Text("x"), Metadata: json.RawMessage(`{}`)}})},
			{"an image with neither URL nor data", []events.Message{{Role: events.RoleUser, Content: events.Parts(events.Part{Type: events.PartImage})}}},
			{"tool call arguments that are not JSON", []events.Message{User("x"), Assistant("", Call("j", "t", `{`))}},
			{"an unknown role", []events.Message{{Role: "developer", Content: events.Text("x")}}},
		}
		for _, b := range bad {
			err := cp.Save(context.Background(), thread, b.ms)
			require.ErrorIs(t, err, deepagents.ErrInvalidHistory, b.name)
			require.Equal(t, stored, load(t, cp, thread), b.name)
		}
	}},
	{"concurrent saves of different threads do not interfere", func(t *testing.T, cp deepagents.Checkpointer, thread string) {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				th := fmt.Sprintf("%s-%d", thread, i)
				h := Conversation(th, 3)
				for n := 1; n <= len(h) && errs[i] == nil; n += 3 {
					errs[i] = cp.Save(context.Background(), th, h[:n])
				}
				if errs[i] == nil {
					errs[i] = cp.Save(context.Background(), th, h)
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err)
			th := fmt.Sprintf("%s-%d", thread, i)
			require.Equal(t, Conversation(th, 3), load(t, cp, th))
		}
	}},
}

var versionedCases = []versionedCase{
	{"an unknown thread is at version 0 and a save at 0 creates it", func(t *testing.T, cp deepagents.VersionedCheckpointer, thread string) {
		ctx := context.Background()
		ms, v, err := cp.LoadVersion(ctx, thread)
		require.NoError(t, err)
		require.Empty(t, ms)
		require.Zero(t, v)
		h := Conversation("v", 1)
		v1, err := cp.SaveVersion(ctx, thread, h, 0)
		require.NoError(t, err)
		require.NotZero(t, v1)
		ms, v, err = cp.LoadVersion(ctx, thread)
		require.NoError(t, err)
		require.Equal(t, h, ms)
		require.Equal(t, v1, v)
	}},
	{"a save at the loaded version succeeds and moves the version on", func(t *testing.T, cp deepagents.VersionedCheckpointer, thread string) {
		ctx := context.Background()
		h := Conversation("w", 2)
		v1, err := cp.SaveVersion(ctx, thread, h[:2], 0)
		require.NoError(t, err)
		v2, err := cp.SaveVersion(ctx, thread, h, v1)
		require.NoError(t, err)
		require.NotEqual(t, v1, v2)
		_, v, err := cp.LoadVersion(ctx, thread)
		require.NoError(t, err)
		require.Equal(t, v2, v)
	}},
	{"a save that changes nothing keeps the version", func(t *testing.T, cp deepagents.VersionedCheckpointer, thread string) {
		ctx := context.Background()
		h := Conversation("n", 1)
		v1, err := cp.SaveVersion(ctx, thread, h, 0)
		require.NoError(t, err)
		v2, err := cp.SaveVersion(ctx, thread, h, v1)
		require.NoError(t, err)
		require.Equal(t, v1, v2)
	}},
	{"a save at a stale version conflicts and stores nothing", func(t *testing.T, cp deepagents.VersionedCheckpointer, thread string) {
		ctx := context.Background()
		h := Conversation("c", 2)
		v1, err := cp.SaveVersion(ctx, thread, h[:2], 0)
		require.NoError(t, err)
		// Another run saves first.
		theirs := concat(h[:2], []events.Message{User("theirs")})
		_, err = cp.SaveVersion(ctx, thread, theirs, v1)
		require.NoError(t, err)
		_, err = cp.SaveVersion(ctx, thread, h, v1)
		require.ErrorIs(t, err, client.ErrConflict)
		require.Equal(t, theirs, load(t, cp, thread))
	}},
	{"clear moves the version on, so a save from before it conflicts", func(t *testing.T, cp deepagents.VersionedCheckpointer, thread string) {
		ctx := context.Background()
		v1, err := cp.SaveVersion(ctx, thread, Conversation("k", 1), 0)
		require.NoError(t, err)
		require.NoError(t, cp.Clear(ctx, thread))
		_, err = cp.SaveVersion(ctx, thread, Conversation("k", 2), v1)
		require.ErrorIs(t, err, client.ErrConflict)
		require.Empty(t, load(t, cp, thread))
	}},
	{"an empty thread id is stateless for versioned calls too", func(t *testing.T, cp deepagents.VersionedCheckpointer, _ string) {
		ctx := context.Background()
		v, err := cp.SaveVersion(ctx, "", Conversation("s", 1), 7)
		require.NoError(t, err)
		require.Zero(t, v)
		ms, v, err := cp.LoadVersion(ctx, "")
		require.NoError(t, err)
		require.Nil(t, ms)
		require.Zero(t, v)
	}},
}

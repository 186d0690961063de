package chat

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// Rule 5 (current first) against a thread of a client tool round trip on
// turn 1 and a pending client tool call on turn 2, without a server.
func TestCurrentFirstRecognisesTheOrderAgentKitSends(t *testing.T) {
	user := func(s string) events.Message { return events.Message{Role: events.RoleUser, Content: events.Text(s)} }
	said := func(s string) events.Message {
		return events.Message{Role: events.RoleAssistant, Content: events.Text(s)}
	}
	call := func(id string) events.Message {
		return events.Message{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{{ID: id, Name: "lookup", Arguments: "{}"}}}
	}
	result := func(id string) events.Message {
		return events.Message{Role: events.RoleTool, ToolCallID: id, Content: events.Text(`{"answer":42}`)}
	}
	u1, u2 := user("use lookup"), user("thanks; use lookup")
	// The thread: turn 1 answered after its tool round trip, turn 2 ends
	// with call B, which the client runs.
	thread := []events.Message{u1, call("A"), result("A"), said("It is 42."), u2, call("B")}
	pendingB := []client.PendingCall{{ID: "B", Name: "lookup"}}

	for _, tc := range []struct {
		name    string
		thread  []events.Message
		pending []client.PendingCall
		req     []events.Message
		ok      bool
		kind    matchKind
		results []int
	}{
		{name: "a new user message before the whole history is appended",
			thread: thread[:4], req: []events.Message{u2, u1, call("A"), result("A"), said("It is 42.")},
			ok: true, kind: matchAppend},
		{name: "the thread's last message, not answered yet, is waited for",
			thread: thread[:5], req: []events.Message{u2, u1, call("A"), result("A"), said("It is 42.")},
			ok: true, kind: matchDelta},
		{name: "a retry of the turn whose answer is a pending call replays it",
			thread: thread, pending: pendingB, req: []events.Message{u2, u1, call("A"), result("A"), said("It is 42.")},
			ok: true, kind: matchReplay},
		{name: "a retry that resends the pending call without its result replays it",
			thread: thread, pending: pendingB, req: []events.Message{u2, u1, call("A"), result("A"), said("It is 42."), call("B")},
			ok: true, kind: matchReplay},
		{name: "the client's result for the pending call after this turn's call is appended",
			thread: thread, pending: pendingB, req: []events.Message{u2, u1, call("A"), result("A"), said("It is 42."), call("B"), result("B")},
			ok: true, kind: matchAppend, results: []int{6}},
		{name: "a result for a call that is not pending is a retry",
			thread: thread, req: []events.Message{u2, u1, call("A"), result("A"), said("It is 42."), call("B"), result("B")},
			ok: true, kind: matchReplay},
		{name: "a history that differs is not this order",
			thread: thread, pending: pendingB, req: []events.Message{u2, user("use something else"), call("A"), result("A"), said("It is 42."), call("B"), result("B")}},
		{name: "a first message other than the thread's last user message is not this order",
			thread: thread, pending: pendingB, req: []events.Message{user("hello"), u1, call("A"), result("A"), said("It is 42."), call("B"), result("B")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cf, ok := currentFirst(viewOf(tc.thread), viewOf(tc.req), tc.pending)
			require.Equal(t, tc.ok, ok)
			if !ok {
				return
			}
			require.Equal(t, tc.kind, cf.kind)
			require.Equal(t, tc.results, cf.results)
		})
	}
}

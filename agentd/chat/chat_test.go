package chat_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agentd/chat"
	"github.com/convlog/convlog/agentd/internal/agenttest"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

// setup runs an embedded server, agent workers for agent "demo" (the
// offline model) unless noWorkers, and a chat service on a client.
func setup(t *testing.T, noWorkers bool) (*chat.Service, *client.Client) {
	t.Helper()
	e := clienttest.New(t)
	ns, c := e.Server, e.Client
	if !noWorkers {
		agenttest.RunWorkers(t, c, ns.NC, worker.Config{Agents: agenttest.Demo(t, time.Millisecond)})
	}
	return chat.New(c, chat.Config{}), c
}

// turn is a request of the conversation conv with the given messages
// (user, assistant, user, ...).
func turn(t *testing.T, conv string, texts ...string) *chat.Turn {
	t.Helper()
	key, err := client.ResolveConvKey(client.ConvRequest{Agent: "demo", Header: http.Header{"X-Conversation-Id": {conv}}}, client.ConvKeyOptions{})
	require.NoError(t, err)
	tr := &chat.Turn{Tenant: "acme", Agent: "demo", Key: key}
	for i, s := range texts {
		m := events.Message{Role: events.RoleUser, Content: events.Text(s)}
		if i%2 == 1 {
			m.Role = events.RoleAssistant
		}
		tr.Messages = append(tr.Messages, m)
		tr.Positions = append(tr.Positions, i)
	}
	return tr
}

// answer runs a turn to its answer.
func answer(t *testing.T, svc *chat.Service, tr *chat.Turn) *chat.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := svc.Start(ctx, tr)
	require.NoError(t, err)
	t.Cleanup(a.Stop)
	require.NoError(t, a.Wait(ctx, nil, nil))
	return a
}

// A conversation continued by resending its history lands in one thread;
// a retry of an answered turn appends nothing and gives the stored answer.
func TestTurnsOfOneConversationShareItsThread(t *testing.T) {
	svc, c := setup(t, false)
	first := answer(t, svc, turn(t, "conv-1", "my name is colt"))
	content, _ := first.Text()
	require.Contains(t, content, `You said: "my name is colt"`)
	require.False(t, first.Replayed())

	again := answer(t, svc, turn(t, "conv-1", "my name is colt"))
	require.True(t, again.Replayed(), "a retry of the answered turn appends nothing")
	replayed, _ := again.Text()
	require.Equal(t, content, replayed)
	require.Equal(t, first.Thread(), again.Thread())

	second := answer(t, svc, turn(t, "conv-1", "my name is colt", content, "what is my name?"))
	require.Equal(t, first.Thread(), second.Thread())
	require.False(t, second.Replayed())
	got, _ := second.Text()
	require.Contains(t, got, "This thread has 3 messages")
	th, err := c.Get(context.Background(), "acme", second.Thread(), client.Consistent())
	require.NoError(t, err)
	require.Len(t, th.Messages, 4, "only the new user message was appended")
}

// A tool call the agent runs is part of the answer, with its result, and
// a streamed answer hands out the same text piece by piece, the tool call
// among them.
func TestAStreamedToolTurnHandsOutEveryPiece(t *testing.T) {
	svc, _ := setup(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := turn(t, "conv-tool", "what time is it?")
	tr.Deltas = true
	a, err := svc.Start(ctx, tr)
	require.NoError(t, err)
	defer a.Stop()
	var text string
	var calls []chat.ToolCallPiece
	a.Stream(func(p chat.Piece) error {
		switch {
		case p.Content != nil:
			text += *p.Content
		case p.ToolCall != nil:
			calls = append(calls, *p.ToolCall)
		}
		return nil
	})
	require.NoError(t, a.Wait(ctx, nil, nil))
	content, _ := a.Text()
	require.Equal(t, content, text, "the pieces add up to the answer")
	require.Contains(t, content, "2026-01-02T03:04:05Z")
	executed := a.Calls()
	require.Len(t, executed, 1)
	require.Equal(t, model.ToolClock, executed[0].Name)
	require.Equal(t, "2026-01-02T03:04:05Z", executed[0].Result)
	require.NotEmpty(t, calls)
	require.True(t, calls[0].New)
	require.Equal(t, executed[0].ID, calls[0].ID)
	require.GreaterOrEqual(t, len(a.Steps()), 2, "a tool step and the final step")
}

// The policy's refusals are *chat.Error values that name the code, the
// thread and, where there is one, the request message at fault.
func TestRefusedTurnsSayWhy(t *testing.T) {
	svc, c := setup(t, false)
	ctx := context.Background()
	first := answer(t, svc, turn(t, "conv-r", "hello"))
	content, _ := first.Text()

	start := func(tr *chat.Turn) *chat.Error {
		t.Helper()
		a, err := svc.Start(ctx, tr)
		if a != nil {
			a.Stop()
		}
		var ce *chat.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, first.Thread(), ce.Thread)
		return ce
	}

	ce := start(turn(t, "conv-r", "HELLO?", content, "next"))
	require.Equal(t, chat.CodeHistoryDiverged, ce.Code)
	require.Equal(t, "messages[0]", ce.Field)
	require.Equal(t, 0, ce.Index)
	require.NotZero(t, ce.Seq)
	require.NotNil(t, ce.Version)

	ce = start(turn(t, "conv-r", "hello", content, "new question", "an answer the agent never gave"))
	require.Equal(t, chat.CodeInvalid, ce.Code, "the last message must be answerable")
	require.Equal(t, "messages[3].role", ce.Field)
	require.Equal(t, 3, ce.Index)

	other := turn(t, "conv-r", "hello", content, "next")
	other.Agent = "someone-else"
	ce = start(other)
	require.Equal(t, chat.CodeAgentMismatch, ce.Code)

	_, err := c.Delete(ctx, "acme", first.Thread(), "test")
	require.NoError(t, err)
	require.Equal(t, chat.CodeDeleted, start(turn(t, "conv-r", "hello", content, "next")).Code)

	_, err = c.Erase(ctx, "acme", first.Thread(), "test")
	require.NoError(t, err)
	require.Equal(t, chat.CodeErased, start(turn(t, "conv-r", "hello", content, "next")).Code)
}

// A newer user message stored before the answer supersedes the turn: the
// wait ends with CodeSuperseded instead of waiting for an answer that
// will not come.
func TestANewerUserMessageSupersedesTheTurn(t *testing.T) {
	svc, c := setup(t, true) // no workers: nobody answers
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := svc.Start(ctx, turn(t, "conv-s", "first"))
	require.NoError(t, err)
	defer a.Stop()
	_, err = c.Append(ctx, "acme", a.Thread(), []events.Event{{Payload: events.UserMessage{Content: events.Text("second")}}}, client.AnyVersion())
	require.NoError(t, err)
	err = a.Wait(ctx, nil, nil)
	require.True(t, chat.IsCode(err, chat.CodeSuperseded), "got %v", err)
}

// An append the client refuses comes back as *chat.AppendError, whose
// EventIndex names the request message of each event.
func TestARefusedAppendNamesTheRequestMessages(t *testing.T) {
	svc, _ := setup(t, true)
	tr := turn(t, "conv-a", "hi")
	tr.Messages[0].Content = events.Text(string(make([]byte, 2<<20))) // beyond the server's max payload
	_, err := svc.Start(context.Background(), tr)
	var ae *chat.AppendError
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.EventIndex, func() string {
		for id := range ae.EventIndex {
			return id
		}
		return ""
	}())
	var positions []int
	for _, p := range ae.EventIndex {
		positions = append(positions, p)
	}
	require.Equal(t, []int{0}, positions)
}

// AgentKit 0.13 sends [system, current user message, ...history]: each turn
// of that order lands in the conversation's thread in the right order, a
// retry of the last answered turn replays its answer, and a request whose
// history really differs is still refused naming the first differing
// message.
func TestCurrentFirstOrderOfAgentKit(t *testing.T) {
	svc, c := setup(t, false)
	sys := "You are helpful."
	req := func(texts ...string) *chat.Turn { // current, then history
		tr := turn(t, "conv-agentkit")
		tr.System = &sys
		for i, s := range texts {
			m := events.Message{Role: events.RoleUser, Content: events.Text(s)}
			if i > 0 && i%2 == 0 {
				m.Role = events.RoleAssistant
			}
			tr.Messages = append(tr.Messages, m)
			tr.Positions = append(tr.Positions, i+1) // after the system message
		}
		return tr
	}
	first := answer(t, svc, req("my name is colt"))
	a1, _ := first.Text()
	second := answer(t, svc, req("what is my name?", "my name is colt", a1))
	require.Equal(t, first.Thread(), second.Thread())
	require.False(t, second.Replayed())
	a2, _ := second.Text()
	require.Contains(t, a2, "This thread has 3 messages")
	again := answer(t, svc, req("what is my name?", "my name is colt", a1))
	require.True(t, again.Replayed(), "a retry of turn 2 in the same order replays its answer")
	replayed, _ := again.Text()
	require.Equal(t, a2, replayed)

	third := answer(t, svc, req("thanks", "my name is colt", a1, "what is my name?", a2))
	require.False(t, third.Replayed())

	th, err := c.Get(context.Background(), "acme", first.Thread(), client.Consistent())
	require.NoError(t, err)
	var users []string
	for _, m := range th.Messages {
		if m.Role == events.RoleUser {
			users = append(users, m.Content.String())
		}
	}
	require.Equal(t, []string{"my name is colt", "what is my name?", "thanks"}, users, "each turn's message appended once, in order")
	require.Len(t, th.Messages, 6)

	_, err = svc.Start(context.Background(), req("hello", "my name is bob", a1))
	var ce *chat.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, chat.CodeHistoryDiverged, ce.Code, "a history that differs is still refused")
}

// AgentKit's own openai() model sends a client tool round trip on turn 2
// or later as [system, current user message, ...history, the turn's tool
// call, its result]. The history's last answer block and the turn's tool
// call read as one answer block (a tool-call step has no text): the
// result is taken for the pending call and the agent answers from it, not
// a replay of the stored call.
func TestCurrentFirstOrderClientToolRoundTripOnALaterTurn(t *testing.T) {
	svc, c := setup(t, false)
	sys := "You are helpful."
	tools := []events.ClientTool{{Name: "lookup"}}
	req := func(msgs ...events.Message) *chat.Turn {
		tr := turn(t, "conv-agentkit-tool")
		tr.System, tr.ClientTools = &sys, tools
		for i, m := range msgs {
			tr.Messages = append(tr.Messages, m)
			tr.Positions = append(tr.Positions, i+1) // after the system message
		}
		return tr
	}
	user := func(s string) events.Message { return events.Message{Role: events.RoleUser, Content: events.Text(s)} }
	said := func(a *chat.Answer) events.Message {
		text, _ := a.Text()
		return events.Message{Role: events.RoleAssistant, Content: events.Text(text)}
	}
	callOf := func(a *chat.Answer) (events.Message, events.Message) {
		calls := a.ClientCalls()
		require.Len(t, calls, 1, "the answer ends with the client's tool call")
		return events.Message{Role: events.RoleAssistant, ToolCalls: calls},
			events.Message{Role: events.RoleTool, ToolCallID: calls[0].ID, Content: events.Text(`{"answer":42}`)}
	}

	// Turn 1: the call, then its result in the thread's order (rule 1).
	u1 := user("use lookup")
	callA, resultA := callOf(answer(t, svc, req(u1)))
	textA := said(answer(t, svc, req(u1, callA, resultA)))

	// Turn 2: current first, then the history, then the turn's call and result.
	u2 := user("thanks; use lookup")
	callB, resultB := callOf(answer(t, svc, req(u2, u1, callA, resultA, textA)))
	final := answer(t, svc, req(u2, u1, callA, resultA, textA, callB, resultB))
	require.False(t, final.Replayed(), "the client's result is new, not a retry")
	require.Empty(t, final.ClientCalls(), "the agent answers from the result instead of calling again")
	got, _ := final.Text()
	require.Contains(t, got, "42")

	th, err := c.Get(context.Background(), "acme", final.Thread(), client.Consistent())
	require.NoError(t, err)
	require.Empty(t, th.Pending, "the call is answered")
	var roles []string
	for _, m := range th.Messages {
		roles = append(roles, string(m.Role))
	}
	require.Equal(t, []string{"user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"}, roles)
	require.Equal(t, callB.ToolCalls[0].ID, th.Messages[6].ToolCallID, "the result is paired with call B")
}

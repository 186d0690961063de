package model_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/model/modeltest"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/transcripts"
)

// conformanceRecording answers the conformance suite's prompts.
const conformanceRecording = `{"id":"conformance","messages":[
	{"role":"system","content":"You are a test."},
	{"role":"user","content":"Hello, how are you?"},
	{"role":"assistant","content":"I am fine, thank you for asking."},
	{"role":"user","content":"What is 6*7?"},
	{"role":"assistant","content":null,"reasoning_content":"Use the calculator.","tool_calls":[{"id":"call_1","name":"calculator","arguments":"{\"expression\":\"6*7\"}"}]},
	{"role":"tool","tool_call_id":"call_1","content":"42"},
	{"role":"assistant","content":"6*7 is 42."}
]}`

func conversation(t *testing.T, s string) events.Conversation {
	t.Helper()
	var c events.Conversation
	require.NoError(t, json.Unmarshal([]byte(s), &c))
	return c
}

func newReplay(t *testing.T, s string) *model.Replay {
	t.Helper()
	p, err := model.NewReplay(conversation(t, s), model.ReplayConfig{})
	require.NoError(t, err)
	return p
}

func TestReplayConformance(t *testing.T) {
	modeltest.Run(t, func(t *testing.T) model.Provider { return newReplay(t, conformanceRecording) }, modeltest.Options{
		Deterministic: true,
		ToolHistory: []events.Message{userMsg("Hello, how are you?"),
			{Role: events.RoleAssistant, Content: events.Text("I am fine, thank you for asking.")}, userMsg("What is 6*7?")},
	})
}

func TestReplayReturnsTheRecordedTurnAsRecorded(t *testing.T) {
	p := newReplay(t, conformanceRecording)
	require.Equal(t, 3, p.Turns())
	hist := []events.Message{{Role: events.RoleSystem, Content: events.Text("ignored")}, userMsg("Hello, how are you?"),
		{Role: events.RoleAssistant, Content: events.Text("I am fine, thank you for asking."), Agent: "a", Model: "m"},
		userMsg("What is 6*7?")}
	resp, err := p.Generate(context.Background(), model.Request{Messages: hist, SystemPrompt: "not compared"}, nil)
	require.NoError(t, err)
	require.True(t, resp.Content.IsNull(), "null content stays null")
	require.Equal(t, "Use the calculator.", resp.Reasoning)
	require.Equal(t, []events.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}, resp.ToolCalls)
	require.Equal(t, "tool_calls", resp.FinishReason)
	require.Equal(t, model.DefaultReplayModel, resp.Model)
	require.Nil(t, resp.Usage)

	resp.ToolCalls[0].ID = "mutated"
	again, err := p.Generate(context.Background(), model.Request{Messages: hist}, nil)
	require.NoError(t, err)
	require.Equal(t, "call_1", again.ToolCalls[0].ID, "callers cannot change the recording")
}

func TestReplayErrorsSayWhereTheHistoryDiverged(t *testing.T) {
	p := newReplay(t, conformanceRecording)
	ok1 := []events.Message{userMsg("Hello, how are you?"), {Role: events.RoleAssistant, Content: events.Text("I am fine, thank you for asking.")}}
	cases := []struct {
		name       string
		msgs       []events.Message
		histIdx    int
		recIdx     int
		reason     string
		noTurnText string
	}{
		{name: "a different user text", msgs: []events.Message{userMsg("Hi")}, histIdx: 0, recIdx: 1, reason: "user text differs"},
		{name: "a different assistant text", msgs: []events.Message{userMsg("Hello, how are you?"), {Role: events.RoleAssistant, Content: events.Text("Bad.")}},
			histIdx: 1, recIdx: 2, reason: "assistant text differs"},
		{name: "a different role", msgs: append(append([]events.Message{}, ok1...), events.Message{Role: events.RoleAssistant, Content: events.Text("x")}),
			histIdx: 2, recIdx: 3, reason: `the history has a message with role "assistant", the recording one with role "user"`},
		{name: "a different tool call", msgs: append(append([]events.Message{}, ok1...), userMsg("What is 6*7?"),
			events.Message{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6*8"}`}}}),
			histIdx: 3, recIdx: 4, reason: "tool call 0 differs"},
		{name: "a result for another call", msgs: append(append([]events.Message{}, ok1...), userMsg("What is 6*7?"),
			events.Message{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
			events.Message{Role: events.RoleTool, ToolCallID: "call_2", Content: events.Text("42")}),
			histIdx: 4, recIdx: 5, reason: `answers call "call_2"`},
		{name: "a history longer than the recording", msgs: append(append([]events.Message{}, ok1...), userMsg("What is 6*7?"),
			events.Message{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
			events.Message{Role: events.RoleTool, ToolCallID: "call_1", Content: events.Text("other results are fine")},
			events.Message{Role: events.RoleAssistant, Content: events.Text("6*7 is 42.")}, userMsg("more")),
			histIdx: 6, recIdx: -1, reason: "the recording ends after 6 messages"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.Generate(context.Background(), model.Request{Messages: c.msgs}, nil)
			require.ErrorIs(t, err, model.ErrDiverged)
			var de *model.DivergedError
			require.ErrorAs(t, err, &de)
			require.Equal(t, c.histIdx, de.HistoryIndex)
			require.Equal(t, c.recIdx, de.RecordingIndex)
			require.Contains(t, de.Reason, c.reason)
			require.Equal(t, "conformance", de.Recording)
			require.False(t, model.IsRetryable(err))
		})
	}
}

func TestReplayHasNoTurnWhereTheRecordingGoesOnWithAUserOrEnds(t *testing.T) {
	p := newReplay(t, `{"id":"r","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"}]}`)
	_, err := p.Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("a")}}, nil)
	require.ErrorIs(t, err, model.ErrNoRecordedTurn)
	require.ErrorContains(t, err, "goes on with a user message at message 1")

	resp, err := p.Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("a"), userMsg("b")}}, nil)
	require.NoError(t, err)
	require.Equal(t, events.Text("c"), resp.Content)

	_, err = p.Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("a"), userMsg("b"),
		{Role: events.RoleAssistant, Content: events.Text("c")}}}, nil)
	require.ErrorIs(t, err, model.ErrNoRecordedTurn)
	require.ErrorContains(t, err, "ends after the 3 messages")
}

func TestNewReplayRejectsAnUnconvertibleRecording(t *testing.T) {
	_, err := model.NewReplay(conversation(t, `{"id":"bad","messages":[{"role":"user","content":"a"},{"role":"tool","content":"x"}]}`), model.ReplayConfig{})
	require.ErrorContains(t, err, "message 1")
	_, err = model.NewReplay(events.Conversation{}, model.ReplayConfig{TokenDelay: -1})
	require.ErrorContains(t, err, "TokenDelay")
}

// Every assistant turn of every real transcript (transcripts.Find) plays back
// exactly as recorded, fed the history the recording had at that point.
func TestReplayPlaysBackEveryRealTranscript(t *testing.T) {
	set := transcripts.Load(t)
	var convs, turns int
	for file, conv := range set.Conversations(t) {
		convs++
		p, err := model.NewReplay(conv, model.ReplayConfig{})
		require.NoError(t, err, "%s %s", file, conv.ID)
		var history []events.Message
		played := 0
		for i, o := range conv.Messages {
			m, err := events.FromOpenAI(o)
			require.NoError(t, err)
			if m.Role == events.RoleSystem {
				continue
			}
			if m.Role != events.RoleAssistant {
				history = append(history, m)
				continue
			}
			var acc model.Accumulator
			resp, err := p.Generate(context.Background(), model.Request{Thread: conv.ID, Messages: history}, acc.Add)
			require.NoError(t, err, "%s %s message %d", file, conv.ID, i)
			require.Equal(t, m.Content, resp.Content, "%s %s message %d", file, conv.ID, i)
			require.Equal(t, m.ToolCalls, resp.ToolCalls, "%s %s message %d", file, conv.ID, i)
			require.Equal(t, m.Content.String(), acc.Content())
			am := resp.AssistantMessage()
			history = append(history, events.Message{Role: events.RoleAssistant, Content: am.Content, ToolCalls: am.ToolCalls, Model: am.Model})
			played++
		}
		require.Equal(t, p.Turns(), played)
		turns += played
	}
	require.Equal(t, set.Total().Conversations, convs)
	t.Logf("replayed %d assistant turns of %d conversations", turns, convs)
}

package model_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/model/modeltest"
	"github.com/convlog/convlog/events"
)

func newOffline(t *testing.T) *model.Offline {
	t.Helper()
	p, err := model.NewOffline(model.OfflineConfig{})
	require.NoError(t, err)
	return p
}

func TestOfflineConformance(t *testing.T) {
	modeltest.Run(t, func(t *testing.T) model.Provider { return newOffline(t) }, modeltest.Options{Deterministic: true})
}

// demoTools are the built-in tools as agent/tools describes them (only the
// names matter to the offline model).
var demoTools = []model.Tool{{Name: "clock"}, {Name: "calculator"}, {Name: "kv_get"}, {Name: "kv_set"}}

func TestOfflineTurnsUserMessagesIntoToolCalls(t *testing.T) {
	cases := []struct {
		name  string
		text  string
		tools []model.Tool
		calls []events.ToolCall // ids are filled in as call_1_<i>
	}{
		{name: "a question about the time calls clock", text: "What time is it?", tools: demoTools,
			calls: []events.ToolCall{{Name: "clock", Arguments: `{}`}}},
		{name: "arithmetic calls calculator with the expression", text: "what is 12*(3+4)?", tools: demoTools,
			calls: []events.ToolCall{{Name: "calculator", Arguments: `{"expression":"12*(3+4)"}`}}},
		{name: "decimals and unary minus stay in the expression", text: "Compute -1.5 + 2 / 4.", tools: demoTools,
			calls: []events.ToolCall{{Name: "calculator", Arguments: `{"expression":"-1.5 + 2 / 4"}`}}},
		{name: "remember X is Y calls kv_set with a normalized key", text: "Please remember that My  Name is Ada Lovelace!", tools: demoTools,
			calls: []events.ToolCall{{Name: "kv_set", Arguments: `{"key":"my name","value":"Ada Lovelace"}`}}},
		{name: "remember X = Y calls kv_set", text: "remember answer=42", tools: demoTools,
			calls: []events.ToolCall{{Name: "kv_set", Arguments: `{"key":"answer","value":"42"}`}}},
		{name: "what is X calls kv_get", text: "What's my name?", tools: demoTools,
			calls: []events.ToolCall{{Name: "kv_get", Arguments: `{"key":"my name"}`}}},
		{name: "several clauses give several calls in one turn", text: "What time is it? And what is 2+2? Remember color is blue.", tools: demoTools,
			calls: []events.ToolCall{{Name: "clock", Arguments: `{}`}, {Name: "calculator", Arguments: `{"expression":"2+2"}`},
				{Name: "kv_set", Arguments: `{"key":"color","value":"blue"}`}}},
		{name: "a tool that is not offered is not called", text: "What time is it? what is 2+2", tools: []model.Tool{{Name: "calculator"}},
			calls: []events.ToolCall{{Name: "calculator", Arguments: `{"expression":"2+2"}`}}},
		{name: "characters that HTML escapes stay as they are", text: "remember a<b is x&y", tools: demoTools,
			calls: []events.ToolCall{{Name: "kv_set", Arguments: `{"key":"a<b","value":"x&y"}`}}},
		{name: "a plain number is not arithmetic", text: "I have 3 cats", tools: demoTools},
		{name: "no tools offered means no calls", text: "what is 2+2", tools: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := newOffline(t).Generate(context.Background(), model.Request{
				Messages: []events.Message{userMsg(c.text)}, Tools: c.tools}, nil)
			require.NoError(t, err)
			if len(c.calls) == 0 {
				require.Empty(t, resp.ToolCalls)
				require.Contains(t, resp.Content.String(), `You said: "`+c.text+`".`)
				require.Equal(t, "stop", resp.FinishReason)
				return
			}
			for i := range c.calls {
				c.calls[i].ID = "call_1_" + string(rune('0'+i))
			}
			require.Equal(t, c.calls, resp.ToolCalls)
			require.True(t, resp.Content.IsNull())
			require.NotEmpty(t, resp.Reasoning)
			require.Equal(t, "tool_calls", resp.FinishReason)
		})
	}
}

func TestOfflineAnswersFromToolResults(t *testing.T) {
	turn := func(calls ...events.ToolCall) events.Message {
		return events.Message{Role: events.RoleAssistant, ToolCalls: calls}
	}
	result := func(id, content string, isErr bool) events.Message {
		return events.Message{Role: events.RoleTool, ToolCallID: id, Content: events.Text(content), IsError: isErr}
	}
	cases := []struct {
		name string
		msgs []events.Message
		want string
	}{
		{name: "a clock result is told as the time",
			msgs: []events.Message{turn(events.ToolCall{ID: "c", Name: "clock", Arguments: "{}"}), result("c", "2026-01-02T03:04:05Z", false)},
			want: "The current time is 2026-01-02T03:04:05Z."},
		{name: "a calculator result is told with its expression",
			msgs: []events.Message{turn(events.ToolCall{ID: "c", Name: "calculator", Arguments: `{"expression":"12*(3+4)"}`}), result("c", "84", false)},
			want: "12*(3+4) = 84."},
		{name: "a kv_set result is acknowledged",
			msgs: []events.Message{turn(events.ToolCall{ID: "c", Name: "kv_set", Arguments: `{"key":"my name","value":"Ada"}`}), result("c", `{"key":"my name","stored":true}`, false)},
			want: "Noted: my name is Ada."},
		{name: "a found key is told",
			msgs: []events.Message{turn(events.ToolCall{ID: "c", Name: "kv_get", Arguments: `{"key":"my name"}`}), result("c", `{"key":"my name","found":true,"value":"Ada"}`, false)},
			want: "My name is Ada."},
		{name: "a missing key is admitted",
			msgs: []events.Message{turn(events.ToolCall{ID: "c", Name: "kv_get", Arguments: `{"key":"x"}`}), result("c", `{"key":"x","found":false}`, false)},
			want: `I don't know what x is yet. Tell me with "remember x is ...".`},
		{name: "an error result is reported as a failure",
			msgs: []events.Message{turn(events.ToolCall{ID: "c", Name: "calculator", Arguments: `{"expression":"1/0"}`}), result("c", `tool "calculator" failed: division by zero`, true)},
			want: `The calculator tool failed: tool "calculator" failed: division by zero.`},
		{name: "results are matched to calls by id in call order, also when ids repeat in the thread",
			msgs: []events.Message{
				turn(events.ToolCall{ID: "c", Name: "clock", Arguments: "{}"}), result("c", "old", false),
				turn(events.ToolCall{ID: "c", Name: "clock", Arguments: "{}"}, events.ToolCall{ID: "d", Name: "calculator", Arguments: `{"expression":"1+1"}`}),
				result("d", "2", false), result("c", "new", false)},
			want: "The current time is new. 1+1 = 2."},
		{name: "an unanswered call is said to be unanswered",
			msgs: []events.Message{turn(events.ToolCall{ID: "c", Name: "clock", Arguments: "{}"})},
			want: "The clock tool has not answered yet."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs := append([]events.Message{userMsg("q")}, c.msgs...)
			resp, err := newOffline(t).Generate(context.Background(), model.Request{Messages: msgs, Tools: demoTools}, nil)
			require.NoError(t, err)
			require.Empty(t, resp.ToolCalls, "the offline model never calls tools right after results")
			require.Equal(t, events.Text(c.want), resp.Content)
		})
	}
}

func TestOfflineEchoesWithAThreadSummary(t *testing.T) {
	p := newOffline(t)
	resp, err := p.Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("Hello")}, Tools: demoTools}, nil)
	require.NoError(t, err)
	require.Equal(t, `You said: "Hello". This thread has 1 message: 1 from you, 0 from me and 0 tool results. `+
		`Try "what time is it?", "what is 12*(3+4)?", "remember my name is Ada", or "what is my name?".`, resp.Content.String())

	msgs := []events.Message{userMsg("a"), {Role: events.RoleAssistant, Content: events.Text("b")},
		{Role: events.RoleUser, Content: events.Parts(events.Part{Type: events.PartText, Text: "look"},
			events.Part{Type: events.PartImage, URL: "https://example.com/x.png"})}}
	resp, err = p.Generate(context.Background(), model.Request{Messages: msgs}, nil)
	require.NoError(t, err)
	require.Equal(t, `You said: "look". You attached 1 file. This thread has 3 messages: 2 from you, 1 from me and 0 tool results.`, resp.Content.String())
	require.Equal(t, model.DefaultOfflineModel, resp.Model)
	require.Equal(t, &events.Usage{InputTokens: 3, OutputTokens: 22, TotalTokens: 25}, resp.Usage)

	resp, err = p.Generate(context.Background(), model.Request{Model: "mine"}, nil)
	require.NoError(t, err)
	require.Equal(t, "Hello! I am the offline model of convlog.", resp.Content.String(), "an empty history gets a greeting")
	require.Equal(t, "mine", resp.Model)
}

func TestOfflineStreamsWordByWordWithTheConfiguredDelay(t *testing.T) {
	p, err := model.NewOffline(model.OfflineConfig{TokenDelay: time.Millisecond})
	require.NoError(t, err)
	var pieces []string
	start := time.Now()
	resp, err := p.Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("one two")}},
		func(d model.Delta) { pieces = append(pieces, d.Content) })
	require.NoError(t, err)
	require.Equal(t, []string{"You", " said:", ` "one`, ` two".`, " This", " thread", " has", " 1", " message:",
		" 1", " from", " you,", " 0", " from", " me", " and", " 0", " tool", " results."}, pieces)
	require.GreaterOrEqual(t, time.Since(start), time.Duration(len(pieces)-1)*time.Millisecond)
	require.Equal(t, "You said: \"one two\". This thread has 1 message: 1 from you, 0 from me and 0 tool results.", resp.Content.String())
}

func TestOfflineToolCallDeltasCarryIDNameThenArguments(t *testing.T) {
	var deltas []model.Delta
	_, err := newOffline(t).Generate(context.Background(), model.Request{Messages: []events.Message{userMsg("what time is it")},
		Tools: demoTools}, func(d model.Delta) { deltas = append(deltas, d) })
	require.NoError(t, err)
	last := deltas[len(deltas)-2:]
	require.Equal(t, model.Delta{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_1_0", Name: "clock"}}, last[0])
	require.Equal(t, model.Delta{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: "{}"}}, last[1])
	for _, d := range deltas[:len(deltas)-2] {
		require.NotEmpty(t, d.Reasoning, "reasoning comes first")
	}
	b, err := json.Marshal(last[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"tool_call":{"index":0,"id":"call_1_0","name":"clock"}}`, string(b))
}

func TestOfflineConfigValidate(t *testing.T) {
	require.NoError(t, model.OfflineConfig{}.Validate())
	require.NoError(t, model.DefaultOfflineConfig().Validate())
	_, err := model.NewOffline(model.OfflineConfig{TokenDelay: -1})
	require.ErrorContains(t, err, "TokenDelay")
}

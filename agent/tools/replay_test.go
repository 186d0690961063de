package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/transcripts"
)

// A recording that reuses call id "c1" in two turns, like tau-bench does.
const reuseRecording = `{"id":"reuse","messages":[
	{"role":"system","content":"s"},
	{"role":"user","content":"time?"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"c1","name":"clock","arguments":"{}"}]},
	{"role":"tool","tool_call_id":"c1","name":"clock","content":"first"},
	{"role":"assistant","content":"It is first."},
	{"role":"user","content":"and now?"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"c1","name":"clock","arguments":"{}"},{"id":"c2","name":"think","arguments":"{}"}]},
	{"role":"tool","tool_call_id":"c2","content":""},
	{"role":"tool","tool_call_id":"c1","content":"second"},
	{"role":"assistant","content":"It is second."}
]}`

func newReplayRunner(t *testing.T, s string) *tools.Replay {
	t.Helper()
	var c events.Conversation
	require.NoError(t, json.Unmarshal([]byte(s), &c))
	r, err := tools.NewReplay(c)
	require.NoError(t, err)
	return r
}

func msgsOf(t *testing.T, s string) []events.Message {
	t.Helper()
	var c events.Conversation
	require.NoError(t, json.Unmarshal([]byte(s), &c))
	var out []events.Message
	for _, o := range c.Messages {
		m, err := events.FromOpenAI(o)
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func TestReplayRunnerFindsTheResultByPositionWhenIDsRepeat(t *testing.T) {
	r := newReplayRunner(t, reuseRecording)
	m := msgsOf(t, reuseRecording)
	c1 := events.ToolCall{ID: "c1", Name: "clock", Arguments: "{}"}
	cases := []struct {
		name    string
		history []events.Message
		call    events.ToolCall
		want    events.Content
	}{
		{"the first turn, before it is appended", m[:2], c1, events.Text("first")},
		{"the first turn, after it is appended", m[:3], c1, events.Text("first")},
		{"the second turn, before it is appended, though c1 was answered before", m[:6], c1, events.Text("second")},
		{"the second turn, after it is appended", m[:7], c1, events.Text("second")},
		{"the second turn, with the other result already appended", m[:8], c1, events.Text("second")},
		{"an empty recorded result", m[:7], events.ToolCall{ID: "c2", Name: "think", Arguments: "{}"}, events.Text("")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := r.Run(context.Background(), c.call, tools.Env{History: c.history})
			require.False(t, res.IsError, res.Content.String())
			require.Equal(t, c.want, res.Content)
			require.Equal(t, c.call.ID, res.ToolCallID)
			require.Equal(t, c.call.Name, res.Name)
		})
	}
}

func TestReplayRunnerErrorsAreResults(t *testing.T) {
	r := newReplayRunner(t, reuseRecording)
	m := msgsOf(t, reuseRecording)
	c1 := events.ToolCall{ID: "c1", Name: "clock", Arguments: "{}"}
	cases := []struct {
		name    string
		history []events.Message
		call    events.ToolCall
		want    string
	}{
		{"a diverged history", []events.Message{{Role: events.RoleUser, Content: events.Text("other")}}, c1,
			`replay of recording "reuse": the history diverged: history message 0 (recording message 1): user text differs`},
		{"a call no recorded turn makes here", m[:2], events.ToolCall{ID: "zz", Name: "clock", Arguments: "{}"},
			`no recorded assistant turn makes call "zz" (clock) at message 2`},
		{"a call to another tool than recorded", m[:2], events.ToolCall{ID: "c1", Name: "calculator", Arguments: "{}"},
			`recorded call "c1" is to "clock", not "calculator"`},
		{"past the end of the recording", m, c1, `at the end of the recording`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := r.Run(context.Background(), c.call, tools.Env{History: c.history})
			require.True(t, res.IsError)
			require.Contains(t, res.Content.String(), c.want)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Run(ctx, c1, tools.Env{History: m[:2]})
	require.True(t, res.IsError)
	require.Contains(t, res.Content.String(), "cancelled")

	noResult := newReplayRunner(t, `{"id":"x","messages":[{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","name":"t","arguments":"{}"}]}]}`)
	res = noResult.Run(context.Background(), events.ToolCall{ID: "c", Name: "t"},
		tools.Env{History: []events.Message{{Role: events.RoleUser, Content: events.Text("a")}}})
	require.True(t, res.IsError)
	require.Contains(t, res.Content.String(), `no recorded result for call "c" (t) after the turn at message 1`)
}

// Every tool result of every real transcript (transcripts.Find) is replayed
// exactly, with the history before the call's turn and with the turn
// appended.
func TestReplayRunnerAnswersEveryRealToolCall(t *testing.T) {
	set := transcripts.Load(t)
	calls := 0
	for file, conv := range set.Conversations(t) {
		r, err := tools.NewReplay(conv)
		require.NoError(t, err)
		var msgs []events.Message
		for _, o := range conv.Messages {
			m, err := events.FromOpenAI(o)
			require.NoError(t, err)
			msgs = append(msgs, m)
		}
		for i, m := range msgs {
			if m.Role != events.RoleAssistant {
				continue
			}
			for _, c := range m.ToolCalls {
				var want *events.Message
				for k := i + 1; k < len(msgs) && msgs[k].Role == events.RoleTool; k++ {
					if msgs[k].ToolCallID == c.ID {
						want = &msgs[k]
						break
					}
				}
				for _, hist := range [][]events.Message{msgs[:i], msgs[:i+1]} {
					res := r.Run(context.Background(), c, tools.Env{History: hist})
					if want == nil {
						require.True(t, res.IsError, "%s %s message %d: a call never answered in the recording", file, conv.ID, i)
						continue
					}
					require.False(t, res.IsError, "%s %s message %d: %s", file, conv.ID, i, res.Content.String())
					require.Equal(t, want.Content, res.Content, "%s %s message %d", file, conv.ID, i)
				}
				calls++
			}
		}
	}
	require.Equal(t, set.Total().ToolCalls, calls)
}

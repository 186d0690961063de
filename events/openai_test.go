package events_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

func decodeOpenAI(t *testing.T, s string) events.OpenAIMessage {
	t.Helper()
	var o events.OpenAIMessage
	require.NoError(t, json.Unmarshal([]byte(s), &o), s)
	return o
}

func TestOpenAIMessagesConvertBothWays(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want events.Message
		out  string // ToOpenAI; "" means the input itself
	}{
		{"a user message with a name",
			`{"role":"user","content":"hi <b>","name":"alice"}`,
			events.Message{Role: events.RoleUser, Content: events.Text("hi <b>"), Name: "alice"}, ""},
		{"a tool-call-only assistant turn keeps null content and nests calls",
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]}`,
			events.Message{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a": 1}`}}}, ""},
		{"flat transcript calls are read and written nested by ToOpenAI",
			`{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"f","arguments":"{}"}]}`,
			events.Message{Role: events.RoleAssistant, Content: events.Text(""), ToolCalls: []events.ToolCall{{ID: "c1", Name: "f", Arguments: `{}`}}},
			`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
		{"arguments sent as an object are kept as their exact text",
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"b": [1, 2]}}}]}`,
			events.Message{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{{ID: "c1", Name: "f", Arguments: `{"b": [1, 2]}`}}},
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"b\": [1, 2]}"}}]}`},
		{"a tool message keeps its call id and name",
			`{"role":"tool","content":"42","tool_call_id":"c1","name":"f"}`,
			events.Message{Role: events.RoleTool, Content: events.Text("42"), ToolCallID: "c1", Name: "f"}, ""},
		{"reasoning is read from reasoning and written as reasoning_content",
			`{"role":"assistant","content":"x","reasoning":"because"}`,
			events.Message{Role: events.RoleAssistant, Content: events.Text("x"), Reasoning: "because"},
			`{"role":"assistant","content":"x","reasoning_content":"because"}`},
		{"a developer message becomes a system message",
			`{"role":"developer","content":"rules"}`,
			events.Message{Role: events.RoleSystem, Content: events.Text("rules")},
			`{"role":"system","content":"rules"}`},
		{"multimodal parts map to convlog parts",
			`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},{"type":"file","file":{"file_id":"f-1","filename":"a.pdf"}}]}`,
			events.Message{Role: events.RoleUser, Content: events.Parts(
				events.Part{Type: events.PartText, Text: "look"},
				events.Part{Type: events.PartImage, URL: "data:image/png;base64,AAAA", Detail: "low"},
				events.Part{Type: events.PartFile, FileID: "f-1", Filename: "a.pdf"},
			)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := events.FromOpenAI(decodeOpenAI(t, c.in))
			require.NoError(t, err)
			assert.Equal(t, c.want, m)
			b, err := json.Marshal(events.ToOpenAI(m))
			require.NoError(t, err)
			want := c.out
			if want == "" {
				want = c.in
			}
			assert.JSONEq(t, want, string(b))
		})
	}
}

func TestOpenAIConversionErrorsNameTheProblem(t *testing.T) {
	_, err := events.FromOpenAI(decodeOpenAI(t, `{"role":"tool","content":"x"}`))
	require.ErrorContains(t, err, "tool_call_id")
	_, err = events.FromOpenAI(decodeOpenAI(t, `{"role":"function","content":"x"}`))
	require.ErrorContains(t, err, `role "function"`)

	for _, in := range []string{
		`{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}`,
		`{"role":"user","content":[{"type":"image_url"}]}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c","name":"f","arguments":[1]}]}`,
		`{"role":"user","content":7}`,
	} {
		var o events.OpenAIMessage
		require.Error(t, json.Unmarshal([]byte(in), &o), in)
	}
}

// Parts written for chat APIs use OpenAI's part shapes; base64 image and
// file data become data URLs.
func TestOpenAIPartsUseTheChatAPIShapes(t *testing.T) {
	m := events.Message{Role: events.RoleUser, Content: events.Parts(
		events.Part{Type: events.PartImage, Data: "AAAA", MediaType: "image/png"},
		events.Part{Type: events.PartFile, Data: "JVBE", MediaType: "application/pdf", Filename: "a.pdf"},
	)}
	b, err := json.Marshal(events.ToOpenAI(m))
	require.NoError(t, err)
	assert.JSONEq(t, `{"role":"user","content":[
		{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
		{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBE"}}]}`, string(b))
}

func TestSplitSystemKeepsOnlyALeadingTextSystemMessageApart(t *testing.T) {
	msgs := []events.OpenAIMessage{
		decodeOpenAI(t, `{"role":"system","content":"be brief"}`),
		decodeOpenAI(t, `{"role":"user","content":"hi"}`),
		decodeOpenAI(t, `{"role":"system","content":"later rule"}`),
	}
	sys, rest, err := events.SplitSystem(msgs)
	require.NoError(t, err)
	require.NotNil(t, sys)
	assert.Equal(t, "be brief", *sys)
	require.Len(t, rest, 2)
	assert.Equal(t, events.RoleSystem, rest[1].Role, "a later system message stays in the history")

	sys, rest, err = events.SplitSystem([]events.OpenAIMessage{decodeOpenAI(t, `{"role":"system","content":null}`)})
	require.NoError(t, err)
	assert.Nil(t, sys, "a null system message is not a prompt")
	assert.Len(t, rest, 1)

	_, _, err = events.SplitSystem([]events.OpenAIMessage{decodeOpenAI(t, `{"role":"user","content":"a"}`), decodeOpenAI(t, `{"role":"tool","content":"x"}`)})
	require.ErrorContains(t, err, "message 1")
}

func TestMessagePayloadAndMessageOfAreInverse(t *testing.T) {
	for _, m := range richMessages() {
		p := m.Payload()
		if m.Role == events.RoleSystem {
			assert.Nil(t, p)
			continue
		}
		require.NotNil(t, p)
		back, ok := events.MessageOf(p)
		require.True(t, ok)
		// Seq, EventID, Time and Synthetic belong to the projection, not
		// to the payload.
		m.Seq, m.EventID, m.Time, m.Synthetic = 0, "", back.Time, false
		assert.Equal(t, m, back)
	}
	_, ok := events.MessageOf(events.Reset{})
	assert.False(t, ok)
	assert.Nil(t, events.Message{Role: "robot"}.Payload())
}

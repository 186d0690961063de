package events_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// Every payload with content redacts to a valid payload of the same type
// holding none of its text, with its tool call ids kept; a payload
// without content is refused, and so is a field its type does not have.
func TestRedactPayloadRemovesEveryTextAndKeepsTheStructure(t *testing.T) {
	for typ, ev := range sampleEvents() {
		b, err := json.Marshal(ev.Payload)
		require.NoError(t, err)
		p, fields, err := events.RedactPayload(ev.Payload, nil)
		if err != nil {
			require.ErrorContains(t, err, "no redactable content", "%s", typ)
			continue
		}
		require.NotEmpty(t, fields)
		require.Equal(t, ev.Payload.EventType(), p.EventType())
		red := ev
		red.Payload = p
		require.NoError(t, red.Validate(), "%s: the redacted payload is valid", typ)
		out, err := json.Marshal(p)
		require.NoError(t, err)
		// Every string of 12+ characters of the original (texts, not ids or
		// names) is gone unless it is an id the structure keeps.
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, y := range x {
					if k == "id" || k == "tool_call_id" || k == "event_id" || k == "reply_to" || k == "time" || k == "reason" || k == "source_thread" || k == "source_tenant" || k == "name" || k == "agent" || k == "model" || k == "owner" {
						continue
					}
					walk(y)
				}
			case []any:
				for _, y := range x {
					walk(y)
				}
			case string:
				if len(x) >= 12 && x != events.RedactedText {
					require.NotContains(t, string(out), x, "%s still holds %q", typ, x)
				}
			}
		}
		var orig any
		require.NoError(t, json.Unmarshal(b, &orig))
		walk(orig)
	}
	_, _, err := events.RedactPayload(events.UserMessage{Content: events.Text("x")}, []string{"value"})
	require.ErrorContains(t, err, `no redactable field "value"`)
	p, _, err := events.RedactPayload(events.AssistantMessage{Content: events.Text("secret text"), ToolCalls: []events.ToolCall{{ID: "c1", Name: "f", Arguments: `{"card":"4111"}`}}}, []string{"tool_calls.arguments"})
	require.NoError(t, err)
	a := p.(events.AssistantMessage)
	require.Equal(t, "secret text", a.Content.String(), "only the named field")
	require.Equal(t, "c1", a.ToolCalls[0].ID)
	require.False(t, strings.Contains(a.ToolCalls[0].Arguments, "4111"))
}

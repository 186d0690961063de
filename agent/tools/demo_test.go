package tools_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/events"
)

func TestOfflineModelCallsTheBuiltinsByTheirNames(t *testing.T) {
	require.Equal(t, tools.ClockName, model.ToolClock)
	require.Equal(t, tools.CalculatorName, model.ToolCalculator)
	require.Equal(t, tools.KVGetName, model.ToolKVGet)
	require.Equal(t, tools.KVSetName, model.ToolKVSet)
}

// The demo loop a worker runs, without NATS: the offline model with the
// built-in tools answers every prompt from the tools' results, and every
// assistant turn and tool result is a valid event.
func TestOfflineModelWithBuiltinToolsEndToEnd(t *testing.T) {
	p, err := model.NewOffline(model.OfflineConfig{})
	require.NoError(t, err)
	reg := builtins(t)
	var offered []model.Tool
	for _, s := range reg.Specs() {
		offered = append(offered, model.Tool(s))
	}
	st := tools.NewMemState(nil)
	var history []events.Message

	ask := func(text string) string {
		t.Helper()
		history = append(history, events.Message{Role: events.RoleUser, Content: events.Text(text)})
		for range 4 {
			resp, err := p.Generate(context.Background(), model.Request{Thread: "demo", Messages: history, Tools: offered}, nil)
			require.NoError(t, err)
			requireValid(t, resp.AssistantMessage())
			am := resp.AssistantMessage()
			history = append(history, events.Message{Role: events.RoleAssistant, Content: am.Content, Reasoning: am.Reasoning,
				ToolCalls: am.ToolCalls, Model: am.Model, Usage: am.Usage})
			if len(resp.ToolCalls) == 0 {
				return resp.Content.String()
			}
			for _, c := range resp.ToolCalls {
				res := reg.Run(context.Background(), c, tools.Env{Thread: "demo", State: st, History: history})
				requireValid(t, res)
				history = append(history, events.Message{Role: events.RoleTool, ToolCallID: res.ToolCallID, Name: res.Name,
					Content: res.Content, IsError: res.IsError})
			}
		}
		t.Fatalf("no text answer to %q within 4 steps", text)
		return ""
	}

	require.Equal(t, "12*(3+4) = 84.", ask("What is 12*(3+4)?"))
	require.Equal(t, "The current time is 2026-01-02T02:04:05Z.", ask("What time is it?"))
	require.Equal(t, "Noted: my name is Ada.", ask("Remember my name is Ada."))
	require.Equal(t, "My name is Ada.", ask("What is my name?"))
	require.Equal(t, `I don't know what the capital of france is yet. Tell me with "remember the capital of france is ...".`,
		ask("What is the capital of France?"))
	require.Equal(t, `The calculator tool failed: tool "calculator" failed: division by zero at position 2.`, ask("what is 1/0"))
	require.Equal(t, "The current time is 2026-01-02T02:04:05Z. 2+2 = 4.", ask("What time is it? And what is 2+2?"))
	require.Equal(t, `You said: "Thanks!". This thread has 30 messages: 8 from you, 14 from me and 8 tool results.`, ask("Thanks!"))
	require.Equal(t, []events.StateSet{{Key: "my name", Value: []byte(`"Ada"`)}}, st.Changes())
}

func requireValid(t *testing.T, p events.Payload) {
	t.Helper()
	e := events.Event{ID: uuid.Must(uuid.NewV7()).String(), Type: p.EventType(), Tenant: "default", Thread: "demo",
		Time: time.Now(), SchemaVersion: events.SchemaVersion, Payload: p}
	require.NoError(t, e.Validate())
}

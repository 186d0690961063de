// Package agenttest holds the test agent shared by the tests of the agent
// workers, the chat service and the HTTP API: a tool set whose only tool
// is a fixed clock, which the offline model calls for "what time is it?",
// the agent "demo" that uses it ([Demo]), and a worker pool that runs
// until the test ends ([RunWorkers]).
package agenttest

import (
	"context"
	"encoding/json"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/events"
)

// ClockTime is what the clock tool answers.
const ClockTime = "2026-01-02T03:04:05Z"

// ClockTools is a worker.Tools with one tool, model.ToolClock, that answers
// [ClockTime]. It is stateless and safe for concurrent use.
type ClockTools struct{}

// Specs lists the clock tool.
func (ClockTools) Specs() []model.Tool {
	return []model.Tool{{Name: model.ToolClock, Description: "current time", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

// Run answers any call with [ClockTime].
func (ClockTools) Run(ctx context.Context, call events.ToolCall, env worker.Env) events.ToolResult {
	return events.ToolResult{ToolCallID: call.ID, Name: call.Name, Content: events.Text(ClockTime)}
}

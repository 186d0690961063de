package agentkit_test

import (
	"context"
	"sync/atomic"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/agentkit"
	"github.com/convlog/convlog/events"
)

// countingLog counts the reads made through it.
type countingLog struct {
	agentkit.Log
	gets atomic.Int64
}

func (l *countingLog) Get(ctx context.Context, tenant, thread string, opts ...client.GetOption) (*client.Thread, error) {
	l.gets.Add(1)
	return l.Log.Get(ctx, tenant, thread, opts...)
}

func text(s string) events.Content { return events.Text(s) }

func user(s string) events.Message {
	return events.Message{Role: events.RoleUser, Content: text(s)}
}

func assistant(agent, s string, calls ...events.ToolCall) events.Message {
	m := events.Message{Role: events.RoleAssistant, Agent: agent, ToolCalls: calls}
	if s != "" {
		m.Content = text(s)
	}
	return m
}

func call(id, name, args string) events.ToolCall {
	return events.ToolCall{ID: id, Name: name, Arguments: args}
}

func toolResult(id, s string) events.Message {
	return events.Message{Role: events.RoleTool, ToolCallID: id, Content: text(s)}
}

// contents returns "role:content" of each message, for compact comparisons.
func contents(ms []events.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Role) + ":" + m.Content.String()
	}
	return out
}

package worker

import (
	"context"
	"encoding/json"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/events"
)

// RegistryTools adapts a tools.Registry to [Tools]: its specs are offered
// to the model, and a tool's key-value state reads and writes go through
// the turn's [Env] (writes become state.set events of the same atomic step).
func RegistryTools(reg *tools.Registry) Tools { return registryTools{reg: reg} }

type registryTools struct{ reg *tools.Registry }

func (t registryTools) Specs() []model.Tool {
	specs := t.reg.Specs()
	out := make([]model.Tool, len(specs))
	for i, s := range specs {
		out[i] = model.Tool(s)
	}
	return out
}

func (t registryTools) Run(ctx context.Context, call events.ToolCall, env Env) events.ToolResult {
	return t.reg.Run(ctx, call, tools.Env{Tenant: env.Tenant(), Thread: env.Thread(), State: envState{env}})
}

// envState exposes the turn's state to tools.
type envState struct{ env Env }

func (s envState) Get(key string) (json.RawMessage, bool) { return s.env.Get(key) }
func (s envState) Set(key string, value json.RawMessage) error {
	s.env.Set(key, value)
	return nil
}

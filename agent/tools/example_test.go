package tools_test

import (
	"context"
	"fmt"
	"time"

	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/events"
)

// Running the built-in tools: results and error results.
func ExampleRegistry_Run() {
	reg, err := tools.NewRegistry(tools.Config{Timeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	if err := reg.Register(tools.Builtins(now)...); err != nil {
		panic(err)
	}
	state := tools.NewMemState(nil)
	env := tools.Env{Tenant: "default", Thread: "demo", State: state}
	for _, c := range []events.ToolCall{
		{ID: "c1", Name: "calculator", Arguments: `{"expression":"12*(3+4)"}`},
		{ID: "c2", Name: "clock", Arguments: `{}`},
		{ID: "c3", Name: "kv_set", Arguments: `{"key":"my name","value":"Ada"}`},
		{ID: "c4", Name: "calculator", Arguments: `{"expression":"1/0"}`},
		{ID: "c5", Name: "weather", Arguments: `{}`},
	} {
		res := reg.Run(context.Background(), c, env)
		fmt.Printf("%s error=%v %s\n", res.ToolCallID, res.IsError, res.Content.String())
	}
	fmt.Printf("state changes: %s=%s\n", state.Changes()[0].Key, state.Changes()[0].Value)
	// Output:
	// c1 error=false 84
	// c2 error=false 2026-01-02T03:04:05Z
	// c3 error=false {"key":"my name","stored":true}
	// c4 error=true tool "calculator" failed: division by zero at position 2
	// c5 error=true unknown tool "weather" (available: calculator, clock, kv_get, kv_set)
	// state changes: my name="Ada"
}

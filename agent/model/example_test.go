package model_test

import (
	"context"
	"fmt"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/events"
)

// A worker's loop with the offline model: the model calls a tool, the
// worker appends the result, the model answers from it.
func ExampleOffline() {
	p, err := model.NewOffline(model.OfflineConfig{})
	if err != nil {
		panic(err)
	}
	req := model.Request{
		Thread:   "demo",
		Messages: []events.Message{{Role: events.RoleUser, Content: events.Text("What is 12*(3+4)?")}},
		Tools:    []model.Tool{{Name: "calculator"}},
	}
	var streamed model.Accumulator
	resp, err := p.Generate(context.Background(), req, streamed.Add)
	if err != nil {
		panic(err)
	}
	call := resp.ToolCalls[0]
	fmt.Println("reasoning:", resp.Reasoning)
	fmt.Println("call:", call.ID, call.Name, call.Arguments)

	am := resp.AssistantMessage()
	req.Messages = append(req.Messages,
		events.Message{Role: events.RoleAssistant, Content: am.Content, ToolCalls: am.ToolCalls},
		events.Message{Role: events.RoleTool, ToolCallID: call.ID, Content: events.Text("84")})
	resp, err = p.Generate(context.Background(), req, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("answer:", resp.Content.String())
	// Output:
	// reasoning: The user asked me to compute 12*(3+4), so I call calculator.
	// call: call_1_0 calculator {"expression":"12*(3+4)"}
	// answer: 12*(3+4) = 84.
}

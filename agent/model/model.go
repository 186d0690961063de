package model

import (
	"context"
	"encoding/json"

	"github.com/convlog/convlog/events"
)

// Provider generates one assistant turn.
//
// Generate sends req to the model and returns the complete assistant turn.
// While generating it calls onDelta (which may be nil) with each streamed
// piece, from the goroutine that called Generate, in order, never after
// Generate has returned; onDelta must not block for long, since it holds up
// the stream.
//
// Errors: when ctx is done while Generate runs, the error is ctx.Err()
// itself (match with errors.Is) and no delta follows the cancellation. Other errors are provider specific and
// wrapped with what failed; [IsRetryable] says whether calling again with
// the same request may succeed. A Response is only valid when err is nil.
//
// Concurrency: a worker calls Generate concurrently for different threads;
// every implementation is safe for concurrent use and keeps no per-thread
// state between calls (everything it needs is in the Request).
type Provider interface {
	Generate(ctx context.Context, req Request, onDelta func(Delta)) (Response, error)
}

// Request is what a provider needs to produce the next assistant turn.
type Request struct {
	// Tenant and Thread identify the conversation. Providers use them in
	// errors and logs only; they are not sent to the model.
	Tenant string
	Thread string
	// Agent is the name of the agent the turn is generated for (for errors
	// and logs).
	Agent string
	// Model overrides the provider's configured model name; "" uses it.
	Model string
	// SystemPrompt is the agent's or thread's system prompt, sent before the
	// history; "" sends none.
	SystemPrompt string
	// Messages is the projected history, oldest first, as a chat API takes
	// it: user, assistant (with tool calls) and tool messages, and system
	// messages only where a writer restored one. Providers do not modify it.
	Messages []events.Message
	// Tools are the tools the model may call; nil offers none.
	Tools []Tool
}

// Tool describes one callable tool to the model.
//
// Its fields are those of tools.Spec, in the same order and with the same
// types, so a worker converts with model.Tool(spec).
type Tool struct {
	// Name is the function name the model calls.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON Schema of the arguments object; nil or empty
	// means an object with no properties.
	Parameters json.RawMessage
}

// Delta is one streamed piece of an assistant turn. Exactly one field is
// set. Its JSON form ({"content": "..."}, {"reasoning": "..."} or
// {"tool_call": {...}}) is what workers publish on the live delta subject.
type Delta struct {
	// Content is the next piece of the answer text.
	Content string `json:"content,omitempty"`
	// Reasoning is the next piece of the model's reasoning text.
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCall is a fragment of one tool call.
	ToolCall *ToolCallDelta `json:"tool_call,omitempty"`
}

// ToolCallDelta is a fragment of the tool call at Index (0-based position
// in the turn's tool calls). The first fragment of a call carries its ID and
// Name; Arguments pieces are concatenated in order.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// Response is a complete assistant turn.
type Response struct {
	// Content is the answer text: null on a turn that only calls tools,
	// otherwise text (possibly empty) or, for replayed turns, parts.
	Content events.Content
	// Reasoning is the model's reasoning text, "" if none.
	Reasoning string
	// ToolCalls are the calls the model made, in order. Every call has a
	// non-empty id (unique within the turn), a name and arguments that are
	// well-formed JSON.
	ToolCalls []events.ToolCall
	// Model is the model that answered, as the provider reported it.
	Model string
	// Usage is the token accounting, nil when the provider reported none.
	Usage *events.Usage
	// FinishReason is why generation stopped: "stop", "tool_calls",
	// "length", "content_filter", or what the provider said.
	FinishReason string
}

// AssistantMessage returns the payload of the durable event for r. The
// worker fills in Agent and ReplyTo.
func (r Response) AssistantMessage() events.AssistantMessage {
	return events.AssistantMessage{Content: r.Content, Reasoning: r.Reasoning, ToolCalls: r.ToolCalls,
		Model: r.Model, Usage: r.Usage}
}

package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/convlog/convlog/events"
)

// Runner answers tool calls. [Registry] and [Replay] implement it.
//
// Run always returns a result for call (ToolCallID = call.ID, Name =
// call.Name); failures are results with IsError set, never errors or
// panics. When ctx is done the result says the call was cancelled; the
// worker should then abandon the turn rather than append it.
//
// Run is safe for concurrent use: a worker may run the calls of one turn in
// parallel and serve many threads at once.
type Runner interface {
	Run(ctx context.Context, call events.ToolCall, env Env) events.ToolResult
}

// Handler runs one tool call. args are the call's arguments, valid against
// the tool's schema ("{}" when the model sent none). The returned string
// is the result content. A returned error becomes an error result whose
// content names the tool and says the error. A handler must return when
// ctx is done (the per-tool timeout cancels it).
type Handler func(ctx context.Context, args json.RawMessage, env Env) (string, error)

// Tool is one callable tool.
type Tool struct {
	// Name is what the model calls: 1..64 of [A-Za-z0-9_-] (the
	// chat-completions rule).
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON Schema (draft 2020-12) of the arguments, a JSON
	// object; nil means {"type":"object","properties":{}}. Remote $refs are
	// not loaded.
	Parameters json.RawMessage
	// Timeout bounds one call; 0 uses [Config.Timeout].
	Timeout time.Duration
	// Handler runs the call. Required.
	Handler Handler
}

// Spec describes a tool to a model. Its fields match model.Tool in order
// and type, so a worker converts with model.Tool(spec).
type Spec struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Env is what a tool call may use besides its arguments. The zero value is
// valid: tools that need State or History report their absence as an
// error result.
type Env struct {
	// Tenant, Thread and Agent identify the conversation and the agent.
	Tenant string
	Thread string
	Agent  string
	// State is the thread's key-value state (kv_get, kv_set). nil: none.
	State State
	// History is the thread's projected history, either up to and excluding
	// the assistant turn that made the call, or including it and the
	// results appended so far. Only [Replay] uses it.
	History []events.Message
}

// State is the thread's key-value state, provided by the worker.
//
// Values are JSON. Set records a change the worker will append as a
// state.set event with the turn (see [MemState]); it returns an error when
// the key or value is not acceptable. Implementations must be safe for
// concurrent use when the worker runs calls in parallel.
type State interface {
	Get(key string) (value json.RawMessage, ok bool)
	Set(key string, value json.RawMessage) error
}

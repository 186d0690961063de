// Package tools runs the tool calls a model makes, for convlog's agent
// workers.
//
// # Model
//
// A [Registry] holds tools, each a [Tool]: a name, a description, a JSON Schema for the
// arguments (draft 2020-12) and a [Handler]. The worker offers the
// registry's [Registry.Specs] to the model, and for each tool call the
// model makes it calls [Registry.Run], which always returns an
// events.ToolResult answering the call: the handler's output, or, with
// IsError set and a message that says what went wrong, an unknown tool,
// arguments that are not JSON or break the schema, a handler error, a
// panic, a per-tool timeout or cancellation. A tool never crashes a turn.
//
// Built-in tools for the demo ([Builtins]): clock (current UTC time,
// RFC 3339), calculator (arithmetic on decimals with + - * / and
// parentheses), kv_get and kv_set (the thread's key-value state, reached
// through the [State] the worker passes in [Env]).
//
// [Replay] is a [Runner] that answers a call with the result recorded in a
// conversation, found by position (recorded threads reuse call ids).
//
// This package depends on events, jsonschema and the recording matcher in
// agent/internal only; it never imports NATS.
package tools

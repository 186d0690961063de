// Package model is the model-provider side of convlog's agent workers: one
// small interface, [Provider], and three implementations.
//
//   - [OpenAI]: any OpenAI-compatible chat-completions server (OpenAI, vLLM,
//     Ollama, LM Studio) through the official openai-go SDK, streaming, with
//     tool calls.
//   - [Offline]: a deterministic built-in model with no network, the default
//     of `agentd serve`. It calls the demo tools (clock, calculator, kv_get,
//     kv_set) so a demo shows tool calls, results and matching end to end.
//   - [Replay]: plays back the assistant turns of a recorded conversation.
//
// # Model
//
// A worker builds a [Request] from the thread (system prompt, projected
// history, offered tools) and calls [Provider.Generate]. While the model
// generates, Generate passes each [Delta] (a content, reasoning or
// tool-call fragment) to the callback, which the worker forwards to the
// thread's live delta subject. The returned [Response] is the complete
// assistant turn; its [Response.AssistantMessage] is the payload of the
// durable event. Deltas are provisional: a failed or retried Generate
// streams again from the start.
//
// Folding every delta of one Generate call with an [Accumulator] gives
// exactly the Response's text, reasoning and tool calls; the conformance
// suite in agent/model/modeltest checks this for every provider.
//
// This package depends on events, the openai-go SDK and the recording
// matcher in agent/internal only; it never imports NATS.
package model

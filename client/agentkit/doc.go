// Package agentkit offers Inngest AgentKit's history adapter
// (HistoryConfig) and state (state.kv) on a convlog thread, so an agent
// written against AgentKit's model keeps its conversations in the log.
//
// Which framework: Inngest AgentKit (@inngest/agent-kit) is TypeScript;
// no TypeScript program can call this package. It is a Go mirror of
// AgentKit's HistoryConfig contract for Go programs that follow AgentKit's
// model. Its InferenceResult is not AgentKit 0.13's AgentResult JSON: that
// has agentName (here agent), typed output messages ({type: "text"} and
// {type: "tool_call"}, here events.Message) and a checksum, so the two do
// not exchange serialised results. TypeScript AgentKit networks use the
// npm package @convlog/agentkit (js/packages/agentkit), a real
// HistoryConfig over the REST API that maps AgentResult exactly (same
// checksum after a reload), tested with @inngest/agent-kit 0.13.
//
// # HistoryConfig
//
// AgentKit calls four optional methods of a history adapter; [History] has
// them all:
//
//	AgentKit                          convlog
//	createThread({state, input})      History.CreateThread: appends thread.created
//	get({threadId})                   History.Get: the thread's history as []InferenceResult
//	appendUserMessage({userMessage})  History.AppendUserMessage: one message.user event
//	appendResults({newResults})       History.AppendResults: the results' assistant
//	                                  messages and tool results, one atomic append
//	appendResults({..., userMessage}) History.AppendTurn: the user message and the
//	                                  results, one atomic append
//
// [History.Begin] is what AgentKit does around them when a run starts. The
// thread id comes, in order of precedence, from the caller (an explicit id:
// resume that conversation, or start one under that id), from
// Config.CreateThread (AgentKit's createThread hook: the adapter asks the
// application for an id), or from the client's generator (a UUIDv7, where
// AgentKit generates a UUID); [ThreadRef.Source] says which. When the
// caller passes the history it already holds (AgentKit's client-provided
// history), Begin returns it without reading the thread.
//
// A missing thread is not an error for Get (AgentKit: "handle missing
// threads gracefully"): it returns no results. Reads are consistent: a run
// sees every event acknowledged before it, its own appends included. There
// is no index to create (AgentKit: "index thread_id and created_at"): a
// thread is one subject of the stream.
//
// # InferenceResult
//
// AgentKit's history is a list of InferenceResults (agent, input, prompt,
// history, output, toolCalls, raw). convlog's history is a list of
// messages; [Results] maps one to the other: one result per assistant
// message, with the user message it answers as input and prompt, the
// messages before it as history, and the tool results answering its calls
// as toolCalls. Writing goes the other way: each output message is an
// assistant message event followed by the tool results of its calls,
// appended atomically, so a reader never sees half a turn and the tool
// results are checked against the calls (docs/design.md invariant 5).
//
// Appends are made with client.AnyVersion() unless the caller passes
// client.ExpectVersion(v) (optimistic concurrency: several services
// writing one thread get a *client.ConflictError instead of an
// interleaving).
//
// Threads the History creates have replies off (events.RepliesOff) unless
// Config.Thread says otherwise: AgentKit runs the agent, so agentd's
// workers must not answer its threads as well.
//
// # State
//
// AgentKit's state.kv (set, get, delete, has) lives for one network run.
// [State] keeps it on the thread instead: set and delete are state.set and
// state.deleted events, reads come from the thread's projected key-value
// state, so the values outlive the run, are shared by every service on the
// thread, are carried into forks, and are in the audit log. [GetAs] decodes
// a value into a Go type.
package agentkit

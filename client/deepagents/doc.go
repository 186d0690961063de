// Package deepagents offers DeepAgents' AgentCheckpointer on convlog: the
// short-term memory that lets a follow-up run of an agent pick up where the
// previous one left off.
//
// Which framework: DeepAgents' checkpointer protocol (seed, Swift); no
// Swift program can call this package. It is a Go mirror for Go programs
// that follow it. LangChain's JavaScript deepagents persists through a
// LangGraph checkpointer, which convlog serves over its REST API (js/).
//
// # The seed's protocol
//
//	DeepAgents                                   convlog
//	load(threadId) -> [AgentMessage]             Checkpointer.Load -> []events.Message
//	save(threadId, messages)                     Checkpointer.Save
//	InMemoryCheckpointer.clear(threadId)         Checkpointer.Clear
//	InMemoryCheckpointer                         InMemoryCheckpointer
//	a durable store (disk, SQLite, remote KV)    LogCheckpointer
//	threadId nil: the run is stateless           threadID "": Load returns nil, Save and Clear do nothing
//
// An agent run calls Load(threadID), prepends the messages to its input,
// runs (middleware may summarize the combined history), and calls
// Save(threadID, updated) with the full history. [Checkpointer] states the
// contract every implementation keeps; package checkpointertest checks it
// (checkpointertest.Run), and both implementations here pass it.
//
// AgentMessage maps to [events.Message]: every role (user, assistant,
// tool, system), every content block (text, images by URL or base64,
// files: [events.Part]), tool calls and results. A saved history loads
// back exactly; histories that could not ([Validate]: a field its role
// does not store, a tool result answering no pending call) are refused
// with [ErrInvalidHistory] instead of being stored truncated.
//
// # What Save records
//
// The seed's checkpointer overwrites the stored array. [LogCheckpointer]
// never rewrites anything (docs/design.md invariant 1): it compares the saved
// history with the thread's projected history and appends the events that
// turn one into the other, in one atomic append, conditional on the
// version it read. The rule, first match wins:
//
//  1. Same history: nothing is appended.
//  2. The saved history extends the stored one (the usual save after a
//     run): only the new messages are appended, as message.user,
//     message.assistant and tool.result events, so the log has one event
//     per message, tool results are checked against their calls, and
//     watchers see the run's messages.
//  3. The saved history is empty: thread.reset.
//  4. The saved history is a summary followed by a suffix of the stored
//     history, then possibly new messages (what SummarizationMiddleware
//     produces: older messages replaced by one summary turn): a
//     thread.compacted that replaces the messages before the suffix with
//     the summary, followed by the new messages. A summary is a user or
//     assistant message with content and no other field; the suffix keeps
//     at least one stored message and must start where the fold can cut
//     (not on a tool result, not inside a restored block, not cutting off
//     a pending call); of several possible suffixes the longest is kept.
//  5. Anything else (an edited or regenerated message, a history that
//     starts over, a system message among the new messages): a
//     thread.restored carrying the whole saved history.
//
// In every case the projected history afterwards is exactly the saved
// one, and the earlier events stay in the log, so the record of what the
// agent saw before a summarization or rewrite is never lost. Rules 2 and
// 4 keep the cost of a save proportional to what changed; a restore
// carries the whole history in one event, so a history larger than the
// server's max payload (1 MiB by default) can only be saved as an
// extension or compaction (*client.TooLargeError otherwise).
//
// # Concurrency
//
// Save follows the seed: the saved history wins. If another writer changes
// the thread between Save's read and its append, Save reads and plans
// again, so the thread is never an interleaving of both, but the other
// writer's messages are superseded (they stay in the log). Agents that
// share a thread with other writers use [VersionedCheckpointer]
// (LoadVersion, then SaveVersion), which returns a *client.ConflictError
// instead.
//
// Clear is a thread.reset, not an erasure: the user starts a fresh
// conversation, and the log keeps the record of the old one. Erasure of a
// thread (client.Erase) is a separate, explicit operation.
//
// Threads that Save creates have replies off unless LogConfig.Thread says
// otherwise: the agent answers its own threads, not agentd's workers.
package deepagents

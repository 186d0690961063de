// Package chat is convlog's OpenAI-compatible chat service without HTTP:
// one chat-completions turn of a conversation whose history the client
// resends, planned against the conversation's thread, appended, and
// answered by the agent workers. agentd/httpapi serves it at
// POST /v1/chat/completions; anything else can drive it with a
// *client.Client.
//
// A [Turn] is a parsed request: the agent, the system prompt, the
// non-system messages with their positions in the request, and the
// conversation key (client.ResolveConvKey) that names the thread.
// [Service.Start] reads the thread, plans what to append (the divergence
// policy below), watches the thread, appends the plan atomically
// (conditional on the version read; a conflict with a concurrent turn
// re-reads and re-plans) and returns an [Answer], which follows the thread
// until the agent's final step for the user message being answered: the
// durable assistant messages that reply to it (one per step; the last has
// no tool calls), the tool results between them, and, when the turn asks
// for them, the live deltas of the steps being generated ([Piece]).
//
// Failures the client can act on are *[Error] values with a [Code] and the
// request field, message index and thread sequence they concern; an API
// maps them to its own errors (agentd/httpapi: problem details).
//
// # Divergence policy
//
// OpenAI clients resend the whole history on every turn. The request's
// messages (without the leading system message) are compared with the
// thread's history, both reduced to user messages (by text) and answer
// blocks (consecutive assistant and tool messages, by the text of their
// assistant contents; tool calls and results are not compared, because
// clients keep them in different shapes):
//
//  1. The thread's history is a prefix of the request: the new suffix is
//     appended (user messages, and tool results for pending calls when the
//     client ran tools). A changed system prompt is recorded with
//     thread.updated in the same atomic append. If nothing is new and the
//     thread still waits for its agent, the turn waits for that answer.
//  2. The request is the thread's history up to a user message the thread
//     has already answered, and nothing else: a retry. The stored answer is
//     returned; nothing is appended ([Answer.Replayed]).
//  3. The request holds only user messages that do not continue the
//     history: the client sends just the new message; they are appended.
//  4. Otherwise the histories diverge (an edited earlier message, a
//     different answer, a regenerated turn): the turn is refused with
//     [CodeHistoryDiverged], naming the first differing message and the
//     thread's sequence it was compared with. The thread is the record and
//     is never rewritten or silently forked.
//  5. Current first: before rule 4 refuses a request, the order Inngest
//     AgentKit 0.13 sends, [system, current user message, ...history], is
//     recognised: the first message is a user message and the rest is the
//     thread's whole history: it is appended (as in rule 1); the rest is
//     the history up to that very user message, stored already: a retry,
//     which waits for or replays its answer (as in rules 1 and 2), unless
//     the request's last answer block holds tool results for the calls the
//     stored answer left pending (this turn's tool call and its result,
//     which read as part of the history's last answer block): those results
//     are appended (as in rule 1) and the answer goes on.
//     Otherwise the request diverges (rule 4), naming the first differing
//     message in the request's own order.
//
// The service is safe for concurrent use; an Answer belongs to one
// goroutine.
package chat

// Package ag2b offers AG2B's History (getSnapshot, subscribe, reset,
// restore) on a convlog thread, driven by the live log.
//
// Which framework: AG2B (@ag2b/core) is TypeScript and not on the npm
// registry; no TypeScript program can call this package. It is a Go
// mirror of AG2B's History surface (seed 004) for Go programs; a
// TypeScript AG2B agent reaches convlog through a plugin (agent.use) on the
// REST API (js/, @convlog/client), since AG2B's Agent creates its History
// itself.
//
// # The seed's interface
//
//	AG2B                                   convlog
//	history.getSnapshot(): ChatMessage[]   History.Snapshot() []events.Message
//	history.subscribe(listener): unsub     History.Subscribe(listener func()) (unsubscribe func())
//	history.reset()                        History.Reset(ctx): a thread.reset event
//	history.restore(messages)              History.Restore(ctx, messages): a thread.restored event
//	UserMessage / AssistantMessage /       events.Message with Role user / assistant / tool
//	ToolMessage                            (AssistantToolCall: events.ToolCall; arguments are
//	                                       the raw JSON text; ToolMessage.id: ToolCallID)
//	system prompt kept on AgentConfig      the thread's SystemPrompt attribute, not a message
//
// [New] loads the thread and follows it with [client.Client.Watch]; every
// event, whoever appended it, is folded into a local projection by the
// same deterministic fold the projector runs (docs/design.md invariant 8). So
// Snapshot reflects changes made by other services and other clients, not
// only by this process, and listeners fire for them too. Snapshot returns
// the same slice between changes (AG2B: "the same reference between
// mutations"), so a UI can compare snapshots by identity. A History owns
// goroutines (the watch, the fold, one per listener): [History.Close]
// stops them.
//
// Listeners are called after every change, including reset and restore,
// each on its own goroutine; changes arriving while a listener runs are
// coalesced into one further call, so a slow listener never stalls the
// log or the other listeners (the seed's listener reads getSnapshot, which
// always returns the latest history). Reset and Restore return once the
// History has folded their event, so Snapshot reflects them right away.
//
// # Reset or restore during a turn in flight
//
// AG2B calls a reset or restore while a chat is in flight undefined
// behaviour: the loop's next iteration reads a mutated snapshot. With
// convlog it is well defined, because a reset is an event at one point of
// the thread's total order and writers append conditionally (docs/design.md
// invariant 3):
//
//   - A worker that read the thread at version v before the reset and
//     appends its turn with client.ExpectVersion(v) (agentd's workers do)
//     gets a *client.ConflictError and nothing is stored. It reloads, finds
//     that the user message it was answering is gone, and drops the turn:
//     nothing of the old conversation leaks into the new one.
//   - A writer appending with client.AnyVersion() (a tool runner posting a
//     result) is checked against the history after the reset: the call its
//     result answers is no longer pending, so the append is rejected
//     (*fold.RejectionError, code tool_call_not_pending) and nothing
//     is stored. An AnyVersion event that does not depend on the history
//     (a user message, a state change) lands after the reset, as it would
//     after any other event.
//   - Events acknowledged before the reset come before it in the log and
//     are cleared with the rest of the history (they stay in the log).
//   - A restore works the same way; after reloading, a worker answers the
//     restored history if it ends with an unanswered user message.
//
// A snapshot is always the fold of a prefix of the log, never a mix of
// before and after a reset.
package ag2b

// Package fold is convlog's fold: the pure, deterministic function that
// turns a thread's events, in stream order, into the [State] readers get,
// with the rules that keep a history valid (tool-call matching, pending
// policy, restores, forks, compactions, erasure) and the rejection codes
// of the events that would break them. It imports events only and no
// NATS package: the projector (package projector, which stores its
// results with package snapstore), client reads and writes and replay all
// fold with it.
//
// [Apply] folds one stored event into a [State]; [ApplyBytes] first decodes
// the bytes found on a thread's subject; [Check] gives the verdict without
// changing anything (writers use it before they publish). The same events
// always give the same State, in the projector, in client reads and in
// replay (docs/design.md invariant 8). An event that breaks an invariant, cannot
// be decoded, has an unknown type or a newer schema version is recorded as
// a [Rejection] (sequence, event id, [Code], reason) and skipped; the fold
// never panics and the projector never stops on a bad event (invariant 6).
//
// Tool results are matched against the calls pending at that point, not
// against every id ever seen: real transcripts reuse call ids once the
// first call was answered. A user or assistant message that arrives while
// calls are pending is handled by the thread's [events.PendingPolicy]:
// rejected (the default), or the pending calls are closed with synthetic
// "cancelled" tool results placed before it, so the history stays valid
// input for the OpenAI and Anthropic chat formats either way.
//
// Message sequences never decrease along a history: a message carries the
// sequence of the event that produced it (restored and forked messages the
// sequence of that event, a synthetic cancelled result the sequence of the
// message that caused it), and a compaction summary carries the last
// sequence it summarizes (UpToSeq).
//
// # Framework checkpoints
//
// An agent framework's checkpoint (events.CheckpointSaved: LangGraph's
// put) and a task's pending writes (events.CheckpointWrites) are events
// of the thread. The fold keeps them out of the history and the
// key-value state: it indexes the newest [MaxCheckpointsIndexed]
// checkpoints of the thread's lifetime in [State].Checkpoints (namespace,
// id, parent, the sequences of the checkpoint's event and of its writes),
// so a checkpoint read is a read of those events and the snapshot's head
// stays small however many checkpoints the thread holds; older ones are
// read from the log.
//
// # Windows
//
// A State may be a window: Messages holds only the newest messages and
// Base counts the ones before (the snapshot store keeps the rest in
// chunks). [Apply] works on a window and returns [ErrNeedHistory] when an
// event needs older messages; [State.Renumber] (for a fork or import that
// rewrites sequences), [ApplyValidated] (for events already checked by
// [events.Validate]) and [State.Clone0] (a copy without messages, to
// fill with a window) are the fold API that window keepers use.
package fold

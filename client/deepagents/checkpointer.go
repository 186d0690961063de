package deepagents

import (
	"context"

	"github.com/convlog/convlog/events"
)

// Checkpointer is DeepAgents' AgentCheckpointer: it keeps the history of a
// conversation between runs of an agent, keyed by a thread id.
//
// The contract, for every implementation (checkpointertest.Run checks it):
//   - Load returns the stored history, or an empty non-nil slice for a
//     thread it does not know (a cache miss is not an error). The slice is
//     the caller's to modify.
//   - Save stores the full history handed to it (after every run);
//     afterwards Load returns exactly messages: every role, content block
//     (text, images by URL or base64, files), tool call and result. The
//     log fields of [events.Message] (Seq, EventID, Time, Synthetic) are
//     not part of a history: Save ignores them and Load returns them zero.
//     Save of a history that is not valid (see [ErrInvalidHistory]) stores
//     nothing. Save of an empty history for an unknown thread stores
//     nothing.
//   - Clear discards the thread's history (the host starts a fresh
//     conversation); Load then returns an empty slice.
//   - An empty thread id means a stateless run: Load returns nil, Save and
//     Clear do nothing, and none of them fails.
//
// Implementations are safe for concurrent use. Saves of one thread from
// several goroutines or processes are applied one after the other (the
// last one wins); use [VersionedCheckpointer] to detect them instead.
type Checkpointer interface {
	// Load returns the history of threadID (empty when unknown; nil for
	// an empty id).
	Load(ctx context.Context, threadID string) ([]events.Message, error)
	// Save stores messages as the history of threadID.
	Save(ctx context.Context, threadID string, messages []events.Message) error
	// Clear discards the history of threadID.
	Clear(ctx context.Context, threadID string) error
}

// VersionedCheckpointer is a Checkpointer that can make a save conditional
// on the history the caller loaded: optimistic concurrency for agents that
// share a thread with other writers (docs/design.md invariant 3). Both
// implementations of this package have it; check with a type assertion.
type VersionedCheckpointer interface {
	Checkpointer
	// LoadVersion is Load plus the thread's version: 0 for an unknown
	// thread, else a number that changes whenever the thread changes.
	LoadVersion(ctx context.Context, threadID string) ([]events.Message, uint64, error)
	// SaveVersion is Save, made only if the thread is still at version
	// (as returned by LoadVersion or a previous SaveVersion); it returns
	// the new version (the same one when the history was already equal
	// to messages). Otherwise it stores nothing and returns a
	// *client.ConflictError (errors.Is client.ErrConflict): load again,
	// re-run, save again. An empty thread id returns (0, nil).
	SaveVersion(ctx context.Context, threadID string, messages []events.Message, version uint64) (uint64, error)
}

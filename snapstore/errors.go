package snapstore

import "errors"

// ErrNoSnapshot is returned (wrapped) by [Store.Load] and
// [Store.LoadHead] when the thread has no snapshot: it does not exist,
// or the projector has not reached its first event yet. A writer that holds
// a sequence can fold the thread from the stream instead.
var ErrNoSnapshot = errors.New("snapstore: no snapshot")

// ErrCorrupt is returned (wrapped) when a head or chunk in the snapshot
// bucket cannot be decoded or does not match its head. It is not retryable;
// deleting the thread's head makes the projector rebuild it from the stream.
var ErrCorrupt = errors.New("snapstore: corrupt snapshot")

// ErrSnapshotChanged is returned (wrapped) by [Store.Load] when the
// thread's history was replaced (reset, restore, compaction) several times
// while it was being read, so no consistent version could be read. It is
// retryable.
var ErrSnapshotChanged = errors.New("snapstore: snapshot changed while it was read")

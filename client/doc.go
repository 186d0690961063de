// Package client is the Go library services use to share conversations
// stored in convlog: append with optimistic concurrency and idempotent
// retries, read (snapshot, consistent, as of a sequence or time), watch
// live, list, fork, soft-delete, erase, import and export. The seed
// frameworks' interfaces are in the sub-packages agentkit, deepagents and
// ag2b; the Agenticore conversation-key resolver is [ResolveConvKey].
//
// # Model
//
// A thread is the subject "<prefix>.<tenant>.<thread>" of the stream
// (events.Subjects); its version is the stream sequence of its last event
// (0 = no events). Every write names the version it was decided on
// ([ExpectVersion]) or asks the client to apply it at whatever version the
// thread has ([AnyVersion]); a mismatch is a *ConflictError carrying the
// expected and actual versions, never a silent merge (docs/design.md invariant 3).
//
// Before publishing, [Client.Append] validates each event on its own and
// folds it onto the thread's state with the projector's fold
// (fold.Check), so an event the projection would reject is refused
// synchronously with the same verdict (invariant 6). The event id is the
// NATS de-duplication key (Nats-Msg-Id); retries reuse it, and the client
// also finds an earlier copy by reading the thread, so a retry never
// stores a second copy, on single-replica streams (where the server checks
// the version before the id) and after the server's duplicate window
// (invariant 4). Several events are one JetStream atomic batch: all or
// nothing.
//
// Reads come from the projector's KV snapshot ([Client.Get]) or, with
// [Consistent], from the snapshot plus the log's tail, which includes every
// acknowledged event (invariant 7). [AtSeq] and [AsOf] fold the log up to a
// point (replay). [Client.Watch] follows a thread through an ordered
// consumer and resumes after any sequence with no gap and no duplicate.
//
// The log is read in pages of batched direct gets, each read-isolated from
// writes (an atomic batch is seen whole); the next page is read while the
// caller folds the current one. A read with many events left after its
// first page (Config.ConsumerReadThreshold) reads them through an
// ephemeral consumer, bounded by the subject's last sequence when it
// starts, about three times cheaper per event for the server, and falls
// back to pages whenever the consumer cannot be used.
//
// # Concurrency
//
// A Client is safe for concurrent use. It keeps a small cache of recent
// thread states (a few newest messages each) so that a writer appending at
// the version it last wrote validates without a read.
package client

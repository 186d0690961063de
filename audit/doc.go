// Package audit makes convlog's log provable: a hash chain per thread
// subject, signed checkpoints of the chain heads stored in the stream
// itself, and a verifier that re-reads both and names the first sequence
// where anything differs (docs/design.md, "Trust at the boundaries"; the
// construction, for auditors in other languages, is docs/audit.md).
//
// # The chain
//
// Every stored message of a thread subject "<prefix>.<tenant>.<thread>"
// has a leaf hash ([Leaf]: SHA-256 over its stream sequence, store time,
// subject, content headers and body, exactly as JetStream stored them), and
// the subject's chain head after it is [Next](previous head, leaf),
// starting from the zero hash. Each lifetime of a reused thread id, an
// erasure marker and any stray message written past convlog are links
// like any other: the chain is of what the stream holds, not of what the
// fold accepted.
//
// # Where it is computed, and why
//
// By the [Checkpointer], from the stream, not by the writers: the leaf
// needs the sequence and store time that only the server assigns, a
// writer would need the previous head (another round trip on every
// append, and a race between writers that OCC already settles), and a
// service in another language that appends by following schemas/README.md
// would have to implement it. So nothing on the append path changes, and
// every message stored in the stream is chained, whoever wrote it.
//
// # Checkpoints
//
// The checkpointer (one per stream; agentd serve runs it unless
// --audit=false) reads the thread subjects in stream order with an
// ordered consumer and, at most [DefaultInterval] after the first event it
// has not yet covered, or sooner when [DefaultMaxBytes] of leaves are
// pending, publishes a [Checkpoint] on [CheckpointSubject]: every thread
// that changed, with its head before and after and the leaf of each new
// message, signed with Ed25519 ([HeaderSignature]). Checkpoints form their
// own chain (Prev: the previous body's SHA-256) and are published with an
// expected last subject sequence, so two checkpointers cannot fork it. A
// checkpoint costs about 80 bytes per event it covers, in the same stream.
// A message altered after it was checkpointed, deleted, or written into a
// covered range is caught by Verify; one altered in the cadence's window
// (about a second) before its checkpoint is signed as it then was. Events
// no checkpoint covers, in a gap between checkpoints or older than the
// cadence plus a grace after the newest, are reported too
// ([KindUncovered]), so removing checkpoints does not verify. What the
// chain cannot tell is who wrote a message: whoever may publish on a
// thread subject (the server's own credentials included) gets it signed
// like any other; docs/audit.md says what closes that.
//
// # Verify
//
// [Verify] reads every checkpoint (checking signature, Prev, From, and
// that each thread's heads follow from its leaves and the previous head)
// and merges their leaves, by sequence, with the stored messages of the
// scope (the stream, a tenant, a thread), in one pass. A client or
// auditor that keeps a report's LastCheckpoint can pass it as
// [VerifyOptions.Anchor] later: a log rewritten since (checkpoints
// included) then fails even if signed by a stolen key.
//
// # Errors
//
// What a verification finds is data, not an error: every difference is a
// [Problem] in the [Report], with its kind ([KindAltered], [KindMissing],
// ...), so one run names them all. An
// error from [Verify] means the reading stopped (NATS, ctx, bad options).
// The one sentinel, [ErrBadSignature], is [Open]'s, for a caller that
// checks a single checkpoint.
//
// # State
//
// The checkpointer keeps each thread subject's last checkpointed head in a
// KV bucket ([DefaultHeadsBucket], key "h.<subject>") with its position
// (the last checkpoint it applied), and at most Config.CacheThreads heads
// in memory: a start reads only the checkpoints after the position (all of
// them when the bucket is new or lost), and memory does not grow with the
// number of threads. Verify holds one head per thread of its scope and
// one checkpoint's leaves. An erased thread's leaves stay in the
// checkpoints (hashes, not content), so the rest of the stream still
// verifies and the report lists the erasure.
package audit

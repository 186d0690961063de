// Package projector is the runner: it consumes the event stream with a
// durable consumer shared by every instance, folds each thread's new
// events with package fold and writes the results through package
// snapstore (see its doc for the snapshot layout and the write order
// that keeps every crash safe), so that readers find each thread's
// snapshot and index entry up to date.
//
// # Runner and several instances
//
// Every [Projector] instance pulls from the same durable consumer
// (Config.Durable, default "convlog-projector"); the server spreads the
// messages over the instances, and each instance spreads threads over its
// workers, one worker per thread at a time. Triggers for a thread that is
// being projected or waiting for a worker queue up on it, so one step
// folds them all: under load, steps grow and their number does not. A
// delivered message is only a trigger for its thread: the worker reads
// the thread's head (version V,
// KV revision R), reads the thread's events after V from the stream in
// stream order (batched direct get by subject), folds them, writes the new
// chunks, writes the head only if its revision is still R, then acks every
// trigger at or below the new version. If the compare-and-swap fails,
// another instance wrote the head first: the worker reloads and starts
// over (nothing it wrote is referenced or harmful).
//
// Why no event is applied twice or out of order, by any number of
// instances, redeliveries and crashes: a head at version V is only ever
// replaced by a head computed from it plus the events after V, in stream
// order; the KV compare-and-swap lets exactly one successor of a head
// revision be written. So the heads of a thread form one chain in which
// every event is folded once, in stream order, whatever the order of
// delivery. A crash at any point leaves either the old head (and maybe
// chunks that the next step writes again with the same content) or the new
// head (and maybe an unacked trigger, which the next step finds already
// applied and just acks).
//
// Four shortcuts keep a step cheap without weakening this:
//
//   - An instance keeps the heads it wrote or read last in memory (an LRU
//     bounded by Config.CacheThreads, default 4,096, and CacheBytes,
//     default 64 MiB) and starts from them; if another instance moved on,
//     the compare-and-swap fails and the step reloads.
//   - A trigger at or below a cached head's version, whose index entry is
//     written too, is acked as soon as it arrives: versions only grow.
//   - Events normally come from a batched direct get of the thread's
//     subject after V. But when a trigger's previous event on the thread
//     is known and is V, the trigger is the event right after V: a run of
//     such triggers chained to the head is folded as delivered, without
//     reading the log. The previous event is known from
//     Nats-Expected-Last-Subject-Sequence (appends through client/ use
//     optimistic concurrency: the server stored the event only because
//     that sequence was then the subject's last), or, for a plain publish,
//     from the instance's delivery order: the consumer numbers every
//     delivery it makes, to any instance, and makes first deliveries in
//     stream order, so while an instance receives consecutive consumer
//     sequences with rising stream sequences it has seen every event
//     stored in between, and the thread's last one it saw before the
//     trigger is the previous event (deliveryWindow; a gap, a redelivery
//     out of order or a consumer reset starts over). One instance gets
//     every delivery, so its plain triggers chain like conditional ones;
//     instances that share the consumer see gaps all the time and fall
//     back to the next shortcut.
//   - A trigger whose previous event is not known is checked with one
//     single next_by_subj direct get from V+1: if the subject's next event
//     is the trigger itself, the chain starts there. Only otherwise is the
//     log read with a batched get, whose pending count makes nats-server
//     2.15 walk the message block the read starts in (milliseconds on an
//     older thread). The next_by_subj get is not free either: the server
//     finds the event by walking every message stored after V in that
//     block (at 1,000 events/s over 1,000 threads, about a thousand
//     messages per trigger).
//
// [Step].LogReads reports which of these a step needed.
//
// Projection lag is reported through [Config].OnApply (time from the
// event's stream timestamp to its head write, and the consumer's backlog)
// and OnStep, failures through OnFailure; the package imports no metrics
// library.
//
// The bytes of the head, chunks and index entry are pinned by
// testdata/snapshot.golden.json (TestSnapshotFormatIsPinned; regenerate
// with -update after a deliberate change, and bump the head format when
// an older version could not read the new bytes).
//
// # Self-healing
//
// Snapshots are derived data. A head or chunk that does not decode, or a
// head in a format this version does not read ([snapstore.ErrCorrupt]), is rebuilt:
// the step folds the thread's log from the start and writes the head over
// the unreadable one at its revision, with a new chunk generation (the
// unreadable head's chunks stay until the thread is erased). An index
// entry that does not decode is written again from the head. Each is
// reported to OnFailure (FailureSnapshotRebuilt, FailureIndexRebuilt);
// a step that fails for any other reason is retried with backoff
// (FailureStep). Readers do not wait for it: client.Get folds the log
// over an unreadable head and client.List lists a thread whose index
// entry is unreadable from its log.
package projector

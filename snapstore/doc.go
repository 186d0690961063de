// Package snapstore is the snapshot store: the layout of thread snapshots
// in JetStream KV (heads, chunks, the thread index), the reader [Store]
// with its caches, and the [Writer] the projector writes through. Message
// lists are encoded by events' message-list codec (events.AppendMessages,
// events.ParseMessages), the one codec of events.Message.
// It owns every fact about keys: other packages name a thread, never a
// key or a wildcard ([PurgeThread], [WatchIndex]). It imports events,
// fold and internal/lru, nats.go's KV API (and its connection's status,
// for [Store.TrackHeads]), and orbit.go's jetstreamext (the multi-last
// direct get that lists a thread's keys for a purge).
//
// # Snapshot layout (bucket "convlog_snapshots")
//
// A KV value is limited to the server's max payload (1 MiB by default) and
// a thread may hold 100,000 messages (100 MB), so a snapshot is a small
// head plus immutable chunks:
//
//	<tenant>.<thread>                                head: msgpack map
//	<tenant>.<thread>.c.<gen>.<first>.<count>        chunk: msgpack array of messages
//	<tenant>.<thread>.d.<gen>.<run>.<first>.<count>  delta: the same, run = its run's first index
//
// The head holds the thread's State without messages (Base counts them
// all; heads written before deltas carried the newest ones, the tail, in
// Messages, and are still read), the layout generation gen, the chunk list
// (per chunk: first index, count, bytes, first and last sequence, level;
// see [ChunkRef]), the garbage list (keys waiting to be purged) and
// delta_rev, the KV revision of the first delta. A chunk holds Count
// messages starting at history index First, encoded as a plain msgpack
// array of message maps (field names as in events.Message), so any msgpack
// library reads it. Chunks come in three levels, in this order in a head:
// final chunks (level 1), open chunks (level 0: a few, each larger than the
// next), and deltas ([LevelDelta], 2).
//
// # Why deltas
//
// A step writes the messages it added once, as a delta, and a head of a
// few hundred bytes (the state, and one chunk reference per delta,
// integers in their shortest msgpack form), so the deltas are the event's
// own bytes once. A head that carried the tail of newest messages (up to
// TailBytes) would be rewritten by every step: a message of m bytes would
// be written about TailBytes/(2m) times (32 times for 512 bytes). The KV
// bytes written per event byte are in BENCHMARKS.md (section 3).
//
// # Rules
//
// Applied by every step, so the keys a head names are a function of the
// events and of where the steps ended:
//
//  1. After every event, when the deltas plus the tail (the messages the
//     step added so far and no cut moved) reach the thread's cut point,
//     between half of TailBytes and TailBytes and fixed per thread by a
//     hash of its ids (threads that grow in step, as under round-robin
//     traffic, would otherwise all cut, and purge their deltas, at the
//     same moment, and the projector's lag would jump with each such
//     burst), the deltas are decoded back in front of
//     the tail (each becomes garbage, removed by a purge marker that
//     expires: a publish, not a stream purge request) and the tail
//     moves into the open chunks (the trailing level-0 chunks), which
//     merge like a binary counter: the tail joins the open chunks before
//     it that are no larger than what it has gathered so far, as long as
//     the result stays within ChunkBytes (768 KiB by default); the joined
//     chunk is written under its new key (the old ones' encoded messages
//     followed by the tail's: nothing is decoded) and the old ones become
//     garbage. A tail that joins nothing becomes an open chunk of its own.
//     An open chunk that can never merge again (two of its size would not
//     fit, or the chunk after it could not join it) is closed: it becomes
//     level 1, keeping its key and value. A tail that does not fit in
//     ChunkBytes by itself (a restore) becomes final chunks of at most
//     ChunkBytes instead (a message larger than that gets a chunk of its
//     own). Sizes are of whole values, array header included. So a history
//     of N bytes has N/ChunkBytes to 3N/ChunkBytes final chunks (each more
//     than a third of ChunkBytes), about log2(ChunkBytes/TailBytes) open
//     ones at most, each larger than the next, and under TailBytes of
//     deltas.
//  2. At the end of a step, the tail left becomes one delta (level 2), and
//     the head carries no messages. The deltas since the last cut form a
//     run, keyed by the history index of its first message: a run starts
//     where the last cut ended, so no later delta reuses a run's keys.
//  3. A history replacement (reset, restore, compaction) starts a new
//     generation: new chunk keys; the old generation's chunks become
//     garbage (one key pattern for its chunks, one for its deltas).
//     Erasure makes every chunk and delta of the thread garbage.
//
// Every message is written once as a delta and about
// log2(ChunkBytes/TailBytes) times into open chunks over a thread's life
// (5 at the defaults; none while a thread is under 32 KiB). That is why
// open chunks merge like a binary counter: a single open chunk that took
// every tail would be written again each time, ChunkBytes/(2*cut point)
// times per message (12 to 24 at the defaults;
// TestChunkBytesWrittenGrowLogarithmically holds the difference), and
// every cut would make a warm reader fetch the whole open chunk again (up
// to 768 KiB) where it fetches the tail's chunk and, now and then, a
// merged one.
//
// # Crash safety, and readers never torn
//
// A chunk key names a fixed range of a fixed generation, whose messages are
// a deterministic function of the events, so a chunk's value never changes:
// it is written once with Create, and a Create that finds the key already
// there (written by another instance or by a step that crashed before its
// head) is fine: it holds the same messages. Writes go in this order: new
// chunks and deltas, then the head with compare-and-swap (Create for a new
// thread, Update at the revision read), then purges of the garbage (stream
// purges by subject, which leave no delete markers), then the index entry.
// So a head never names a chunk that is not written yet, and a reader
// never sees a torn snapshot; a reader holding an older head may find one
// of its chunks or deltas purged, and [Store.Load] then reloads the head
// and reads again. Garbage stays listed in the head until a later step
// purges it again, so a crash between the head write and the purge leaks
// nothing. A step that crashes or loses the compare-and-swap after writing
// leaves chunks for the next step, which derives the same keys for the
// same cuts and adopts them; its delta, though, ends where its batch of
// events ended, and the next step's may not. So a commit whose edit began
// from a head read from KV (not one this writer wrote: after a restart, a
// conflict or an unreadable head) first lists the thread's chunk keys (a
// stream info with a subject filter: keys, no values) and adds those the
// new head will not name to its garbage, except keys whose range reaches
// the new head's last message or beyond, or of a newer generation: a
// concurrent step may have written them before its head, and a head that
// follows this one may name them (it derives the same keys and finds them
// with Create), so purging them could remove a chunk from under that
// head; the next commit sweeps again, until the thread has moved past
// them (TestSweepNeverPurgesAChunkALaterHeadNames). (A thread's first step starts
// from no head, which is not swept, so that creating threads costs no
// listing; a caller that knows a step may have crashed there asks for the
// sweep with [Head.WithSweep], as the projector does for redelivered
// events.) A step working from a stale head
// can still leave a chunk nobody names after a newer head was written by
// another instance (it loses the compare-and-swap afterwards); so can
// instances whose ChunkBytes differ. Such a chunk costs space, never
// correctness (no head names it); the next sweep or erasure removes it.
//
// Projecting one more event costs the same whatever the history length: at
// most one read of the event (batched direct get), one delta of the step's
// messages, a head of the state and the chunk list (about 20 bytes per
// chunk or delta), the index entry, and now and then a merge of open
// chunks (a tail's size, doubled as often as the merges carry: about
// log2(ChunkBytes/TailBytes) tails' bytes per tail on average). A
// writer keeps the deltas it wrote with the head it caches, so joining them
// reads nothing back. The runner folds with the windowed State (no
// messages); a compaction that cuts before the window ([fold.ErrNeedHistory])
// loads only the chunks from the one the cut falls in.
//
// # Reading
//
// Reading a thread ([Store.Load]) from KV is one get of the head, one
// batched direct get of its deltas (all of them, from delta_rev, when the
// Store has Options.Batch; else a get each) and the chunk gets, eight at a
// time, each value decoded by its fetch as soon as it arrives, by a
// hand-written msgpack decoder whose strings share the received bytes. A
// reader remembers the chunk list it last saw of up to 16,384 threads, so a
// thread it read before has its chunks and deltas requested together with
// the head and decoded straight into the slice Load returns, before the
// head is there; a chunk the new head no longer names is waited for and
// dropped, one it names in addition is fetched after the head.
// BENCHMARKS.md (section 2) compares a Load with one KV get of a value of
// the same size. Building the []events.Message allocates a slice of
// structs, which costs more than decoding the messages into it
// (BenchmarkDecodeChunk); [Store.LoadView] avoids the copy.
//
// Because a chunk never changes, a [Store] keeps the chunks it decoded
// in an LRU cache bounded by their encoded size
// ([Options].ChunkCacheBytes, 64 MiB by default; negative turns
// it off). A chunk is cached under its key's parts (thread, generation,
// first, count), so a cached chunk that the head just read names is always
// the right one, and a Load of a thread read recently costs the head get,
// the gets of the chunks written since (after a cut, the whole new open
// chunk), and a copy of the cached messages into a new []events.Message. What the Message values point to (string
// bytes, parts, tool calls) is shared between Loads, which is safe because
// the fold never modifies a message in place. A head of a newer
// generation, an erased head or a missing snapshot drops the thread's
// cached chunks at once; chunks no head names any more (replaced open
// chunks) age out. [Snapshot].Bytes counts only what was read from KV,
// CachedBytes what came from the cache. For LoadView the Store also keeps
// the heads it decoded: a head read again with the same revision and the
// same bytes is not opened and decoded again (its State is shared by
// those views, read-only), so a warm LoadView of an unchanged thread costs
// the head's get and no decoding.
//
// # Index (bucket "convlog_threads")
//
// One [Summary] per thread at [IndexKey] "<tenant>.<thread>" (list a tenant
// with "<tenant>.*"), written after the head, moved only forward (CAS,
// keeping the higher Version), deleted when the thread is erased.
package snapstore

// Package snapstore is the snapshot store: the layout of thread snapshots
// in JetStream KV (heads, chunks, the thread index), the reader [Store]
// with its caches, and the [Writer] the projector writes through. Message
// lists are encoded by events' message-list codec (events.AppendMessages,
// events.ParseMessages), the one codec of events.Message.
// It owns every fact about keys: other packages name a thread, never a
// key or a wildcard ([PurgeThread], [WatchIndex]). It imports events and
// fold, and nats.go's KV API.
//
// # Snapshot layout (bucket "convlog_snapshots")
//
// A KV value is limited to the server's max payload (1 MiB by default) and
// a thread may hold 100,000 messages (100 MB), so a snapshot is a small
// head plus immutable chunks:
//
//	<tenant>.<thread>                          head: msgpack map
//	<tenant>.<thread>.c.<gen>.<first>.<count>  chunk: msgpack array of messages
//
// The head holds the thread's State with only its newest messages (the
// tail, under the projector's Config.TailBytes, 32 KiB by default) in Messages and the
// number of older messages in Base, plus the layout generation gen, the
// chunk list (per chunk: first index, count, bytes, first and last
// sequence, level; see [ChunkRef]) and the garbage list (keys waiting to be
// purged). A chunk holds Count messages starting at history index First,
// encoded as a plain msgpack array of message maps (field names as in
// events.Message), so any msgpack library reads it.
//
// Rules, applied after every event (so the layout depends only on the
// events, not on how they were batched or which instance folded them):
//
//  1. When the tail reaches TailBytes it moves into the open chunk: the
//     last chunk, if it is level 0. While the open chunk plus the tail
//     stay within ChunkBytes (768 KiB by default), a new open chunk holding
//     both is written under its new key (the old one's encoded messages
//     followed by the tail's: nothing is decoded) and the old one becomes
//     garbage. Otherwise the open chunk is closed (it becomes level 1,
//     keeping its key and value) and the tail opens the next chunk; a tail
//     that does not fit in ChunkBytes by itself (a restore) becomes final
//     chunks of at most ChunkBytes instead (a message larger than that gets
//     a chunk of its own). Sizes are of whole values, array header
//     included. So a history of N bytes has about N/ChunkBytes chunks,
//     at most one of them open, and a thread of up to ChunkBytes is a head
//     and one chunk: one read more than one KV value, however it grew.
//     The price is in writes: each cut rewrites the open chunk, so every
//     message is written about ChunkBytes/(2*TailBytes) times into chunks
//     (12 at the defaults), against about TailBytes/(2*its size) times into
//     heads (32 for 512-byte messages). A head that ends with several level-0
//     chunks (written by convlog before the open chunk, which kept up to
//     eight small ones) has them joined into the open chunk at its next
//     cut.
//  2. A history replacement (reset, restore, compaction) starts a new
//     generation: new chunk keys; the old generation's chunks become
//     garbage (one key pattern). Erasure makes every chunk of the thread
//     garbage.
//
// A chunk key names a fixed range of a fixed generation, whose messages are
// a deterministic function of the events, so a chunk's value never changes:
// it is written once with Create, and a Create that finds the key already
// there (written by another instance or by a step that crashed before its
// head) is fine. Writes go in this order: new chunks, then the head with
// compare-and-swap (Create for a new thread, Update at the revision read),
// then purges of the garbage (stream purges by subject, which leave no
// delete markers), then the index entry. So a head never names a chunk that
// is not written yet; a reader holding an older head may find one of its
// chunks purged, and [Store.Load] then reloads the head and reads again.
// Garbage stays listed in the head until a later step purges it again, so a
// crash between the head write and the purge leaks nothing. A step that
// crashes or loses the compare-and-swap after writing chunks leaves them
// for the next step, which derives the same keys and adopts them, joins
// them into a new open chunk (and lists them as garbage), or starts a new
// generation (and purges the old one). A step working from a stale head
// (another instance moved the thread on meanwhile) can leave a chunk
// nobody names: it writes chunks the newer heads have already replaced
// and purged (an open chunk of up to ChunkBytes, or a chunk of a replaced
// generation), then loses the compare-and-swap. So can instances whose
// ChunkBytes differ (set differently, or fitted to servers with different
// max payloads): they cut at different points, so one may not derive what
// the other wrote before it crashed. Such a chunk costs space, never
// correctness (no head names it), and erasure removes it with the rest.
//
// Projecting one more event costs the same whatever the history length: at
// most one read of the event (batched direct get), rewriting a head that
// holds less than TailBytes of messages plus the chunk list (about 20
// bytes per 768 KiB of history), the index entry, and now and then one
// rewrite of the open chunk (on average ChunkBytes/2, read and written
// once per TailBytes of messages). The runner folds with the
// windowed State; a compaction that cuts before the tail
// ([fold.ErrNeedHistory]) loads only the chunks from the one the cut falls in.
//
// Reading a thread ([Store.Load]) from KV is one get of the head and
// the chunk gets, eight at a time, each chunk decoded by its fetch as soon
// as it arrives, by a hand-written msgpack decoder whose strings share the
// received bytes. A reader remembers the chunk list (and tail length) it
// last saw of up to 16,384 threads, so a thread it read before has its
// chunks requested together with the head and decoded straight into the
// slice Load returns, before the head is there; a chunk the new head no
// longer names is waited for and dropped, one it names in addition is
// fetched after the head. Measured on 2 cores, a 1,000-message thread
// (606 KB: a head of 18 KiB and one open chunk) loads in 1.2 to 1.5 times
// the time of one KV get of a value of the same size when the two
// alternate (1.35 in bench/'s full run, whose rounds shuffle the order of
// the systems), and faster than that get when each is timed back to back
// (660 against 1,070 µs). With four chunks, before the open chunk, it was
// 1.5 to 1.8 times. What is left is the second request (two values cost
// about 1.12 times one of the same bytes, five 1.25 times, before any
// decoding) and building the []events.Message: decoding 1,000 messages
// into a slice takes 27 µs, allocating that slice (270 KB of structs)
// about 100 µs more, garbage-collection work rather than page faults
// (BenchmarkDecodeChunk; perf counts under one fault per allocation). A
// reader without the hint (its first read of a thread) waits for the head
// before it asks for the chunks: 1.5 to 1.7 times.
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
// CachedBytes what came from the cache.
//
// # Index (bucket "convlog_threads")
//
// One [Summary] per thread at [IndexKey] "<tenant>.<thread>" (list a tenant
// with "<tenant>.*"), written after the head, moved only forward (CAS,
// keeping the higher Version), deleted when the thread is erased.
package snapstore

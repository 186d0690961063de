package snapstore

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// headFormat is the layout version written in every head.
const headFormat = 1

// ChunkRef describes one immutable chunk of a thread's history in the
// snapshot bucket: Count messages starting at history index First, encoded
// in Bytes bytes, produced by events FirstSeq..LastSeq. Message sequences
// never decrease along a history, so chunks are ordered by sequence too.
// The chunk's key is [ChunkKey](tenant, thread, gen, First, Count).
type ChunkRef struct {
	//lint:ignore U1000 read by msgpack through reflection (the struct's options)
	_msgpack struct{} `msgpack:",as_array"` //nolint:unused // msgpack struct tag

	// First is the index in the history of the chunk's first message.
	First int
	// Count is the number of messages in the chunk (>= 1).
	Count int
	// Bytes is the size of the chunk's value in bytes.
	Bytes int
	// FirstSeq and LastSeq are the stream sequences of the first and last
	// message.
	FirstSeq uint64
	LastSeq  uint64
	// Level is 0 for an open chunk (the trailing chunks before the deltas,
	// which later cuts merge under new keys: the package doc's rule 1), 1
	// for a final chunk and 2 ([LevelDelta]) for a delta: the messages one
	// projection step added, written once and joined into the open chunks
	// by a later cut.
	Level uint8
}

// LevelDelta is the [ChunkRef] level of a delta (see the package doc's
// rule 1). Deltas follow every other chunk of a head.
const LevelDelta uint8 = 2

// HeadKey is the key of a thread's head in the snapshot bucket,
// "<tenant>.<thread>": the same key as its summary in the index bucket. Its
// revision changes on every projection of the thread, so a KV watch on
// "<tenant>.*" (or this key) sees every new version.
func HeadKey(tenant, thread string) string { return tenant + "." + thread }

// kvSubjectPrefix is the prefix of the subjects that hold bucket's keys in
// its stream ("$KV.<bucket>.", nats.go's KV, ADR-8): a key's subject is
// it plus the key.
func kvSubjectPrefix(bucket string) string { return "$KV." + bucket + "." }

// kvStreamName is the name of bucket's stream ("KV_<bucket>", ADR-8).
func kvStreamName(bucket string) string { return "KV_" + bucket }

// ChunkKey is the key of a chunk in the snapshot bucket:
// "<tenant>.<thread>.c.<gen>.<first>.<count>". A key names a fixed range of
// a fixed history generation, so its value never changes: whoever writes it
// writes the same bytes.
func ChunkKey(tenant, thread string, gen uint64, first, count int) string {
	return rangeKey(tenant, thread, ".c.", gen, -1, first, count)
}

// DeltaKey is the key of a delta in the snapshot bucket:
// "<tenant>.<thread>.d.<gen>.<run>.<first>.<count>", where run is the
// history index of the first delta of its run (the deltas since the last
// cut): a cut purges a whole run with one subject pattern, and a reader
// gets one with one batched get. Like a chunk's, its value never changes.
func DeltaKey(tenant, thread string, gen uint64, run, first, count int) string {
	return rangeKey(tenant, thread, ".d.", gen, run, first, count)
}

func rangeKey(tenant, thread, kind string, gen uint64, run, first, count int) string {
	b := make([]byte, 0, len(tenant)+len(thread)+40)
	b = append(b, tenant...)
	b = append(b, '.')
	b = append(b, thread...)
	b = append(b, kind...)
	b = strconv.AppendUint(b, gen, 10)
	if run >= 0 {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(run), 10)
	}
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(first), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(count), 10)
	// b is never written again: the string takes its bytes without a
	// copy (as strings.Builder's String does).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// RefKeys returns the key of each of refs, a head's chunk list in order:
// [ChunkKey] for a chunk, [DeltaKey] (of the trailing run) for a delta.
func RefKeys(tenant, thread string, gen uint64, refs []ChunkRef) []string {
	run := deltaRun(refs)
	keys := make([]string, len(refs))
	for i, c := range refs {
		keys[i] = refKey(tenant, thread, gen, run, c)
	}
	return keys
}

// deltaRun is the history index of the first delta of refs' trailing run
// of deltas (-1 when refs end with no delta).
func deltaRun(refs []ChunkRef) int {
	run := -1
	for i := len(refs) - 1; i >= 0 && refs[i].Level == LevelDelta; i-- {
		run = refs[i].First
	}
	return run
}

// refKey is the key of c, a delta of the run starting at run or a chunk.
func refKey(tenant, thread string, gen uint64, run int, c ChunkRef) string {
	if c.Level == LevelDelta {
		return DeltaKey(tenant, thread, gen, run, c.First, c.Count)
	}
	return ChunkKey(tenant, thread, gen, c.First, c.Count)
}

// keyRange parses key, a chunk or delta key of tenant/thread
// ([ChunkKey], [DeltaKey]): its generation and the end of its range
// (first + count). ok is false for any other key.
func keyRange(tenant, thread, key string) (gen uint64, end int, ok bool) {
	rest, found := strings.CutPrefix(key, tenant+"."+thread+".")
	if !found {
		return 0, 0, false
	}
	f := strings.Split(rest, ".")
	if !(f[0] == "c" && len(f) == 4 || f[0] == "d" && len(f) == 5) {
		return 0, 0, false
	}
	gen, err := strconv.ParseUint(f[1], 10, 64)
	first, err1 := strconv.Atoi(f[len(f)-2])
	count, err2 := strconv.Atoi(f[len(f)-1])
	if err != nil || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return gen, first + count, true
}

// IndexKey is the key of a thread's [Summary] in the index bucket,
// "<tenant>.<thread>". List a tenant with the filter "<tenant>.*".
func IndexKey(tenant, thread string) string { return tenant + "." + thread }

// rangesPattern matches every chunk and delta of a thread: every key
// below its head's, "<tenant>.<thread>.>".
func rangesPattern(tenant, thread string) string { return tenant + "." + thread + ".>" }

// genPatterns match the chunks and the deltas of one generation.
func genPatterns(tenant, thread string, gen uint64) []string {
	g := strconv.FormatUint(gen, 10)
	return []string{tenant + "." + thread + ".c." + g + ".>", tenant + "." + thread + ".d." + g + ".>"}
}

// runPattern matches the deltas of one run.
func runPattern(tenant, thread string, gen uint64, run int) string {
	return tenant + "." + thread + ".d." + strconv.FormatUint(gen, 10) + "." + strconv.Itoa(run) + ".>"
}

// head is the value at HeadKey: the thread's windowed State (Messages is
// the tail that is in no chunk yet, Base the number of chunked messages),
// the chunk list and the keys waiting for deletion.
type head struct {
	Format int `msgpack:"format"`
	// Gen is the layout generation: it names the chunk keys and grows on
	// every history replacement (reset, restore, compaction, erasure).
	Gen   uint64      `msgpack:"gen"`
	State *fold.State `msgpack:"state"`
	// Tail is State.Messages, encoded with the fast codec (a msgpack array
	// of message maps, as in a chunk) and carried as msgpack bin, which
	// decodes with one copy.
	Tail   []byte     `msgpack:"tail"`
	Chunks []ChunkRef `msgpack:"chunks"`
	// Garbage lists keys and key patterns (ending in ".>") of chunks no
	// head from this one on refers to; they are purged after the head is
	// written, and again (idempotently) by the next projection.
	Garbage []string `msgpack:"garbage,omitempty"`
	// DeltaRev is the KV revision of the first delta in Chunks when the
	// writer knows it (0 otherwise): a reader gets every delta with one
	// batched direct get from there (see Store). Heads of earlier versions
	// lack it; readers that do not know it ignore it.
	DeltaRev uint64 `msgpack:"delta_rev,omitempty"`
}

// encodeHead encodes h; tail is the encoding of h.State.Messages, each
// message by appendMessage, concatenated (as Edit.tailEnc keeps it), so
// that a step does not encode its tail again.
func encodeHead(h *head, tail []byte) ([]byte, error) {
	st := h.State
	if st.Messages != nil {
		c := *st
		c.Messages = nil
		st = &c
	}
	var hdr [5]byte
	arr := events.AppendArrayHeader(hdr[:0], len(h.State.Messages))
	// msgpack.Marshal with a buffer sized for the tail up front: growing
	// from empty copied the tail several times.
	buf := bytes.NewBuffer(make([]byte, 0, len(arr)+len(tail)+headSlack+24*len(h.Chunks)))
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	// Integers in their shortest form: a head lists a chunk reference per
	// delta, whose sequences are uint64 (9 bytes each otherwise).
	enc.UseCompactInts(true)
	// The tail is a bin value holding the array header and the encoded
	// messages, written as EncodeBytes writes one, from its two parts.
	writeTail := func() error {
		if err := enc.EncodeBytesLen(len(arr) + len(tail)); err != nil {
			return err
		}
		buf.Write(arr)
		buf.Write(tail)
		return nil
	}
	if err := writeHeadParts(enc, h, st, writeTail); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// headSlack is the room encodeHead leaves for the head's fields besides the
// tail and the chunk list (about 24 bytes a reference, compact); a bigger
// head grows the buffer. A head without messages is a few hundred bytes.
const headSlack = 1 << 10

// decodeHead decodes a head; when sizes is not nil, it receives the encoded
// size of each tail message, and h.Tail keeps the tail's encoded messages
// (without the array header: what encodeHead takes); else h.Tail is nil.
func decodeHead(b []byte, sizes *[]int) (*head, error) {
	var h head
	if err := msgpack.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: head: %v", ErrCorrupt, err)
	}
	if h.Format != headFormat || h.State == nil {
		return nil, fmt.Errorf("%w: head format %d (this version reads %d)", ErrCorrupt, h.Format, headFormat)
	}
	ms, err := events.ParseMessages(h.Tail, sizes, true)
	if err != nil {
		return nil, fmt.Errorf("%w: head tail: %v", ErrCorrupt, err)
	}
	h.State.Messages = ms
	if sizes != nil {
		_, hdr, err := events.ArrayHeader(h.Tail)
		if err != nil {
			return nil, fmt.Errorf("%w: head tail: %v", ErrCorrupt, err)
		}
		h.Tail = h.Tail[hdr:]
	} else {
		h.Tail = nil
	}
	normalizeState(h.State)
	n := 0
	for _, c := range h.Chunks {
		n += c.Count
	}
	if n != h.State.Base {
		return nil, fmt.Errorf("%w: head of %s/%s: chunks hold %d messages, base is %d", ErrCorrupt, h.State.Tenant, h.State.Thread, n, h.State.Base)
	}
	return &h, nil
}

// normalizeState puts decoded times in UTC, as the fold produces them.
func normalizeState(s *fold.State) {
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
}

// layoutConfig is the part of Config the layout rules use.
type layoutConfig struct {
	chunkBytes int // the most bytes a chunk's value holds (unless it is one message)
	tailBytes  int // the tail moves into the open chunks when it reaches this
}

// newChunk is a chunk created by a projection and not written yet.
type newChunk struct {
	ref  ChunkRef
	data []byte
}

// Edit is one projection of one thread in progress ([Writer.Edit]): the
// head it started from, folded forward event by event by the caller. After
// every event, [Edit.Settle] applies the layout rules, so the chunks a head
// refers to depend only on the events, never on how they were batched or
// which instance folded them. An Edit belongs to one goroutine.
type Edit struct {
	cfg            layoutConfig
	tenant, thread string
	s              *fold.State
	gen            uint64
	chunks         []ChunkRef
	tailSizes      []int
	tailBytes      int
	// tailEnc is s.Messages encoded (appendMessage of each, concatenated;
	// tailSizes are the lengths). It may share its array with the cursor
	// the Edit started from, up to its length: only append to it, and
	// start a new one (nil) to drop it.
	tailEnc []byte
	created []newChunk // to write before the head, in order
	garbage []string
	// known holds the values (plain, as created) of deltas the head the
	// edit started from names, by First, when the writer still has them
	// (a head it wrote itself): a cut joins them without reading KV.
	known deltaValues
	// deltaRev is the head's DeltaRev while its first delta stays.
	deltaRev uint64
	// fetch reads a chunk's bytes (for merging open chunks and for
	// compactions).
	fetch func(ctx context.Context, key string) ([]byte, error)
}

// Mark is what [Edit.Settle] compares against: the state before an event
// ([Edit.Mark]).
type Mark struct {
	gen     uint64
	base    int
	n       int
	erased  bool
	version uint64
}

// Mark records the edit's state before an event is folded into it.
func (w *Edit) Mark() Mark {
	return Mark{gen: w.s.Generation, base: w.s.Base, n: len(w.s.Messages), erased: w.s.Erased, version: w.s.Version}
}

// Settle updates the layout after one event was folded into the edit's
// state (before is [Edit.Mark] taken just before the fold): a new
// generation when the history was replaced or erased, else the new tail
// messages are encoded and the tail is cut into chunks when it reaches
// TailBytes. Errors: [ErrConflict] (wrapped) when a chunk it must extend
// is gone (a newer head replaced it), [ErrCorrupt] (wrapped) for a chunk
// that does not match its head, KV and context errors.
func (w *Edit) Settle(ctx context.Context, before Mark) error {
	s := w.s
	switch {
	case s.Erased && !before.erased:
		// Every chunk of every generation goes, including any that a
		// crashed or outpaced projector left behind.
		w.garbage = append(w.garbage, rangesPattern(w.tenant, w.thread))
		w.gen++
		w.chunks, w.created, w.known, w.deltaRev = nil, nil, nil, 0
		w.resetTail()
	case s.Generation != before.gen || s.Base != before.base || len(s.Messages) < before.n:
		// The history was replaced: a new layout generation. The old one's
		// chunks go, with any a crashed or outpaced step left in it.
		w.garbage = append(w.garbage, genPatterns(w.tenant, w.thread, w.gen)...)
		w.gen++
		w.chunks, w.created, w.known, w.deltaRev = nil, nil, nil, 0
		if s.Base != 0 {
			return fmt.Errorf("snapstore: fold replaced the history of %s/%s but left base %d", w.tenant, w.thread, s.Base)
		}
		w.resetTail()
	default:
		w.encodeTail(before.n)
	}
	return w.cut(ctx)
}

// encodeTail encodes the tail messages from index i on onto tailEnc.
func (w *Edit) encodeTail(i int) {
	// tailEnc is shared with the head the edit started from (its capacity
	// cut to its length), so the first append copies it: grow it once to
	// about what the new messages take, not once per field.
	n := 0
	for j := i; j < len(w.s.Messages); j++ {
		n += encodedSizeHint(&w.s.Messages[j])
	}
	w.tailEnc = slices.Grow(w.tailEnc, n)
	for ; i < len(w.s.Messages); i++ {
		n := len(w.tailEnc)
		w.tailEnc = events.AppendMessage(w.tailEnc, &w.s.Messages[i])
		sz := len(w.tailEnc) - n
		w.tailSizes = append(w.tailSizes, sz)
		w.tailBytes += sz
	}
}

// encodedSizeHint is about the size of m as events.AppendMessage encodes
// it, in bytes: its strings, plus room for the field names, lengths and
// numbers. It only sizes a buffer; the bytes written do not depend on it.
func encodedSizeHint(m *events.Message) int {
	n := 128 + len(m.Content.Text) + len(m.Name) + len(m.Reasoning) + len(m.ToolCallID) + len(m.Agent) +
		len(m.Model) + len(m.Metadata) + len(m.EventID)
	for _, p := range m.Content.Parts {
		n += 64 + len(p.Text) + len(p.URL) + len(p.Data) + len(p.MediaType) + len(p.Detail) + len(p.FileID) + len(p.Filename)
	}
	for _, c := range m.ToolCalls {
		n += 32 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	if m.Usage != nil {
		n += 96
	}
	return n
}

func (w *Edit) resetTail() {
	w.tailSizes = w.tailSizes[:0]
	w.tailBytes = 0
	w.tailEnc = nil
	w.encodeTail(0)
}

// cut moves the tail into chunks once it reaches tailBytes (rule 1 of the
// package doc). The open chunks (the trailing run of level-0 chunks) merge
// like a binary counter: the tail is joined with the open chunks before it
// that are not larger than what it has gathered so far (their encoded
// messages followed by its own, written under a new key; the replaced ones
// become garbage), as long as the result stays within chunkBytes; else it
// becomes an open chunk of its own. Open chunks too large to merge with
// one of their own size again are closed (level 1, same key and value).
// So a message is written into about log2(chunkBytes/tailBytes) chunks
// over a thread's life, instead of chunkBytes/(2*tailBytes) when every
// tail was joined to one open chunk. A tail that does not fit in
// chunkBytes by itself (a restore) becomes final chunks of at most
// chunkBytes each (a message larger than that gets a chunk of its own).
// Sizes include the chunk's array header, so a chunk's value never
// exceeds chunkBytes unless it is one message.
func (w *Edit) cut(ctx context.Context) error {
	d, deltaB := w.deltaRun()
	if deltaB+w.tailBytes < w.cutAt() || len(w.s.Messages) == 0 && d == len(w.chunks) {
		return nil
	}
	if d < len(w.chunks) {
		if err := w.joinDeltas(ctx, d); err != nil {
			return err
		}
	}
	ms := w.s.Messages
	// The open chunks: chunks[k:].
	k := len(w.chunks)
	for k > 0 && w.chunks[k-1].Level == 0 {
		k--
	}
	if !w.fits(len(ms), w.tailBytes) {
		w.closeRun(k, len(w.chunks))
		w.cutFinal(ms)
	} else if err := w.cutOpen(ctx, ms, k); err != nil {
		return err
	}
	w.s.Base += len(ms)
	w.s.Messages = nil
	w.tailSizes = w.tailSizes[:0]
	w.tailBytes = 0
	w.tailEnc = nil
	return nil
}

// deltaRun returns where the trailing run of delta chunks starts,
// chunks[d:], and the bytes of their encoded messages.
func (w *Edit) deltaRun() (d, deltaB int) {
	d = len(w.chunks)
	for d > 0 && w.chunks[d-1].Level == LevelDelta {
		d--
		deltaB += chunkBody(w.chunks[d])
	}
	return d, deltaB
}

// fits reports whether a chunk of n messages whose encodings take b
// bytes stays within chunkBytes, its array header included.
func (w *Edit) fits(n, b int) bool { return b+events.ArrayHeaderSize(n) <= w.cfg.chunkBytes }

// chunkBody is the bytes of c's encoded messages, its array header left
// out.
func chunkBody(c ChunkRef) int { return c.Bytes - events.ArrayHeaderSize(c.Count) }

// cutFinal writes ms, a tail too large for one chunk, as final chunks of
// at most chunkBytes each (a message larger than that gets a chunk of its
// own).
func (w *Edit) cutFinal(ms []events.Message) {
	off := 0
	for i := 0; i < len(ms); {
		j, b := i, 0
		for j < len(ms) && (j == i || w.fits(j-i+1, b+w.tailSizes[j])) {
			b += w.tailSizes[j]
			j++
		}
		w.addChunk(ms[i:j], w.tailEnc[off:off+b], 1)
		i, off = j, off+b
	}
}

// cutOpen joins the tail ms with the open chunks chunks[k:] before it
// that are not larger than what it has gathered so far, within
// chunkBytes, or makes it an open chunk of its own; then closes the open
// chunks that can never merge again.
func (w *Edit) cutOpen(ctx context.Context, ms []events.Message, k int) error {
	// The open chunks chunks[i:] join the tail: n messages, b bytes.
	i, n, b := len(w.chunks), len(ms), w.tailBytes
	full := false // the merge stopped at chunkBytes
	for i > k {
		c := w.chunks[i-1]
		if chunkBody(c) > b {
			break
		}
		if !w.fits(n+c.Count, b+chunkBody(c)) {
			full = true
			break
		}
		i--
		n += c.Count
		b += chunkBody(c)
	}
	if i < len(w.chunks) {
		if err := w.extend(ctx, i); err != nil {
			return err
		}
	} else {
		w.addChunk(ms, w.tailEnc, 0)
	}
	// Open chunks that can never merge again are closed: those before
	// chunks[i] when chunks[i] could not join them (it only grows), then
	// each from the start too large to merge with one of its size. So
	// the open chunks left are each larger than the next.
	j := k
	if full {
		j = i
	}
	for j < len(w.chunks) && !w.fits(2*w.chunks[j].Count, 2*chunkBody(w.chunks[j])) {
		j++
	}
	w.closeRun(k, j)
	return nil
}

// cutAt is the bytes of deltas and tail at which this thread's cut
// happens: between half of tailBytes and tailBytes, fixed per thread by a
// hash of its ids, so that threads that grow in step (the same traffic
// round robin) do not all cut, and purge their deltas, at the same moment.
func (w *Edit) cutAt() int {
	h := fnv.New32a()
	h.Write([]byte(w.tenant))
	h.Write([]byte{0})
	h.Write([]byte(w.thread))
	half := w.cfg.tailBytes / 2
	return half + int(h.Sum32()%uint32(half+1))
}

// joinDeltas moves the deltas chunks[d:] back in front of the tail (their
// messages decoded, their encodings and sizes taken as they are), so that
// the cut treats them with the tail as one: they become garbage.
func (w *Edit) joinDeltas(ctx context.Context, d int) error {
	run := w.chunks[d:]
	var (
		ms    []events.Message
		enc   []byte
		sizes []int
	)
	start := run[0].First
	for _, c := range run {
		key := DeltaKey(w.tenant, w.thread, w.gen, start, c.First, c.Count)
		data := w.createdData(c)
		if data == nil {
			data = w.known.get(c.First)
		}
		if data == nil {
			var err error
			if data, err = w.fetch(ctx, key); err != nil {
				return err
			}
		}
		part, err := events.ParseMessages(data, &sizes, true)
		if err != nil || len(part) != c.Count {
			return fmt.Errorf("%w: delta %s holds %d messages, its head says %d (%v)", ErrCorrupt, key, len(part), c.Count, err)
		}
		_, hdr, err := events.ArrayHeader(data)
		if err != nil {
			return fmt.Errorf("%w: delta %s: %v", ErrCorrupt, key, err)
		}
		ms = append(ms, part...)
		enc = append(enc, data[hdr:]...)
		w.dropCreated(c)
		// Purged once the new head is written (by a purge marker each:
		// Writer.purge); one created in this step and not written yet is
		// purged too (harmless: a step that stopped before may have
		// written it).
		w.garbage = append(w.garbage, key)
	}
	n := len(ms)
	w.s.Messages = append(ms, w.s.Messages...)
	w.tailEnc = append(enc, w.tailEnc...)
	w.tailSizes = append(sizes, w.tailSizes...)
	w.tailBytes += len(enc)
	w.s.Base -= n
	w.chunks = w.chunks[:d]
	w.known, w.deltaRev = nil, 0
	return nil
}

// pruneGarbage drops from the garbage every key or pattern that names or
// covers a key the edit's chunks name: whatever a rule lists, a purge
// after the head must never remove what the head names (what a dropped
// pattern would also have purged is left to a later sweep).
func (w *Edit) pruneGarbage() {
	if len(w.garbage) == 0 {
		return
	}
	keys := RefKeys(w.tenant, w.thread, w.gen, w.chunks)
	w.garbage = slices.DeleteFunc(w.garbage, func(g string) bool {
		for _, k := range keys {
			if coveredBy(k, []string{g}) {
				return true
			}
		}
		return false
	})
}

// closeStep ends a projection step: the tail, the messages the step added
// that no cut moved into a chunk, becomes a delta (rule 1 of the package
// doc), so that the head carries no messages.
func (w *Edit) closeStep() {
	if len(w.s.Messages) == 0 {
		w.s.Messages = nil // the clone's room for a message (cloneWithRoom)
		return
	}
	w.addChunk(w.s.Messages, w.tailEnc, LevelDelta)
	w.s.Base += len(w.s.Messages)
	w.s.Messages = nil
	w.tailSizes = w.tailSizes[:0]
	w.tailBytes = 0
	w.tailEnc = nil
}

// addChunk adds a chunk of the messages ms, whose encodings (appendMessage
// of each, concatenated) are enc.
func (w *Edit) addChunk(ms []events.Message, enc []byte, level uint8) {
	data := append(events.AppendArrayHeader(make([]byte, 0, len(enc)+5), len(ms)), enc...)
	first := w.s.Base
	if n := len(w.chunks); n > 0 {
		first = w.chunks[n-1].First + w.chunks[n-1].Count
	}
	ref := ChunkRef{First: first, Count: len(ms), Bytes: len(data), FirstSeq: ms[0].Seq, LastSeq: ms[len(ms)-1].Seq, Level: level}
	w.chunks = append(w.chunks, ref)
	w.created = append(w.created, newChunk{ref: ref, data: data})
}

// closeRun makes the chunks from index k to j (excluded) final (level 1).
// Their keys and values stay as they are: the level only steers the next
// cut.
func (w *Edit) closeRun(k, j int) {
	for _, c := range w.chunks[k:j] {
		for i := range w.created {
			if w.created[i].ref.First == c.First && w.created[i].ref.Count == c.Count {
				w.created[i].ref.Level = 1
			}
		}
	}
	for i := k; i < j; i++ {
		w.chunks[i].Level = 1
	}
}

// extend replaces the open chunks (the level-0 chunks from index k on) by a
// new open chunk holding their messages followed by the tail's, built by
// concatenating encoded messages: nothing is decoded or encoded again.
func (w *Edit) extend(ctx context.Context, k int) error {
	run := w.chunks[k:]
	ms := w.s.Messages
	count, size := len(ms), len(w.tailEnc)
	bodies := make([][]byte, len(run))
	for i, c := range run {
		data := w.createdData(c)
		if data == nil {
			var err error
			data, err = w.fetch(ctx, ChunkKey(w.tenant, w.thread, w.gen, c.First, c.Count))
			if err != nil {
				return err
			}
		}
		n, hdr, err := events.ArrayHeader(data)
		if err != nil || n != c.Count {
			return fmt.Errorf("%w: chunk %s holds %d messages, its head says %d (%v)", ErrCorrupt,
				ChunkKey(w.tenant, w.thread, w.gen, c.First, c.Count), n, c.Count, err)
		}
		bodies[i] = data[hdr:]
		count += c.Count
		size += len(bodies[i])
	}
	data := events.AppendArrayHeader(make([]byte, 0, size+5), count)
	for _, b := range bodies {
		data = append(data, b...)
	}
	data = append(data, w.tailEnc...)
	ref := ChunkRef{First: run[0].First, Count: count, Bytes: len(data), FirstSeq: run[0].FirstSeq,
		LastSeq: ms[len(ms)-1].Seq, Level: 0}
	// The replaced chunks are garbage once the new head is written. Those
	// created in this step are not written at all; but a step that stopped
	// between creating one and this cut (crashed, or lost the
	// compare-and-swap) may have written it, so it is purged too. That is
	// always safe: no later head names a range inside the new open chunk
	// other than the new open chunk itself.
	for _, c := range run {
		w.dropCreated(c)
		w.garbage = append(w.garbage, ChunkKey(w.tenant, w.thread, w.gen, c.First, c.Count))
	}
	w.chunks = append(w.chunks[:k], ref)
	w.created = append(w.created, newChunk{ref: ref, data: data})
	return nil
}

func (w *Edit) createdData(c ChunkRef) []byte {
	for _, n := range w.created {
		if n.ref.First == c.First && n.ref.Count == c.Count {
			return n.data
		}
	}
	return nil
}

func (w *Edit) dropCreated(c ChunkRef) {
	for i, n := range w.created {
		if n.ref.First == c.First && n.ref.Count == c.Count {
			w.created = append(w.created[:i], w.created[i+1:]...)
			return
		}
	}
}

// LoadFrom puts the messages of the edit's chunks from index from on in
// front of its state's messages (for a compaction that cuts before the
// tail: [fold.ErrNeedHistory]), lowers Base by as many, and returns how
// many it added. Errors: as [Edit.Settle].
func (w *Edit) LoadFrom(ctx context.Context, from int) (int, error) {
	refs := w.chunks[from:]
	keys := RefKeys(w.tenant, w.thread, w.gen, w.chunks)[from:]
	parts := make([][]events.Message, len(refs))
	err := forEach(ctx, len(refs), fetchConcurrency, func(ctx context.Context, i int) error {
		c := refs[i]
		key := keys[i]
		data := w.createdData(c)
		if data == nil && c.Level == LevelDelta {
			data = w.known.get(c.First)
		}
		if data == nil {
			var err error
			if data, err = w.fetch(ctx, key); err != nil {
				return err
			}
		}
		ms, err := events.DecodeMessages(data)
		if err != nil {
			return fmt.Errorf("%w: chunk %s: %v", ErrCorrupt, key, err)
		}
		if len(ms) != c.Count {
			return fmt.Errorf("%w: chunk %s holds %d messages, its head says %d", ErrCorrupt, key, len(ms), c.Count)
		}
		parts[i] = ms
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	all := make([]events.Message, 0, n+len(w.s.Messages))
	for _, p := range parts {
		all = append(all, p...)
	}
	all = append(all, w.s.Messages...)
	w.s.Messages = all
	w.s.Base -= n
	return n, nil
}

// CompactionStart is the first chunk to load so that a compaction up to
// seq upTo sees every message it keeps plus at least one it cuts: the chunk
// before the first one holding a message after upTo.
func (w *Edit) CompactionStart(upTo uint64) int {
	k := 0
	for k < len(w.chunks) && w.chunks[k].LastSeq <= upTo {
		k++
	}
	return max(k-1, 0)
}

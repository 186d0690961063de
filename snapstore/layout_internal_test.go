package snapstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// layoutMsgs returns n user messages with sequences from seq on, each with
// size bytes of text.
func layoutMsgs(seq uint64, n, size int) []events.Message {
	ms := make([]events.Message, n)
	for i := range ms {
		s := fmt.Sprintf("m%d ", seq+uint64(i))
		for len(s) < size {
			s += "x"
		}
		ms[i] = events.Message{Role: events.RoleUser, Content: events.Text(s), Seq: seq + uint64(i)}
	}
	return ms
}

// layoutWork is an Edit whose stored chunks (named in chunks, their values in
// stored) hold msgs in order, and whose tail is tail.
func layoutWork(t *testing.T, cfg layoutConfig, chunks []ChunkRef, msgs, tail []events.Message) (*Edit, map[string][]byte) {
	t.Helper()
	stored := map[string][]byte{}
	for _, c := range chunks {
		stored[ChunkKey("acme", "t1", 3, c.First, c.Count)] = events.AppendMessages(nil, msgs[c.First:c.First+c.Count])
	}
	s := fold.NewState("acme", "t1")
	s.Base = len(msgs)
	s.Messages = tail
	w := &Edit{cfg: cfg, tenant: "acme", thread: "t1", s: s, gen: 3, chunks: append([]ChunkRef(nil), chunks...),
		fetch: func(_ context.Context, key string) ([]byte, error) {
			b, ok := stored[key]
			if !ok {
				return nil, fmt.Errorf("no chunk %s", key)
			}
			return b, nil
		}}
	w.encodeTail(0)
	return w, stored
}

// ref is the ChunkRef of msgs[first:first+count] at level.
func ref(msgs []events.Message, first, count int, level uint8) ChunkRef {
	b := events.AppendMessages(nil, msgs[first:first+count])
	return ChunkRef{First: first, Count: count, Bytes: len(b), FirstSeq: msgs[first].Seq, LastSeq: msgs[first+count-1].Seq, Level: level}
}

// The cut rule (package doc, rule 1): the open chunks merge like a binary
// counter. The tail joins the open chunks before it that are not larger
// than what it gathered so far, under a new key, and the replaced keys
// become garbage; otherwise it becomes an open chunk of its own; an open
// chunk too large to merge with one of its own size again is closed, as it
// is; a tail of more than chunkBytes becomes final chunks. An open chunk of
// the older layout (one growing open chunk) is closed once it is too large.
func TestCutMergesOpenChunksLikeABinaryCounter(t *testing.T) {
	all := layoutMsgs(100, 80, 200) // 226 bytes encoded each
	cfg := layoutConfig{chunkBytes: 8 << 10, tailBytes: 1 << 10}
	key := func(c ChunkRef) string { return ChunkKey("acme", "t1", 3, c.First, c.Count) }
	type cutCase struct {
		name       string
		chunks     []ChunkRef
		base, tail int // messages in chunks, then in the tail
		want       []ChunkRef
		garbage    []ChunkRef
		chunkBytes int // when not 0, instead of cfg's
	}
	// With 226-byte messages and 8 KiB chunks, a chunk of 20 messages
	// (4,523 bytes) is closed as soon as it is made: two of them would not fit.
	cases := []cutCase{
		{"the first tail opens a chunk", nil, 0, 5,
			[]ChunkRef{ref(all, 0, 5, 0)}, nil, 0},
		{"a tail joins an open chunk no larger than itself", []ChunkRef{ref(all, 0, 5, 0)}, 5, 5,
			[]ChunkRef{ref(all, 0, 10, 0)}, []ChunkRef{ref(all, 0, 5, 0)}, 0},
		{"a tail does not join a larger open chunk", []ChunkRef{ref(all, 0, 10, 0)}, 10, 5,
			[]ChunkRef{ref(all, 0, 10, 0), ref(all, 10, 5, 0)}, nil, 0},
		{"merges carry like a binary counter, and a chunk too large to merge again is closed",
			[]ChunkRef{ref(all, 0, 10, 0), ref(all, 10, 5, 0)}, 15, 5,
			[]ChunkRef{ref(all, 0, 20, 1)}, []ChunkRef{ref(all, 0, 10, 0), ref(all, 10, 5, 0)}, 0},
		{"final chunks stay as they are", []ChunkRef{ref(all, 0, 20, 1), ref(all, 20, 5, 0)}, 25, 5,
			[]ChunkRef{ref(all, 0, 20, 1), ref(all, 20, 10, 0)}, []ChunkRef{ref(all, 20, 5, 0)}, 0},
		{"an open chunk of the older layout too large to merge again is closed", []ChunkRef{ref(all, 0, 25, 0)}, 25, 5,
			[]ChunkRef{ref(all, 0, 25, 1), ref(all, 25, 5, 0)}, nil, 0},
		{"a tail of more than chunkBytes becomes final chunks and closes the open ones",
			[]ChunkRef{ref(all, 0, 10, 0), ref(all, 10, 5, 0)}, 15, 45,
			// 36 messages make 8,139 bytes, 37 would make 8,365.
			[]ChunkRef{ref(all, 0, 10, 1), ref(all, 10, 5, 1), ref(all, 15, 36, 1), ref(all, 51, 9, 1)}, nil, 0},
	}
	// 8 messages open and 8 in the tail: the joined chunk's array header
	// takes 3 bytes instead of 1, which makes it one byte too big for this
	// chunkBytes; so they are not joined, and both are closed (neither can
	// merge with one of its size).
	tight := 2*(ref(all, 0, 8, 0).Bytes-1) + 2
	cases = append(cases, cutCase{"the array header counts", []ChunkRef{ref(all, 0, 8, 0)}, 8, 8,
		[]ChunkRef{ref(all, 0, 8, 1), ref(all, 8, 8, 1)}, nil, tight})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cfg
			if tc.chunkBytes != 0 {
				cfg.chunkBytes = tc.chunkBytes
			}
			w, stored := layoutWork(t, cfg, tc.chunks, all[:tc.base], all[tc.base:tc.base+tc.tail])
			require.GreaterOrEqual(t, w.tailBytes, cfg.tailBytes, "the case's tail must be due for a cut")
			require.NoError(t, w.cut(context.Background()))
			require.Equal(t, tc.want, w.chunks)
			require.Empty(t, w.s.Messages)
			require.Equal(t, tc.base+tc.tail, w.s.Base)
			var garbage []string
			for _, c := range tc.garbage {
				garbage = append(garbage, key(c))
			}
			require.Equal(t, garbage, w.garbage)
			for _, c := range w.chunks {
				require.LessOrEqual(t, c.Bytes, cfg.chunkBytes, "chunk %s", key(c))
			}
			// Every chunk the new head names is stored or created, and holds
			// exactly its messages.
			created := map[string][]byte{}
			for _, n := range w.created {
				created[key(n.ref)] = n.data
				require.Contains(t, w.chunks, n.ref, "created chunk %s is named", key(n.ref))
			}
			for _, c := range w.chunks {
				b, ok := created[key(c)]
				if !ok {
					b, ok = stored[key(c)]
				}
				require.True(t, ok, "chunk %s", key(c))
				require.Len(t, b, c.Bytes, "chunk %s", key(c))
				ms, err := events.DecodeMessages(b)
				require.NoError(t, err)
				require.Equal(t, all[c.First:c.First+c.Count], ms, "chunk %s", key(c))
			}
		})
	}
}

// A lone delta of TailBytes or more (an instance with a larger TailBytes
// wrote it) joined with no new message and no open chunk becomes a chunk
// of the same range: under a chunk key, while the delta's own key is
// garbage; and a garbage entry that would cover
// a named key is dropped before the head is written.
func TestJoinedDeltaUnderItsOwnKeyIsNotGarbage(t *testing.T) {
	msgs := layoutMsgs(10, 4, 300)
	delta := ref(msgs, 0, 4, LevelDelta)
	w, stored := layoutWork(t, layoutConfig{chunkBytes: 64 << 10, tailBytes: 1024}, nil, msgs, nil)
	w.chunks = []ChunkRef{delta}
	stored[DeltaKey("acme", "t1", 3, 0, 0, 4)] = events.AppendMessages(nil, msgs)
	require.NoError(t, w.cut(context.Background()))
	require.Len(t, w.chunks, 1)
	require.EqualValues(t, 0, w.chunks[0].Level, "the delta became the open chunk")
	require.Equal(t, []string{DeltaKey("acme", "t1", 3, 0, 0, 4)}, w.garbage, "the joined delta is garbage")
	require.False(t, coveredBy(ChunkKey("acme", "t1", 3, 0, 4), w.garbage))

	w.garbage = append(w.garbage, "acme.t1.c.3.>", ChunkKey("acme", "t1", 3, 0, 4), "acme.t1.c.2.>")
	w.pruneGarbage()
	require.Equal(t, []string{DeltaKey("acme", "t1", 3, 0, 0, 4), "acme.t1.c.2.>"}, w.garbage, "a key the head names is never purged")
}

// A thread's cut point lies between half of tailBytes and tailBytes, is
// the same for every edit of the thread, and differs between threads, so
// that threads growing in step do not cut at once.
func TestCutPointIsFixedPerThreadAndSpread(t *testing.T) {
	seen := map[int]bool{}
	for i := range 100 {
		w := &Edit{cfg: layoutConfig{tailBytes: 32 << 10}, tenant: "acme", thread: fmt.Sprint("t", i)}
		at := w.cutAt()
		require.GreaterOrEqual(t, at, 16<<10)
		require.LessOrEqual(t, at, 32<<10)
		require.Equal(t, at, (&Edit{cfg: w.cfg, tenant: "acme", thread: w.thread}).cutAt(), "fixed per thread")
		seen[at/1024] = true
	}
	require.Greater(t, len(seen), 10, "spread over the range")
}

// Over a long thread's life, each message is written into about
// log2(chunkBytes/tailBytes) chunks (the open chunks merge like a binary
// counter), not chunkBytes/(2*cut point) as when one open chunk takes
// every tail (here: 4 times the history, where that rule would write 50).
func TestChunkBytesWrittenGrowLogarithmically(t *testing.T) {
	const n = 6000 // 226 bytes each: 1.36 MB, five chunks of 256 KiB
	all := layoutMsgs(100_000, n, 200)
	cfg := layoutConfig{chunkBytes: 256 << 10, tailBytes: 4 << 10}
	w, stored := layoutWork(t, cfg, nil, nil, nil)
	written := 0
	for i := range all {
		before := w.Mark()
		w.s.Messages = append(w.s.Messages, all[i])
		require.NoError(t, w.Settle(context.Background(), before))
		// Each cut is its own step: what it created is written, and
		// later cuts read it back.
		for _, c := range w.created {
			stored[ChunkKey("acme", "t1", 3, c.ref.First, c.ref.Count)] = c.data
			written += len(c.data)
		}
		w.created = nil
	}
	history := len(events.AppendMessages(nil, all[:w.s.Base]))
	ratio := float64(written) / float64(history)
	t.Logf("%d chunks, %d bytes written for %d bytes of history: %.1fx", len(w.chunks), written, history, ratio)
	require.Less(t, ratio, 7.0, "chunk bytes written per history byte")
	for i, c := range w.chunks {
		ms, err := events.DecodeMessages(stored[ChunkKey("acme", "t1", 3, c.First, c.Count)])
		require.NoError(t, err)
		require.Equal(t, all[c.First:c.First+c.Count], ms, "chunk %d", i)
	}
}

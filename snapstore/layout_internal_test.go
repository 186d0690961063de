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

// The cut rule (package doc, rule 1): the tail joins the open chunk while
// the result stays within chunkBytes, under a new key, and the old key
// becomes garbage; otherwise the open chunk is closed as it is and the tail
// opens the next one; a tail of chunkBytes or more becomes final chunks.
// A head of the older layout, with several small chunks at the end, has
// them all joined into the one open chunk.
func TestCutKeepsOneOpenChunk(t *testing.T) {
	all := layoutMsgs(100, 40, 200) // about 210 bytes encoded each
	cfg := layoutConfig{chunkBytes: 4 << 10, tailBytes: 1 << 10}
	key := func(c ChunkRef) string { return ChunkKey("acme", "t1", 3, c.First, c.Count) }
	type cutCase struct {
		name       string
		chunks     []ChunkRef
		base, tail int // messages in chunks, then in the tail
		want       []ChunkRef
		garbage    []ChunkRef
		chunkBytes int // when not 0, instead of cfg's
	}
	cases := []cutCase{
		{"the first tail opens a chunk", nil, 0, 5,
			[]ChunkRef{ref(all, 0, 5, 0)}, nil, 0},
		{"a tail joins the open chunk", []ChunkRef{ref(all, 0, 5, 0)}, 5, 5,
			[]ChunkRef{ref(all, 0, 10, 0)}, []ChunkRef{ref(all, 0, 5, 0)}, 0},
		{"a tail that does not fit closes the open chunk", []ChunkRef{ref(all, 0, 15, 0)}, 15, 5,
			[]ChunkRef{ref(all, 0, 15, 1), ref(all, 15, 5, 0)}, nil, 0},
		{"final chunks stay as they are", []ChunkRef{ref(all, 0, 15, 1), ref(all, 15, 5, 0)}, 20, 5,
			[]ChunkRef{ref(all, 0, 15, 1), ref(all, 15, 10, 0)}, []ChunkRef{ref(all, 15, 5, 0)}, 0},
		{"small chunks of the older layout join the open chunk", []ChunkRef{ref(all, 0, 15, 1), ref(all, 15, 5, 0), ref(all, 20, 5, 0)}, 25, 5,
			[]ChunkRef{ref(all, 0, 15, 1), ref(all, 15, 15, 0)}, []ChunkRef{ref(all, 15, 5, 0), ref(all, 20, 5, 0)}, 0},
		{"a tail of chunkBytes becomes final chunks and closes the open one", []ChunkRef{ref(all, 0, 5, 0)}, 5, 35,
			// 18 messages of the tail make 4,071 bytes, 19 would make 4,300.
			[]ChunkRef{ref(all, 0, 5, 1), ref(all, 5, 18, 1), ref(all, 23, 17, 1)}, nil, 0},
	}
	// 10 messages in the open chunk and 6 in the tail: the joined chunk's
	// array header takes 3 bytes instead of 1, which makes it one byte too
	// big for this chunkBytes; so the open chunk is closed.
	tight := ref(all, 0, 10, 0).Bytes - 1 + len(events.AppendMessages(nil, all[10:16])) - 1 + 2
	cases = append(cases, cutCase{"the array header counts", []ChunkRef{ref(all, 0, 10, 0)}, 10, 6,
		[]ChunkRef{ref(all, 0, 10, 1), ref(all, 10, 6, 0)}, nil, tight})
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

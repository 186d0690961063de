package snapstore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The chunk hints stay within both bounds (threads and chunk references),
// keep the newest hint of every thread they were just given, and account
// for a thread whose chunk list is replaced.
func TestChunkHintsStayBounded(t *testing.T) {
	c := &chunkHints{m: map[string]chunkHint{}}
	refs := func(n int) []ChunkRef { return make([]ChunkRef, n) }
	check := func() {
		t.Helper()
		n := 0
		for _, h := range c.m {
			n += len(h.chunks)
		}
		require.Equal(t, n, c.refs, "refs counts the chunk references held")
		require.LessOrEqual(t, len(c.m), maxHints)
		require.LessOrEqual(t, c.refs, maxHintRefs)
	}
	for i := range maxHints + 100 {
		key := fmt.Sprint("acme.t", i)
		c.put(key, 1, refs(1), 3, 0)
		h, ok := c.get(key)
		require.True(t, ok, "the hint just put is kept (%s)", key)
		require.Len(t, h.chunks, 1)
	}
	check()
	require.Equal(t, maxHints, len(c.m))

	// Long threads: the reference bound evicts threads before the thread
	// bound does.
	for i := range 200 {
		key := fmt.Sprint("acme.long", i)
		c.put(key, 1, refs(1000), 0, 0)
		_, ok := c.get(key)
		require.True(t, ok)
		check()
	}
	require.Less(t, len(c.m), maxHints)

	// Replacing a thread's list keeps one entry and the right count.
	c.put("acme.long199", 2, refs(10), 0, 0)
	h, ok := c.get("acme.long199")
	require.True(t, ok)
	require.EqualValues(t, 2, h.gen)
	check()

	// A list longer than the whole bound is not kept, evicts nothing, and
	// drops the thread's older hint.
	before := len(c.m)
	c.put("acme.huge", 1, refs(maxHintRefs+1), 0, 0)
	_, ok = c.get("acme.huge")
	require.False(t, ok)
	require.Equal(t, before, len(c.m))
	c.put("acme.long199", 3, refs(maxHintRefs+1), 0, 0)
	_, ok = c.get("acme.long199")
	require.False(t, ok, "the older hint of a thread that outgrew the bound is dropped")
	require.Equal(t, before-1, len(c.m))
	check()
}

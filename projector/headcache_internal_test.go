package projector

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The head cache evicts the least recently used cursor when it holds more
// than max threads or more than maxBytes of estimated memory, and keeps
// its byte count equal to the sum of what it holds.
func TestHeadCacheEvictsLeastRecentlyUsedByCountAndBytes(t *testing.T) {
	cur := func(tail int) *cursor { return &cursor{sizes: []int{tail}} }
	sum := func(c *headCache) int {
		n := 0
		for e := c.ll.Front(); e != nil; e = e.Next() {
			n += cursorCost(e.Value.(*cachedCursor).cur)
		}
		return n
	}

	c := newHeadCache(3, 1<<30)
	for i := range 3 {
		c.put(fmt.Sprint(i), cur(10))
	}
	require.NotNil(t, c.get("0")) // 0 is now the most recently used
	c.put("3", cur(10))
	require.Nil(t, c.get("1"), "least recently used evicted by count")
	for _, k := range []string{"0", "2", "3"} {
		require.NotNil(t, c.get(k), k)
	}
	require.Equal(t, sum(c), c.bytes)

	big := cursorCost(cur(4000))
	c = newHeadCache(100, 2*big+10)
	c.put("a", cur(4000))
	c.put("b", cur(4000))
	require.NotNil(t, c.get("a"))
	c.put("c", cur(4000))
	require.Nil(t, c.get("b"), "least recently used evicted by bytes")
	require.NotNil(t, c.get("a"))
	require.NotNil(t, c.get("c"))
	require.Equal(t, sum(c), c.bytes)
	require.LessOrEqual(t, c.bytes, 2*big+10)

	// Replacing a cursor re-counts its bytes; dropping frees them.
	c.put("a", cur(10))
	require.Equal(t, sum(c), c.bytes)
	c.drop("a")
	c.drop("nope")
	require.Nil(t, c.get("a"))
	require.Equal(t, sum(c), c.bytes)

	// One cursor larger than the bound is still kept (the next step uses it).
	c = newHeadCache(10, 100)
	c.put("huge", cur(1<<20))
	require.NotNil(t, c.get("huge"))

	// max 0 disables it.
	c = newHeadCache(0, 1<<20)
	c.put("x", cur(1))
	require.Nil(t, c.get("x"))
}

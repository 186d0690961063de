package lru_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/lru"
)

// The cache evicts the least recently used entry when it holds more than
// maxEntries entries or more than maxCost, and keeps its cost equal to the
// sum of what it holds.
func TestCacheEvictsLeastRecentlyUsedByCountAndCost(t *testing.T) {
	has := func(c *lru.Cache[string, int], k string) bool { _, ok := c.Get(k); return ok }

	c := lru.New[string, int](3, 1<<30)
	for i := range 3 {
		c.Put(fmt.Sprint(i), i, 10)
	}
	require.True(t, has(c, "0")) // 0 is now the most recently used
	c.Put("3", 3, 10)
	require.False(t, has(c, "1"), "least recently used evicted by count")
	for _, k := range []string{"0", "2", "3"} {
		require.True(t, has(c, k), k)
	}
	require.Equal(t, int64(30), c.Cost())

	c = lru.New[string, int](100, 2*4000+10)
	c.Put("a", 1, 4000)
	c.Put("b", 2, 4000)
	require.True(t, has(c, "a"))
	c.Put("c", 3, 4000)
	require.False(t, has(c, "b"), "least recently used evicted by cost")
	require.True(t, has(c, "a"))
	require.True(t, has(c, "c"))
	require.Equal(t, int64(8000), c.Cost())

	// Replacing an entry re-counts its cost; removing frees it.
	c.Put("a", 4, 10)
	require.Equal(t, int64(4010), c.Cost())
	v, _ := c.Get("a")
	require.Equal(t, 4, v)
	c.Remove("a")
	c.Remove("nope")
	require.False(t, has(c, "a"))
	require.Equal(t, int64(4000), c.Cost())
	require.Equal(t, 1, c.Len())

	// One entry costlier than the bound is still kept (the newest).
	c = lru.New[string, int](10, 100)
	c.Put("huge", 1, 1<<20)
	require.True(t, has(c, "huge"))

	// maxEntries 0 disables it.
	c = lru.New[string, int](0, 1<<20)
	c.Put("x", 1, 1)
	require.False(t, has(c, "x"))
}

// PutIf replaces a cached value only when replace says so, and still marks
// the entry most recently used.
func TestPutIfKeepsTheNewerValue(t *testing.T) {
	c := lru.New[string, int](2, 0)
	newer := func(v int) func(int) bool { return func(old int) bool { return old <= v } }
	require.True(t, c.PutIf("a", 5, 1, newer(5)))
	require.False(t, c.PutIf("a", 3, 1, newer(3)), "an older value does not replace a newer one")
	v, _ := c.Get("a")
	require.Equal(t, 5, v)
	c.Put("b", 1, 1)
	require.False(t, c.PutIf("a", 4, 1, newer(4))) // touches a
	c.Put("c", 1, 1)                               // evicts b, the least recently used
	_, ok := c.Get("b")
	require.False(t, ok)
	_, ok = c.Get("a")
	require.True(t, ok)
}

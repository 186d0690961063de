package threadkey

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/lru"
)

// The key cache is bounded by bytes as well as by count: a key's cost
// counts the replacement table a rotation leaves, so keys with large
// tables take the room of many plain ones.
func TestKeyCacheIsBoundedByBytes(t *testing.T) {
	plain := &threadKey{}
	require.EqualValues(t, 1024, plain.cost())
	big := &threadKey{table: map[string]tableEntry{}}
	for i := range 1000 {
		big.table[fmt.Sprint("event-", i)] = tableEntry{key: make([]byte, 32), replacement: make([]byte, 1000)}
	}
	require.Greater(t, big.cost(), int64(1000*1000), "the table is counted")

	c := lru.New[string, *threadKey](DefaultCacheThreads, CacheBytes)
	for i := range 100 {
		c.Put(fmt.Sprint("t", i), big, big.cost())
	}
	require.LessOrEqual(t, c.Cost(), int64(CacheBytes))
	require.Less(t, c.Len(), 100, "keys with large tables are evicted by bytes, not count")
}

package events_test

import (
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// An IDSource's ids are canonical UUIDv7s, distinct across goroutines
// sharing the source, and increasing in the order one goroutine takes them,
// as NewID's are; the zero value works.
func TestIDSourceMakesDistinctIncreasingUUIDv7s(t *testing.T) {
	var src events.IDSource
	const goroutines, each = 4, 3000 // more than one block of random bytes each
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				ids[g] = append(ids[g], src.NewID())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, list := range ids {
		for i, id := range list {
			require.True(t, events.CanonicalUUID(id), id)
			u, err := uuid.Parse(id)
			require.NoError(t, err)
			require.Equal(t, uuid.Version(7), u.Version(), id)
			require.Equal(t, uuid.RFC4122, u.Variant(), id)
			require.False(t, seen[id], "%s made twice", id)
			seen[id] = true
			if i > 0 {
				require.Less(t, list[i-1], id, "ids of one goroutine increase")
			}
		}
	}
	require.Len(t, seen, goroutines*each)
}

// BenchmarkNewID compares NewID (a crypto/rand read per id) with an
// IDSource's ids.
func BenchmarkNewID(b *testing.B) {
	b.Run("NewID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = events.NewID()
		}
	})
	b.Run("IDSource", func(b *testing.B) {
		b.ReportAllocs()
		var src events.IDSource
		for b.Loop() {
			_ = src.NewID()
		}
	})
}

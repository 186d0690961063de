package threadkey_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkOpenThroughKeys is opening and sealing one ~500-byte event
// through [threadkey.Keys] with the thread's key cached: what a reader and
// a writer pay per event, the cache look-up included (BenchmarkOpenEvent
// holds the key in hand).
//
//	go test ./threadkey -run '^$' -bench BenchmarkOpenThroughKeys -benchmem -count 5
func BenchmarkOpenThroughKeys(b *testing.B) {
	k, _ := newKeys(b)
	ctx := context.Background()
	clear := event(b, "t", strings.Repeat("x", 400))
	sealed, err := k.SealEvent(ctx, clear)
	require.NoError(b, err)
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := k.OpenEvent(ctx, sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("seal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := k.SealEvent(ctx, clear); err != nil {
				b.Fatal(err)
			}
		}
	})
}

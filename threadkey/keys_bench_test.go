package threadkey_test

import (
	"context"
	"strings"
	"testing"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/benchtest"
	"github.com/convlog/convlog/threadkey"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/chacha20poly1305"
)

// BenchmarkOpenThroughKeys is opening and sealing one ~500-byte event
// through [threadkey.Keys] with the thread's key cached: what a reader and
// a writer pay per event, the cache look-up included (BenchmarkOpenEvent
// holds the key in hand); "seal-located" is a seal through
// [threadkey.Keys.SealLocated], the payload member given as an appending
// client has it from the encoding. "ratios" times a block of each back to back per
// round beside the bare XChaCha20-Poly1305 of a payload as long with an
// associated data as long (the limit, key in hand, into a reused buffer)
// and reports the medians over rounds of open/aead, seal/aead and
// seal-located/aead and of
// each operation's time.
//
//	go test ./threadkey -run '^$' -bench BenchmarkOpenThroughKeys -benchmem -count 5
func BenchmarkOpenThroughKeys(b *testing.B) {
	k, _ := newKeys(b)
	ctx := context.Background()
	clear := event(b, "t", strings.Repeat("x", 400))
	sealed, err := k.SealEvent(ctx, clear)
	require.NoError(b, err)
	open := func() {
		if _, err := k.OpenEvent(ctx, sealed); err != nil {
			b.Fatal(err)
		}
	}
	seal := func() {
		if _, err := k.SealEvent(ctx, clear); err != nil {
			b.Fatal(err)
		}
	}
	// A writer that has just encoded the event knows its payload member.
	pm, err := events.LocatePayloadNoCopy(clear)
	require.NoError(b, err)
	sealLocated := func() {
		if _, err := k.SealLocated(ctx, clear, pm); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			open()
		}
	})
	b.Run("seal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			seal()
		}
	})
	b.Run("seal-located", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sealLocated()
		}
	})
	b.Run("ratios", func(b *testing.B) {
		a, err := chacha20poly1305.NewX(make([]byte, 32))
		require.NoError(b, err)
		// The payload's msgpack is about the plaintext's length, the
		// associated data label, names, id and type about 100 bytes.
		plain, ad, nonce := make([]byte, 410), make([]byte, 100), make([]byte, 24)
		box := a.Seal(nil, nonce, plain, ad)
		buf := make([]byte, 0, len(box))
		ops := []threadkey.BenchOp{
			threadkey.NewBenchOp("open", open), threadkey.NewBenchOp("seal", seal),
			threadkey.NewBenchOp("seal-located", sealLocated),
			threadkey.NewBenchOp("aead-open", func() {
				if _, err := a.Open(buf[:0], nonce, box, ad); err != nil {
					b.Fatal(err)
				}
			}),
			threadkey.NewBenchOp("aead-seal", func() { _ = a.Seal(buf[:0], nonce, plain, ad) }),
		}
		times := threadkey.Interleave(b, ops)
		b.ReportMetric(threadkey.Ratio(times, "open", "aead-open"), "open/aead")
		b.ReportMetric(threadkey.Ratio(times, "seal", "aead-seal"), "seal/aead")
		b.ReportMetric(threadkey.Ratio(times, "seal-located", "aead-seal"), "seal-located/aead")
		for _, name := range []string{"open", "seal", "seal-located", "aead-open", "aead-seal"} {
			b.ReportMetric(benchtest.Median(times[name]), "ns/"+name)
		}
	})
}

package threadkey

import (
	"strings"
	"testing"

	"github.com/convlog/convlog/events"
)

// BenchmarkOpenEvent is what opening costs one sealed event of about 500
// bytes with its thread key in hand (no KV): the event key's derivation,
// AES-GCM and the splice back into the clear encoding. Compare with
// events.Unmarshal of the same clear bytes (BenchmarkOpenEvent/decode).
//
//	go test ./threadkey -run '^$' -bench BenchmarkOpenEvent -benchmem
func BenchmarkOpenEvent(b *testing.B) {
	tk, err := newKey()
	if err != nil {
		b.Fatal(err)
	}
	clear, err := events.Marshal(events.New("acme", "t", "p", events.UserMessage{Content: events.Text(strings.Repeat("x", 400))}))
	if err != nil {
		b.Fatal(err)
	}
	pm, _ := events.LocatePayload(clear)
	sealed, err := sealEvent(tk, clear, pm)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("open", func(b *testing.B) {
		b.SetBytes(int64(len(sealed)))
		for b.Loop() {
			spm, err := events.LocatePayload(sealed)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := openEvent(tk, sealed, spm); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(clear)))
		for b.Loop() {
			if _, err := events.Unmarshal(clear); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package threadkey

import (
	"strings"
	"testing"

	"github.com/convlog/convlog/events"
)

// BenchmarkOpenEvent is what opening and sealing cost one event of about
// 500 bytes with its thread key in hand (no KV): the event key's
// derivation, the AEAD and the splice into or out of the clear encoding,
// for format 2 (what writers seal) and format 1 (what older events hold).
// Compare with events.Unmarshal of the same clear bytes
// (BenchmarkOpenEvent/decode). -count repeats the set, so the formats'
// runs alternate.
//
//	go test ./threadkey -run '^$' -bench BenchmarkOpenEvent -benchmem -count 5
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
	for _, f := range []struct {
		name string
		seal func(*threadKey, []byte, events.PayloadMember) ([]byte, error)
	}{{"v2", sealEvent}, {"v1", sealEventV1}} {
		sealed, err := f.seal(tk, clear, pm)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("open-"+f.name, func(b *testing.B) {
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
		b.Run("seal-"+f.name, func(b *testing.B) {
			b.SetBytes(int64(len(clear)))
			for b.Loop() {
				cpm, err := events.LocatePayload(clear)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.seal(tk, clear, cpm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(clear)))
		for b.Loop() {
			if _, err := events.Unmarshal(clear); err != nil {
				b.Fatal(err)
			}
		}
	})
}

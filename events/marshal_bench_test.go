package events_test

import (
	"testing"

	"github.com/convlog/convlog/events"
)

// BenchmarkMarshal encodes the events of BenchmarkUnmarshal into a reused
// buffer, as a writer that seals at once does (MarshalAppend).
func BenchmarkMarshal(b *testing.B) {
	evs := benchEvents()
	for _, name := range []string{"user-512", "assistant-512", "assistant-tools", "tool-result", "restore-5"} {
		e, err := events.Unmarshal(evs[name])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(evs[name])))
			var buf []byte
			for b.Loop() {
				if buf, err = events.MarshalAppend(buf[:0], e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

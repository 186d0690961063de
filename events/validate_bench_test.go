package events_test

import (
	"testing"

	"github.com/convlog/convlog/events"
)

// BenchmarkValidate validates the events of BenchmarkUnmarshal, as a
// writer does before each append.
func BenchmarkValidate(b *testing.B) {
	evs := benchEvents()
	for _, name := range []string{"user-512", "assistant-512", "assistant-tools", "tool-result"} {
		e, err := events.Unmarshal(evs[name])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Validate(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

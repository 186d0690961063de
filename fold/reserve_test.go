package fold_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// BenchmarkApplyBytes folds a thread of 100,000 stored user messages of
// 512 bytes of text, decoding each (the replay's fold, messages in
// memory; BENCHMARKS.md section 4 has its figures), growing
// State.Messages as it goes, with State.Reserve first, and with
// ApplyBytesNoCopy (strings not copied out of the messages) as the
// client's replay folds; "alternating" is that last fold over the bench's
// replay thread (bench/replay.go): user and assistant messages in turn,
// the assistant's with an agent and a model. Reported: events/s.
//
//	go test ./fold -run '^$' -bench BenchmarkApplyBytes -benchtime 5x
func BenchmarkApplyBytes(b *testing.B) {
	const n = 100_000
	msgs := make([][]byte, n)
	at := time.Now()
	created, err := events.Marshal(events.New("default", "t", "bench", events.ThreadCreated{}))
	if err != nil {
		b.Fatal(err)
	}
	msgs[0] = created
	text := strings.Repeat("x", 512)
	for i := 1; i < n; i++ {
		if msgs[i], err = events.Marshal(events.New("default", "t", "bench", events.UserMessage{Content: events.Text(text)})); err != nil {
			b.Fatal(err)
		}
	}
	alternating := make([][]byte, n)
	alternating[0] = created
	for i := 1; i < n; i++ {
		var p events.Payload = events.UserMessage{Content: events.Text(text)}
		if i%2 == 0 {
			p = events.AssistantMessage{Content: events.Text(text), Agent: "demo", Model: "offline"}
		}
		if alternating[i], err = events.Marshal(events.New("default", "t", "bench", p)); err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range []struct {
		name    string
		msgs    [][]byte
		reserve bool
		apply   func(*fold.State, uint64, time.Time, []byte) error
	}{
		{"growing", msgs, false, fold.ApplyBytes},
		{"reserved", msgs, true, fold.ApplyBytes},
		{"reserved-nocopy", msgs, true, fold.ApplyBytesNoCopy}, // the client's replay
		{"reserved-nocopy-alternating", alternating, true, fold.ApplyBytesNoCopy},
	} {
		b.Run(v.name, func(b *testing.B) { applyAll(b, v.msgs, at, v.reserve, v.apply) })
	}
}

func applyAll(b *testing.B, msgs [][]byte, at time.Time, reserve bool, apply func(*fold.State, uint64, time.Time, []byte) error) {
	n := len(msgs)
	for b.Loop() {
		s := fold.NewState("default", "t")
		if reserve {
			s.Reserve(n)
		}
		for i, m := range msgs {
			if err := apply(s, uint64(i+1), at, m); err != nil {
				b.Fatal(err)
			}
		}
		if s.MessageCount() != n-1 {
			b.Fatalf("%d messages", s.MessageCount())
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

// Reserve changes no content: a fold with room reserved equals one
// without, and appending within the room does not reallocate.
func TestReserveChangesNothing(t *testing.T) {
	at := time.Now()
	var msgs [][]byte
	for i := range 50 {
		var p events.Payload = events.UserMessage{Content: events.Text(strings.Repeat("y", i))}
		if i == 0 {
			p = events.ThreadCreated{}
		}
		b, err := events.Marshal(events.New("default", "t", "test", p))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, b)
	}
	plain, reserved := fold.NewState("default", "t"), fold.NewState("default", "t")
	reserved.Reserve(len(msgs))
	reserved.Reserve(-1)
	room := cap(reserved.Messages)
	if room < len(msgs) {
		t.Fatalf("cap %d after Reserve(%d)", room, len(msgs))
	}
	for i, m := range msgs {
		_ = fold.ApplyBytes(plain, uint64(i+1), at, m)
		_ = fold.ApplyBytes(reserved, uint64(i+1), at, m)
	}
	if cap(reserved.Messages) != room {
		t.Fatalf("reallocated: cap %d, was %d", cap(reserved.Messages), room)
	}
	if !reflect.DeepEqual(plain, reserved) {
		t.Fatalf("states differ:\n%+v\n%+v", plain, reserved)
	}
}

package fold

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/convlog/convlog/events"
)

func fuzzSeeds() []events.Event {
	at := time.Unix(1700000000, 0).UTC()
	mk := func(p events.Payload) events.Event {
		e := events.New("t", "th", "fuzz", p)
		e.Time = at
		return e
	}
	sp := "be brief"
	title := "x"
	return []events.Event{
		mk(events.ThreadCreated{Title: "t", SystemPrompt: &sp, Metadata: map[string]string{"a": "b"}, PendingPolicy: events.PendingCancel}),
		mk(events.ThreadUpdated{Title: &title, Metadata: map[string]string{"a": ""}}),
		mk(events.UserMessage{Content: events.Text("hi")}),
		mk(events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}, {ID: "c2", Name: "g", Arguments: "[]"}}}),
		mk(events.ToolResult{ToolCallID: "c1", Content: events.Text("ok")}),
		mk(events.ToolResult{ToolCallID: "zz", Content: events.Text("ok")}),
		mk(events.Reset{}),
		mk(events.Restore{Messages: []events.Message{{Role: events.RoleUser, Content: events.Text("a")},
			{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{{ID: "c9", Name: "f", Arguments: "{}"}}}}}),
		mk(events.Compaction{UpToSeq: 3, Summary: events.Text("sum")}),
		mk(events.StateSet{Key: "k", Value: json.RawMessage(`{"v":1}`)}),
		mk(events.StateDeleted{Key: "k"}),
		mk(events.Forked{SourceTenant: "t", SourceThread: "src", SourceSeq: 4, Messages: []events.Message{{Role: events.RoleUser, Content: events.Text("a")}}}),
		mk(events.Deleted{}), mk(events.Undeleted{}), mk(events.Erased{RemovedEvents: 3, LastSeq: 9}),
	}
}

// FuzzApplyBytes feeds arbitrary bytes to the fold on a thread with history
// and pending calls: it never panics, the version always advances, and the
// history stays valid for chat APIs (every tool message answers a call
// pending at that point, and what is left pending is State.Pending).
func FuzzApplyBytes(f *testing.F) {
	for _, e := range fuzzSeeds() {
		b, err := events.Marshal(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
		f.Add(b, uint8(1))
	}
	f.Add([]byte{0x80}, uint8(2))
	f.Add([]byte("not msgpack"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, start uint8) {
		s := NewState("t", "th")
		seq := uint64(0)
		apply := func(e events.Event) {
			seq++
			_ = Apply(s, events.Stored{Event: e, Seq: seq, StoredAt: e.Time})
		}
		seeds := fuzzSeeds()
		apply(seeds[0])
		switch start % 3 {
		case 1: // a pending call at the end
			apply(seeds[2])
			apply(seeds[3])
		case 2: // a windowed state: some history out of memory
			apply(seeds[2])
			s.Base, s.Messages = 5, nil
		}
		before := *s
		_ = Check(s, events.Stored{Seq: seq + 1})
		err := ApplyBytes(s, seq+1, time.Unix(1700000001, 0), data)
		if err == ErrNeedHistory {
			if s.Version != before.Version {
				t.Fatal("ErrNeedHistory changed the state")
			}
			return
		}
		if s.Version != seq+1 {
			t.Fatalf("version %d after folding seq %d", s.Version, seq+1)
		}
		if s.Base > 0 {
			return // the window cannot be checked on its own
		}
		_, pending, herr := checkHistory(s.Messages, events.Stored{})
		if herr != nil {
			t.Fatalf("history became invalid: %v", herr)
		}
		if len(pending) != len(s.Pending) {
			t.Fatalf("history leaves %d calls pending, state says %d", len(pending), len(s.Pending))
		}
		for i := range pending {
			if pending[i].ID != s.Pending[i].ID {
				t.Fatalf("pending call %d is %q in the history, %q in the state", i, pending[i].ID, s.Pending[i].ID)
			}
		}
	})
}

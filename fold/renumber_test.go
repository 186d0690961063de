package fold_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/foldcases"
)

// Folding events with provisional sequences (version+1, +2, ...) and then
// renumbering them to the stored sequences gives exactly the state that
// folding them with the stored sequences gives (and ApplyValidated, for
// these valid events, what Apply gives), for random runs of the
// event types Renumber supports (messages with parallel tool calls and
// reused call ids, results, the cancel policy's synthetic results, state
// and metadata changes, rejected events).
func TestRenumberEqualsFoldWithStoredSequences(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		at := time.Unix(1700000000, 0)
		ev := func(p events.Payload) events.Event {
			at = at.Add(time.Millisecond)
			e := events.New("acme", "t1", "test", p)
			e.Time = at
			return e
		}
		policy := events.PendingReject
		if r.IntN(2) == 0 {
			policy = events.PendingCancel
		}
		s := fold.NewState("acme", "t1")
		seq := uint64(r.IntN(50) + 1)
		require.NoError(t, fold.Apply(s, events.Stored{Seq: seq, Event: ev(events.ThreadCreated{PendingPolicy: policy})}))
		call := 0
		for round := 0; round < 20; round++ {
			var evs []events.Event
			for range r.IntN(4) + 1 {
				var p events.Payload
				switch k := r.IntN(7); {
				case k == 0:
					p = foldcases.User(fmt.Sprintf("u%d", round))
				case k == 1:
					p = foldcases.Say("a")
				case k == 2:
					var ids []string
					for range r.IntN(3) + 1 {
						ids = append(ids, fmt.Sprintf("call_%d", call%4)) // ids repeat, as in real threads
						call++
					}
					p = foldcases.Calls(ids...)
				case k == 3 && len(s.Pending) > 0:
					p = foldcases.Result(s.Pending[r.IntN(len(s.Pending))].ID, "r")
				case k == 4:
					p = events.StateSet{Key: "k", Value: json.RawMessage(fmt.Sprint(round))}
				case k == 5:
					title := fmt.Sprintf("title %d", round)
					p = events.ThreadUpdated{Title: &title}
				default:
					p = foldcases.Result("nope", "no such call") // rejected
				}
				require.True(t, fold.Renumberable(p), "%T", p)
				evs = append(evs, ev(p))
			}
			// The stored sequences: after the version, with gaps (other
			// threads' events in between).
			from := s.Version
			stored := make([]uint64, len(evs))
			next := from
			for i := range evs {
				next += uint64(r.IntN(5) + 1)
				stored[i] = next
			}
			want := s.Clone()
			for i, e := range evs {
				_ = fold.Apply(want, events.Stored{Event: e, Seq: stored[i]})
			}
			got := s.Clone()
			for i, e := range evs {
				_ = fold.Apply(got, events.Stored{Event: e, Seq: from + uint64(i) + 1})
			}
			got.Renumber(from, stored)
			require.Equal(t, want, got, "seed %d round %d", seed, round)
			// ApplyValidated gives valid events Apply's verdicts and state.
			unchecked := s.Clone()
			for i, e := range evs {
				require.NoError(t, e.Validate())
				_ = fold.ApplyValidated(unchecked, events.Stored{Event: e, Seq: stored[i]})
			}
			require.Equal(t, want, unchecked, "ApplyValidated: seed %d round %d", seed, round)
			s = want
		}
	}
}

// The types whose sequences Renumber cannot attribute must be refused.
func TestRenumberableRefusesHistoryReplacingEvents(t *testing.T) {
	for _, p := range []events.Payload{events.Restore{}, events.Compaction{}, events.Forked{},
		events.Reset{}, events.ThreadCreated{}, events.Erased{}, events.Deleted{}, events.Undeleted{}} {
		require.False(t, fold.Renumberable(p), "%T", p)
	}
}

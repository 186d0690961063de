package fold_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// The erasure marker of a real erase: over the events folded before it
// (which the purge removed) it applies through ApplyErasure, empties the
// thread, and everything after it is rejected; on a fresh state (the log
// folded from its start, where the marker is the first message) Apply
// takes it too.
func TestErasureMarkerOnAPurgedSubject(t *testing.T) {
	at := time.Unix(1700000000, 0)
	ev := func(seq uint64, p events.Payload) events.Stored {
		e := events.New("acme", "t", "test", p)
		e.Time = at
		return events.Stored{Event: e, Seq: seq, StoredAt: at}
	}
	marker := ev(4, events.Erased{RemovedEvents: 3, LastSeq: 3, Reason: "GDPR"})

	s := fold.NewState("acme", "t")
	require.NoError(t, fold.Apply(s, ev(1, events.ThreadCreated{})))
	require.NoError(t, fold.Apply(s, ev(2, events.UserMessage{Content: events.Text("secret")})))
	require.NoError(t, fold.Apply(s, ev(3, events.StateSet{Key: "k", Value: []byte(`1`)})))
	require.NoError(t, fold.ApplyErasure(s, marker))
	require.True(t, s.Erased)
	require.Empty(t, s.KV)
	require.Empty(t, s.Messages)
	require.Equal(t, uint64(4), s.Version)
	require.ErrorIs(t, fold.Apply(s, ev(5, events.UserMessage{Content: events.Text("more")})), fold.ErrRejected)
	require.Equal(t, fold.CodeErased, s.Rejections[len(s.Rejections)-1].Code)

	fresh := fold.NewState("acme", "t")
	require.NoError(t, fold.Apply(fresh, marker))
	require.True(t, fresh.Erased)
}

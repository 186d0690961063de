package fold_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/foldcases"
)

// TestFoldCases folds every case of the case table in memory, each event
// from the bytes a thread's subject holds, at increasing sequences with
// gaps (a stream holds other threads' events in between): every event gets
// the case's verdict, from Check (which leaves the state as it was) as
// from ApplyBytes, and the state after the last one has the case's
// rejections, history and checks.
func TestFoldCases(t *testing.T) {
	cases := foldcases.Cases()
	require.GreaterOrEqual(t, len(cases), 30)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			at := time.Unix(1700000000, 0)
			s := fold.NewState("fold", "t")
			var seqs []uint64
			for k, st := range tc.All() {
				at = at.Add(time.Millisecond)
				data := st.Encode(t, "fold", "t", at, seqs)
				seq := uint64(3*k + 2)
				if ev, err := events.Unmarshal(data); err == nil {
					before := s.Clone()
					got := foldcases.CodeOf(t, fold.Check(s, events.Stored{Event: ev, Seq: seq, StoredAt: at}))
					require.Equal(t, st.Want, got, "Check's verdict on step %d", k)
					require.True(t, reflect.DeepEqual(before, s.Clone()), "Check changed the state at step %d", k)
				}
				seqs = append(seqs, seq)
				require.Equal(t, st.Want, foldcases.CodeOf(t, fold.ApplyBytes(s, seq, at, data)), "the verdict on step %d", k)
			}
			tc.Verify(t, s, seqs)
		})
	}
}

package projector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/foldcases"
	"github.com/convlog/convlog/projector"
)

// TestFold publishes every case of the fold's case table to its own thread
// on a real server, each event's bytes straight to the thread subject
// (undecodable bytes included; odd cases with the expected version, as
// client/ appends, so the runner folds their triggers directly, even ones
// without), and checks the runner's snapshot: the same state as the pure
// fold of those bytes in memory, with the case's verdicts, history and
// checks. Package fold's TestFoldCases folds the same table without a
// server.
func TestFold(t *testing.T) {
	cases := foldcases.Cases()
	e := newEnv(t)
	e.start(t, projector.Config{})
	at := time.Unix(1700000000, 0)

	type published struct {
		seqs []uint64
		mem  *fold.State
	}
	pubs := make([]published, len(cases))
	for i, tc := range cases {
		thread := fmt.Sprintf("case-%02d", i)
		mem := fold.NewState("fold", thread)
		var seqs []uint64
		for _, st := range tc.All() {
			at = at.Add(time.Millisecond)
			data := st.Encode(t, "fold", thread, at, seqs)
			var opts []jetstream.PublishOpt
			if i%2 == 1 {
				prev := uint64(0)
				if len(seqs) > 0 {
					prev = seqs[len(seqs)-1]
				}
				opts = append(opts, jetstream.WithExpectLastSequencePerSubject(prev))
			}
			seq := e.publishRaw(t, "conv.fold."+thread, data, nil, opts...)
			seqs = append(seqs, seq)
			_ = fold.ApplyBytes(mem, seq, at, data)
		}
		pubs[i] = published{seqs: seqs, mem: mem}
	}

	for i, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			thread := fmt.Sprintf("case-%02d", i)
			p := pubs[i]
			e.waitVersion(t, "fold", thread, p.seqs[len(p.seqs)-1])
			snap, err := e.snaps.Load(context.Background(), "fold", thread)
			require.NoError(t, err)
			requireSameState(t, p.mem, snap.State)
			tc.Verify(t, snap.State, p.seqs)
		})
	}
}

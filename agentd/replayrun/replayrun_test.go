package replayrun_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/replayrun"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/transcripts"
)

func load(t *testing.T) []events.Conversation {
	set := transcripts.Load(t)
	var convs []events.Conversation
	for _, c := range set.Conversations(t) {
		convs = append(convs, c)
	}
	require.Len(t, convs, set.Total().Conversations)
	return convs
}

// Every real transcript replayed through drivers, agent workers (replay
// model) and the replay tool runner ends identical to its recording, with
// one pool and with four pools sharing the work.
func TestReplayRunReproducesEveryTranscript(t *testing.T) {
	convs := load(t)
	for _, pools := range []int{1, 4} {
		t.Run(map[int]string{1: "one worker pool", 4: "four worker pools"}[pools], func(t *testing.T) {
			s := clienttest.New(t)
			c := s.Client
			rep, err := replayrun.Run(context.Background(), c, s.NC, convs, replayrun.Config{Pools: pools, Concurrency: 4, Parallel: 32})
			require.NoError(t, err)
			require.Empty(t, rep.Unresolved)
			require.Equal(t, len(convs), rep.Threads)
			require.Equal(t, len(convs), rep.Identical)
			t.Logf("pools=%d threads=%d events=%d %.1fs (%.0f events/s) conflicts worker=%d driver=%d tools=%d",
				pools, rep.Threads, rep.Events, rep.Seconds, rep.EventsPS, rep.WorkerConflicts, rep.DriverConflicts, rep.ToolConflicts)
		})
	}
}

package projector_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/transcripts"
	"github.com/convlog/convlog/projector"
)

// Every conversation of the real transcripts, published to the stream and
// projected by the runner: the snapshot's history equals the source
// messages exactly, with zero rejections, and equals the in-memory fold.
func TestRunnerReproducesEveryTranscript(t *testing.T) {
	set := transcripts.Load(t)
	e := newEnv(t)
	// Small chunks so that long transcripts span several chunks.
	e.start(t, projector.Config{ChunkBytes: 8 << 10, TailBytes: 2 << 10})

	type conv struct {
		c      events.Conversation
		thread string
		last   int // index of its last event in all
	}
	var convs []conv
	var all []events.Event
	for _, c := range set.Conversations(t) {
		thread := transcripts.ThreadID(c)
		evs, err := transcripts.Events(c, "default", thread, "test", time.Unix(1700000000, 0))
		require.NoError(t, err)
		all = append(all, evs...)
		convs = append(convs, conv{c: c, thread: thread, last: len(all) - 1})
	}
	require.Len(t, convs, set.Total().Conversations)
	seqs := e.publishAsync(t, all)

	ctx := context.Background()
	for _, cv := range convs {
		e.waitVersion(t, "default", cv.thread, seqs[cv.last])
		snap, err := e.snaps.Load(ctx, "default", cv.thread)
		require.NoError(t, err)
		s := snap.State
		require.Zero(t, s.RejectedCount, "%s %s: %v", cv.c.Source, cv.c.ID, s.Rejections)
		src := cv.c.Messages
		if len(src) > 0 && src[0].Role == "system" {
			require.NotNil(t, s.SystemPrompt)
			require.Equal(t, src[0].Content.Text, *s.SystemPrompt)
			src = src[1:]
		}
		require.Len(t, s.Messages, len(src), "%s %s", cv.c.Source, cv.c.ID)
		for i, m := range s.Messages {
			want, err := json.Marshal(src[i])
			require.NoError(t, err)
			got, err := json.Marshal(events.ToOpenAIFlat(m))
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(got), "%s %s message %d", cv.c.Source, cv.c.ID, i)
		}
		requireSameState(t, e.fold(t, "default", cv.thread), s)
	}
}

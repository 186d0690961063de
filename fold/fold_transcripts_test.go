package fold_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/transcripts"
)

// Every conversation of the real transcripts folds with zero rejections and
// the projected history equals the source messages exactly.
func TestFoldReproducesEveryTranscript(t *testing.T) {
	set := transcripts.Load(t)
	total := 0
	for f, c := range set.Conversations(t) {
		thread := transcripts.ThreadID(c)
		evs, err := transcripts.Events(c, "default", thread, "test", time.Unix(1700000000, 0))
		require.NoError(t, err)
		s := fold.NewState("default", thread)
		for i, ev := range evs {
			b, err := events.Marshal(ev)
			require.NoError(t, err)
			require.NoError(t, fold.ApplyBytes(s, uint64(i+1), ev.Time, b), "%s %s event %d", f, c.ID, i)
		}
		require.Zero(t, s.RejectedCount)
		src := c.Messages
		if len(src) > 0 && src[0].Role == "system" {
			require.NotNil(t, s.SystemPrompt)
			require.Equal(t, src[0].Content.Text, *s.SystemPrompt)
			src = src[1:]
		}
		require.Len(t, s.Messages, len(src), "%s %s", f, c.ID)
		for i, m := range s.Messages {
			want, err := json.Marshal(src[i])
			require.NoError(t, err)
			got, err := json.Marshal(events.ToOpenAIFlat(m))
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(got), "%s %s message %d", f, c.ID, i)
		}
		total++
	}
	require.Equal(t, set.Total().Conversations, total)
}

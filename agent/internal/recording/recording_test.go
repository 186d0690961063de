package recording_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/internal/recording"
	"github.com/convlog/convlog/events"
)

func rec(t *testing.T) *recording.Recording {
	t.Helper()
	var c events.Conversation
	require.NoError(t, json.Unmarshal([]byte(`{"id":"r","messages":[
		{"role":"system","content":"s"},
		{"role":"user","content":"a"},
		{"role":"assistant","content":"b"}]}`), &c))
	r, err := recording.New(c)
	require.NoError(t, err)
	return r
}

func TestMatchIgnoresSystemMessagesOnBothSides(t *testing.T) {
	r := rec(t)
	require.Len(t, r.Messages, 2)
	require.Equal(t, []int{1, 2}, r.Index)
	pos, err := r.Match([]events.Message{
		{Role: events.RoleSystem, Content: events.Text("other prompt")},
		{Role: events.RoleUser, Content: events.Parts(events.Part{Type: events.PartText, Text: "a"})},
	})
	require.NoError(t, err)
	require.Equal(t, 1, pos, "parts with the same text match")
	pos, err = r.Match(nil)
	require.NoError(t, err)
	require.Zero(t, pos)
}

func TestMatchNamesSyntheticMessages(t *testing.T) {
	_, err := rec(t).Match([]events.Message{{Role: events.RoleUser, Content: events.Text("summary"), Synthetic: true}})
	var mm *recording.Mismatch
	require.ErrorAs(t, err, &mm)
	require.Equal(t, 0, mm.HistoryIndex)
	require.Equal(t, 1, mm.RecordingIndex)
	require.Contains(t, mm.Error(), "synthetic")
	require.Equal(t, -1, rec(t).OriginalIndex(2))
}

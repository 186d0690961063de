package fold_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// checkpointThread returns a created thread and a function that folds p
// at the next sequence.
func checkpointThread(t *testing.T) (*fold.State, func(p events.Payload) uint64) {
	t.Helper()
	at := time.Unix(1700000000, 0).UTC()
	s := fold.NewState("acme", "t")
	seq := uint64(0)
	fold1 := func(p events.Payload) uint64 {
		seq++
		require.NoError(t, fold.Apply(s, events.Stored{Event: events.New("acme", "t", "test", p), Seq: seq, StoredAt: at}))
		return seq
	}
	fold1(events.ThreadCreated{})
	return s, fold1
}

func saved(ns, id, parent string) events.CheckpointSaved {
	return events.CheckpointSaved{NS: ns, ID: id, Parent: parent, Checkpoint: json.RawMessage(`{"type":"json","json":{}}`)}
}

func writes(ns, cp string) events.CheckpointWrites {
	return events.CheckpointWrites{NS: ns, Checkpoint: cp, Task: "task", Writes: json.RawMessage(`[]`)}
}

// The index names each checkpoint's event and the events of its writes,
// so a checkpoint read is a read of those sequences.
func TestTheCheckpointIndexNamesTheEventsOfACheckpointAndItsWrites(t *testing.T) {
	s, apply := checkpointThread(t)
	a := apply(saved("", "a", ""))
	aw := apply(writes("", "a"))
	b := apply(saved("sub", "b", ""))
	apply(writes("", "unknown"))
	aw2 := apply(writes("", "a"))

	x := s.Checkpoints
	require.NotNil(t, x)
	require.Equal(t, uint64(2), x.Count)
	require.Equal(t, uint64(3), x.Writes)
	require.Equal(t, []fold.CheckpointEntry{
		{ID: "a", Seq: a, Writes: []uint64{aw, aw2}},
		{NS: "sub", ID: "b", Seq: b},
	}, x.Entries)
	require.Equal(t, 1, x.Find("sub", "b"))
	require.Equal(t, -1, x.Find("", "b"), "ids are per namespace")
}

// The index is a window of the newest checkpoints: a thread holds any
// number of them (no cap), the older ones only in the log.
func TestTheCheckpointIndexKeepsTheNewestCheckpoints(t *testing.T) {
	s, apply := checkpointThread(t)
	n := fold.MaxCheckpointsIndexed + 50
	for i := range n {
		apply(saved("", fmt.Sprintf("cp-%05d", i), ""))
	}
	x := s.Checkpoints
	require.Equal(t, uint64(n), x.Count)
	require.Len(t, x.Entries, fold.MaxCheckpointsIndexed)
	require.Equal(t, "cp-00050", x.Entries[0].ID)
	require.Equal(t, fmt.Sprintf("cp-%05d", n-1), x.Entries[len(x.Entries)-1].ID)
}

// The newest checkpoint of a namespace (a subgraph) that has saved none
// in the window stays indexed in Latest, with its writes, until the
// namespace saves again; Latest names at most MaxCheckpointNamespaces
// namespaces, the one saved least recently leaving first.
func TestTheIndexKeepsTheNewestCheckpointOfEachNamespace(t *testing.T) {
	s, apply := checkpointThread(t)
	apply(saved("sub", "s-old", ""))
	sub := apply(saved("sub", "s-new", "s-old"))
	for i := range fold.MaxCheckpointsIndexed - 2 {
		apply(saved("", fmt.Sprintf("cp-%05d", i), ""))
	}
	require.Empty(t, s.Checkpoints.Latest, "the window still holds both of sub")
	apply(saved("", "cp-a", ""))
	require.Empty(t, s.Checkpoints.Latest, "s-new is still in the window")
	apply(saved("", "cp-b", ""))
	x := s.Checkpoints
	require.Equal(t, -1, x.Find("sub", "s-new"))
	require.Equal(t, []fold.CheckpointEntry{{NS: "sub", ID: "s-new", Parent: "s-old", Seq: sub}}, x.Latest)
	require.Equal(t, 0, x.FindLatest("sub"))
	require.Equal(t, -1, x.FindLatest(""))
	require.Len(t, x.Entries, fold.MaxCheckpointsIndexed)

	w := apply(writes("sub", "s-new"))
	apply(writes("sub", "s-old"))
	require.Equal(t, []uint64{w}, s.Checkpoints.Latest[0].Writes, "a write of the Latest checkpoint joins it, of an older one not")
	require.Empty(t, x.Latest[0].Writes, "the earlier index is unchanged")

	apply(saved("sub", "s-3", "s-new"))
	require.Empty(t, s.Checkpoints.Latest, "sub saved again: its newest is in the window")

	// Many namespaces: each leaves the window as the last of its own.
	s, apply = checkpointThread(t)
	n := fold.MaxCheckpointNamespaces + 3
	for i := range n {
		apply(saved(fmt.Sprintf("ns-%03d", i), "c", ""))
	}
	for i := range fold.MaxCheckpointsIndexed {
		apply(saved("", fmt.Sprintf("cp-%05d", i), ""))
	}
	x = s.Checkpoints
	require.Len(t, x.Latest, fold.MaxCheckpointNamespaces)
	require.Equal(t, "ns-003", x.Latest[0].NS, "the namespaces saved least recently left")
	require.Equal(t, fmt.Sprintf("ns-%03d", n-1), x.Latest[len(x.Latest)-1].NS)
	require.Equal(t, -1, x.FindLatest("ns-002"))
	require.Equal(t, uint64(n+fold.MaxCheckpointsIndexed), x.Count)
}

// A State copy shares the index; folding into one copy never changes the
// other (the fold replaces the index).
func TestFoldingACheckpointNeverChangesACopysIndex(t *testing.T) {
	s, apply := checkpointThread(t)
	apply(saved("", "a", ""))
	c := s.Clone()
	apply(writes("", "a"))
	apply(saved("", "b", "a"))
	require.Len(t, c.Checkpoints.Entries, 1)
	require.Empty(t, c.Checkpoints.Entries[0].Writes)
	require.Len(t, s.Checkpoints.Entries, 2)
}

// A writer folds before it publishes, at provisional sequences, and gives
// the folded state the stored ones (State.Renumber): the index's too.
func TestRenumberGivesTheIndexTheStoredSequences(t *testing.T) {
	s, apply := checkpointThread(t)
	apply(saved("", "a", ""))
	from := s.Version
	apply(writes("", "a"))
	apply(saved("", "b", "a"))
	s.Renumber(from, []uint64{10, 11})
	require.Equal(t, []fold.CheckpointEntry{
		{ID: "a", Seq: 2, Writes: []uint64{10}},
		{ID: "b", Parent: "a", Seq: 11},
	}, s.Checkpoints.Entries)
}

// Renumber gives the entries of Latest their stored sequences too.
func TestRenumberGivesLatestTheStoredSequences(t *testing.T) {
	s, apply := checkpointThread(t)
	apply(saved("sub", "s", ""))
	for i := range fold.MaxCheckpointsIndexed {
		apply(saved("", fmt.Sprintf("cp-%05d", i), ""))
	}
	require.Len(t, s.Checkpoints.Latest, 1)
	from := s.Version
	apply(writes("sub", "s"))
	s.Renumber(from, []uint64{500})
	require.Equal(t, []fold.CheckpointEntry{{NS: "sub", ID: "s", Seq: 2, Writes: []uint64{500}}}, s.Checkpoints.Latest)
}

// A new lifetime of a soft-deleted thread starts with no checkpoints.
func TestANewLifetimeStartsWithNoCheckpoints(t *testing.T) {
	s, apply := checkpointThread(t)
	apply(saved("", "a", ""))
	apply(events.Deleted{})
	apply(events.ThreadCreated{})
	require.Nil(t, s.Checkpoints)
}

// A checkpoint's messages join the history as their message events would,
// at the checkpoint's sequence, and their tool calls are matched.
func TestACheckpointsMessagesJoinTheHistory(t *testing.T) {
	s, apply := checkpointThread(t)
	cp := saved("", "a", "")
	cp.Messages = []events.Message{
		{Role: events.RoleUser, Content: events.Text("Weather in Oslo?")},
		{Role: events.RoleAssistant, Content: events.Text(""), ToolCalls: []events.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{}`}}},
	}
	seq := apply(cp)
	require.Len(t, s.Messages, 2)
	require.Equal(t, seq, s.Messages[1].Seq)
	require.Equal(t, []string{"call_1"}, []string{s.Pending[0].ID})
	require.True(t, s.LastUserAnswered)

	next := saved("", "b", "a")
	next.Messages = []events.Message{{Role: events.RoleTool, ToolCallID: "call_1", Content: events.Text("sunny")}}
	apply(next)
	require.Empty(t, s.Pending)
	require.Equal(t, 3, s.MessageCount())
}

// One refused message refuses the whole checkpoint: neither its messages
// nor its index entry are kept.
func TestACheckpointWithARefusedMessageIsRefusedWhole(t *testing.T) {
	s, apply := checkpointThread(t)
	apply(saved("", "a", ""))
	cp := saved("", "b", "a")
	cp.Messages = []events.Message{
		{Role: events.RoleUser, Content: events.Text("hi")},
		{Role: events.RoleTool, ToolCallID: "nope", Content: events.Text("x")},
	}
	err := fold.Apply(s, events.Stored{Event: events.New("acme", "t", "test", cp), Seq: s.Version + 1, StoredAt: time.Unix(1700000000, 0)})
	var rej *fold.RejectionError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, fold.CodeNotPending, rej.Code)
	require.Contains(t, rej.Reason, "messages[1]")
	require.Empty(t, s.Messages, "the user message before the refused one is not kept either")
	require.Equal(t, uint64(1), s.Checkpoints.Count)
}

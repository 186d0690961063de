package projector_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
	"github.com/convlog/convlog/threadkey"
)

var updateSnapshot = flag.Bool("update", false, "rewrite testdata/snapshot.golden.json from the projector's output")

const snapshotGolden = "testdata/snapshot.golden.json"

// snapshotGoldenFile is the layout of testdata/snapshot.golden.json: the
// snapshot bucket's values (head, chunks) and the index entry the projector
// writes for a fixed thread, as lower-case hex.
type snapshotGoldenFile struct {
	Description string            `json:"description"`
	Snapshots   map[string]string `json:"snapshots"`
	Index       map[string]string `json:"index"`
}

// goldenThread is a fixed thread: fixed ids and times, a system prompt,
// user and assistant messages, a tool call and its result, key-value state,
// enough bytes for several chunks at ChunkBytes 1 KiB.
func goldenThread() []events.Event {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	ev := func(p events.Payload) events.Event {
		n++
		e := events.New("acme", "golden", "golden", p)
		e.ID = fmt.Sprintf("0193f0c2-0000-7000-8000-%012d", n)
		e.Time = at.Add(time.Duration(n) * time.Second)
		return e
	}
	sp := "You are a careful assistant."
	evs := []events.Event{ev(events.ThreadCreated{Agent: "demo", Owner: "u1", Title: "golden", SystemPrompt: &sp,
		Metadata: map[string]string{"source": "golden"}, Replies: events.RepliesOff})}
	for i := range 12 {
		evs = append(evs, ev(events.UserMessage{Content: events.Text(fmt.Sprintf("question %d: %s", i, strings.Repeat("why? ", 30)))}))
		if i == 5 {
			evs = append(evs,
				ev(events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}}}),
				ev(events.ToolResult{ToolCallID: "call_1", Name: "lookup", Content: events.Text(`{"answer":42}`)}),
				ev(events.StateSet{Key: "k", Value: json.RawMessage(`{"n":1}`)}))
		}
		evs = append(evs, ev(events.AssistantMessage{Content: events.Text(fmt.Sprintf("answer %d: %s", i, strings.Repeat("because. ", 30)))}))
	}
	return evs
}

// The snapshot format is pinned: the head, chunk and index bytes the
// projector writes for a fixed thread equal testdata/snapshot.golden.json.
// A change to the KV layout or its codec fails here; if it is deliberate,
// run "go test ./projector/ -run TestSnapshotFormatIsPinned -update", bump
// the head format when old heads cannot be read, and say so in the commit,
// so that a mixed-version deployment never drifts silently.
func TestSnapshotFormatIsPinned(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	evs := goldenThread()
	// One projection step per event (each waited for): a step writes the
	// messages it added as one delta, so the layout depends on where steps
	// end; this way it does not depend on timing.
	e.start(t, projector.Config{ChunkBytes: 1 << 10, TailBytes: 512})
	var last uint64
	for _, ev := range evs {
		last = e.publish(t, ev)
		e.waitVersion(t, "acme", "golden", last)
	}
	e.waitIndex(t, "acme", "golden", last)
	snap, err := e.snaps.Load(ctx, "acme", "golden")
	require.NoError(t, err)
	require.NotEmpty(t, snap.Chunks, "the fixture spans chunks")
	requireSameState(t, e.fold(t, "acme", "golden"), snap.State)

	got := snapshotGoldenFile{Description: "KV values of the fixed thread of goldenThread (projector_test), ChunkBytes 1 KiB, TailBytes 512",
		Snapshots: map[string]string{}, Index: map[string]string{}}
	keys := e.chunkKeys(t, e.res.Snapshots.Bucket(), "acme", "golden")
	keys = append(keys, snapstore.HeadKey("acme", "golden"))
	slices.Sort(keys)
	// Values are stored sealed with the thread's data key (threadkey);
	// the pinned format is of what they open to.
	opened := func(kv jetstream.KeyValue, k string) string {
		v, err := kv.Get(ctx, k)
		require.NoError(t, err, k)
		require.True(t, threadkey.Sealed(v.Value()), "value %s is stored sealed", k)
		plain, err := e.keys.OpenValue(ctx, "acme", "golden", k, v.Value())
		require.NoError(t, err, k)
		return hex.EncodeToString(plain)
	}
	for _, k := range keys {
		got.Snapshots[k] = opened(e.res.Snapshots, k)
	}
	got.Index[snapstore.IndexKey("acme", "golden")] = opened(e.res.Index, snapstore.IndexKey("acme", "golden"))

	if *updateSnapshot {
		b, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(snapshotGolden), 0o755))
		require.NoError(t, os.WriteFile(snapshotGolden, append(b, '\n'), 0o644))
		return
	}
	b, err := os.ReadFile(snapshotGolden)
	require.NoError(t, err, "run with -update to write the fixture")
	var want snapshotGoldenFile
	require.NoError(t, json.Unmarshal(b, &want))
	require.Equal(t, want.Index, got.Index, "the index entry's bytes changed")
	require.Equal(t, want.Snapshots, got.Snapshots, "the snapshot bytes (head or chunks) changed")
}

package projector_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/snapstore"
)

// sweepWriter is a snapshot writer on e's buckets with small chunks (8
// KiB, tail 1 KiB) and the events of a thread: its creation and n user
// messages of about 300 bytes, so that a few messages make a cut.
func sweepWriter(t *testing.T, e *env, tenant, thread string, n int) (*snapstore.Writer, []events.Event) {
	t.Helper()
	w, err := snapstore.NewWriter(context.Background(), e.js, snapstore.WriterConfig{
		SnapshotBucket: provision.DefaultConfig().SnapshotBucket, IndexBucket: provision.DefaultConfig().IndexBucket,
		ChunkBytes: 8 << 10, TailBytes: 1 << 10,
	})
	require.NoError(t, err)
	evs := []events.Event{events.New(tenant, thread, "test", events.ThreadCreated{})}
	for i := range n {
		evs = append(evs, events.New(tenant, thread, "test", events.UserMessage{Content: events.Text(strings.Repeat("x", 300) + string(rune('a'+i)))}))
	}
	return w, evs
}

// commitEvents folds evs[from:to] (sequence = index + 1) into an edit of
// cur and commits it.
func commitEvents(t *testing.T, w *snapstore.Writer, cur *snapstore.Head, evs []events.Event, from, to int) snapstore.Commit {
	t.Helper()
	ctx := context.Background()
	at := time.Unix(1_800_000_000, 0).UTC()
	ed := w.Edit(ctx, cur)
	for i := from; i < to; i++ {
		before := ed.Mark()
		require.NoError(t, fold.Apply(ed.State(), events.Stored{Event: evs[i], Seq: uint64(i + 1), StoredAt: at}))
		require.NoError(t, ed.Settle(ctx, before))
	}
	c, err := w.Commit(ctx, cur, ed)
	require.NoError(t, err)
	return c
}

// A sweep lists the thread's chunk keys, among them those a concurrent
// step wrote before its head; a key past the sweeping edit's messages may
// be named by a later head (keys are a function of the events), so it must
// not become garbage. The race, replayed step by step: step A writes its
// chunks (and, here, a head that is then put back as if never written);
// step B, from a head read from KV, commits fewer messages; step A again,
// from B's head, names A's chunks; B's purge runs last. Before sweeps
// skipped keys ahead, B's purge removed a chunk A's head names, and every
// Load failed with ErrSnapshotChanged (TestTwoInstancesMatchOneInstance,
// 1 run in 4 under the race detector).
func TestSweepNeverPurgesAChunkALaterHeadNames(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const tenant, thread = "acme", "sweep"
	w, evs := sweepWriter(t, e, tenant, thread, 12)
	// step folds evs[from:to] (sequence = index + 1) into an edit of a
	// head read from KV and commits it.
	step := func(from, to int) snapstore.Commit {
		t.Helper()
		cur, err := w.ReadHead(ctx, tenant, thread)
		require.NoError(t, err)
		return commitEvents(t, w, cur, evs, from, to)
	}
	step(0, 1)
	h0, err := e.res.Snapshots.Get(ctx, snapstore.HeadKey(tenant, thread))
	require.NoError(t, err)

	// Step A: eleven messages, past at least one cut (~300 bytes each,
	// cut point at most 1 KiB): it writes chunks.
	step(1, 12)
	require.NotEmpty(t, e.chunkKeys(t, e.res.Snapshots.Bucket(), tenant, thread))
	// ... as if its head had not been written.
	_, err = e.res.Snapshots.Put(ctx, snapstore.HeadKey(tenant, thread), h0.Value())
	require.NoError(t, err)

	// Step B: one message (no cut), from the head read from KV: it sweeps
	// and lists A's chunks. Its purge waits.
	b := step(1, 2)
	// Step A again, from B's head: the same cuts, the same chunk keys.
	a2 := step(2, 12)
	w.Tidy(ctx, a2.Head)
	w.Tidy(ctx, b.Head) // B's purge, late

	snap, err := e.snaps.Load(ctx, tenant, thread)
	require.NoError(t, err, "the head names a chunk a sweep purged")
	require.Len(t, snap.State.Messages, 11)
}

// A step that crashes in a thread's first step, after writing its delta
// and before the thread's first head, leaves a delta no head names; the
// step after the restart folds a different batch, so its delta has
// another key. The restarted step's head asks for a sweep
// (Head.WithSweep, as the projector does for redelivered events): the
// stray delta is purged once the thread has moved past it. Without the
// sweep it stays for good (TestCrashAtRandomPointsLosesNothing, rarely).
func TestFirstStepAfterACrashSweepsItsDelta(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const tenant, thread = "acme", "firststep"
	w, evs := sweepWriter(t, e, tenant, thread, 30)
	// step folds evs[from:to] (sequence = index + 1) into an edit of cur
	// and commits it; the purge of its garbage follows at once.
	step := func(cur *snapstore.Head, from, to int) *snapstore.Head {
		t.Helper()
		return w.Tidy(ctx, commitEvents(t, w, cur, evs, from, to).Head)
	}
	empty, err := w.ReadHead(ctx, tenant, thread)
	require.NoError(t, err)
	require.Zero(t, empty.Version())

	// The crashed first step: five events, then its head is gone (as if
	// never written; the delete leaves the key free for a create).
	step(empty, 0, 5)
	crashed := e.chunkKeys(t, e.res.Snapshots.Bucket(), tenant, thread)
	require.NotEmpty(t, crashed)
	require.NoError(t, e.res.Snapshots.Delete(ctx, snapstore.HeadKey(tenant, thread)))

	// After the restart: a first step of three events from the empty head,
	// then the writer's own heads, far past the crashed step's range.
	cur, err := w.ReadHead(ctx, tenant, thread)
	require.NoError(t, err)
	require.Zero(t, cur.Version())
	cur = step(cur.WithSweep(), 0, 3)
	for from := 3; from < len(evs); from += 4 {
		cur = step(cur, from, min(from+4, len(evs)))
	}

	snap, err := e.snaps.Load(ctx, tenant, thread)
	require.NoError(t, err)
	require.Len(t, snap.State.Messages, 30)
	named := map[string]bool{}
	for _, k := range snapstore.RefKeys(tenant, thread, snap.Gen, snap.Chunks) {
		named[k] = true
	}
	for _, k := range e.chunkKeys(t, e.res.Snapshots.Bucket(), tenant, thread) {
		require.True(t, named[k], "chunk %s is named by no head (the crashed step wrote %v)", k, crashed)
	}
}

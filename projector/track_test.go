package projector_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/snapstore"
)

// trackedReader returns a reader of e's snapshots with TrackHeads running
// until the test ends, and the counter of its gets.
func (e *env) trackedReader(t *testing.T) (*snapstore.Store, *countingKV) {
	t.Helper()
	kv := &countingKV{KeyValue: e.res.Snapshots}
	st := e.store(kv, snapstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, st.TrackHeads(ctx, e.js))
	return st, kv
}

// viewAt waits until st's LoadView of tenant/thread is at version v and
// returns it.
func viewAt(t *testing.T, st *snapstore.Store, tenant, thread string, v uint64) *snapstore.Snapshot {
	t.Helper()
	var snap *snapstore.Snapshot
	require.Eventually(t, func() bool {
		var err error
		snap, err = st.LoadView(context.Background(), tenant, thread)
		return err == nil && snap.State.Version == v
	}, 30*time.Second, 5*time.Millisecond, "a view at version %d", v)
	return snap
}

// trackedThread starts a projector, projects thread acme/<thread> with n
// messages and reads it twice with a tracked reader (the second read finds
// the head trusted); it returns the env, the reader, its get counter, the
// clock the events came from and the last view.
func trackedThread(t *testing.T, thread string, n int) (*env, *snapstore.Store, *countingKV, *clock, *snapstore.Snapshot) {
	t.Helper()
	e := newEnv(t)
	e.start(t, smallChunks)
	c := &clock{}
	e.publish(t, c.ev("acme", thread, events.ThreadCreated{}))
	seqs := e.appendMessages(t, c, "acme", thread, 0, n)
	st, kv := e.trackedReader(t)
	viewAt(t, st, "acme", thread, seqs[len(seqs)-1])
	return e, st, kv, c, viewAt(t, st, "acme", thread, seqs[len(seqs)-1])
}

// With TrackHeads, a view of a thread whose head has not changed costs no
// get (the reader without it gets the head every time); a new head is
// seen by the next views within the watch's delay, and views never go
// back to an older version once a newer one was served.
func TestTrackHeadsSkipsTheGetOfAnUnchangedHead(t *testing.T) {
	e, st, kv, c, first := trackedThread(t, "tracked", 40)

	before := kv.gets.Load()
	for range 100 {
		snap, err := st.LoadView(context.Background(), "acme", "tracked")
		require.NoError(t, err)
		require.Equal(t, first.State.Version, snap.State.Version)
		require.Equal(t, first.Revision, snap.Revision)
		require.Equal(t, 40, snap.State.MessageCount())
	}
	require.Zero(t, kv.gets.Load()-before, "gets of an unchanged, tracked head")

	// The reference: without tracking, each view gets the head.
	plainKV := &countingKV{KeyValue: e.res.Snapshots}
	plain := e.store(plainKV, snapstore.Options{})
	for range 10 {
		_, err := plain.LoadView(context.Background(), "acme", "tracked")
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, plainKV.gets.Load(), int64(10), "a reader without tracking gets the head each time")

	// More events: the next views see them, never an older version after
	// a newer one.
	for round := range 5 {
		more := e.appendMessages(t, c, "acme", "tracked", 40+round*3, 3)
		want := more[len(more)-1]
		var last uint64
		require.Eventually(t, func() bool {
			snap, err := st.LoadView(context.Background(), "acme", "tracked")
			require.NoError(t, err)
			require.GreaterOrEqual(t, snap.State.Version, last, "a view went back")
			last = snap.State.Version
			return last == want
		}, 30*time.Second, time.Millisecond)
		snap, err := st.LoadView(context.Background(), "acme", "tracked")
		require.NoError(t, err)
		require.Equal(t, 40+(round+1)*3, snap.State.MessageCount())
	}
}

// When the watch fails (its consumer deleted on the server), the reader
// trusts no head: every view gets its head again, and a new head is seen
// at once; once the watch has caught up again (a new consumer, a delivery
// with none pending), unchanged heads are served without a get again.
func TestTrackHeadsTrustsNothingWhileTheWatchIsLost(t *testing.T) {
	e, st, kv, c, _ := trackedThread(t, "lost", 10)

	ctx := context.Background()
	stream, err := e.js.Stream(ctx, "KV_"+e.res.Snapshots.Bucket())
	require.NoError(t, err)
	names := stream.ConsumerNames(ctx)
	var deleted int
	for name := range names.Name() {
		require.NoError(t, stream.DeleteConsumer(ctx, name))
		deleted++
	}
	require.NoError(t, names.Err())
	require.Equal(t, 1, deleted, "the watch's consumer")

	// The watch reports the deletion: from then on every view gets.
	require.Eventually(t, func() bool {
		before := kv.gets.Load()
		_, err := st.LoadView(ctx, "acme", "lost")
		return err == nil && kv.gets.Load() == before+1
	}, 30*time.Second, 10*time.Millisecond, "views get their head once the watch is lost")
	before := kv.gets.Load()
	for range 5 {
		_, err := st.LoadView(ctx, "acme", "lost")
		require.NoError(t, err)
	}
	require.EqualValues(t, 5, kv.gets.Load()-before, "a head trusted while the watch was lost")

	// A new head: the recreated watch delivers it with nothing pending,
	// and trust resumes.
	more := e.appendMessages(t, c, "acme", "lost", 10, 1)
	viewAt(t, st, "acme", "lost", more[0])
	require.Eventually(t, func() bool {
		before := kv.gets.Load()
		_, err := st.LoadView(ctx, "acme", "lost")
		return err == nil && kv.gets.Load() == before
	}, 30*time.Second, 10*time.Millisecond, "trust resumes once the watch has caught up")
}

// A purged snapshot (what a redaction or an erasure does before the
// projector writes it again) is not served from a tracked head: the purge
// marker the watch delivers withdraws the trust, and the next view finds
// no snapshot.
func TestTrackHeadsDropsAPurgedHead(t *testing.T) {
	e, st, _, _, _ := trackedThread(t, "purged", 10)

	_, err := snapstore.PurgeSnapshot(context.Background(), e.js, e.res.Snapshots, "acme", "purged")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := st.LoadView(context.Background(), "acme", "purged")
		return errors.Is(err, snapstore.ErrNoSnapshot)
	}, 10*time.Second, time.Millisecond, "a view of the purged snapshot")
}

package projector_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// countingKV counts the gets of a KV bucket.
type countingKV struct {
	jetstream.KeyValue
	gets atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.gets.Add(1)
	return c.KeyValue.Get(ctx, key)
}

// Every projection step writes the messages it added once, as a delta,
// and a head that carries no messages; a reader gets
// the deltas with one batched request, or one get each without it; once
// the deltas reach a tail's bytes they are joined into the open chunk and
// purged.
func TestDeltasAreWrittenOnceAndReadInOneRequest(t *testing.T) {
	e := newEnv(t)
	p, _ := e.startProjector(t, projector.Config{})
	written := p.KVWritten
	ctx := context.Background()
	c := &clock{t: time.Unix(1700000000, 0)}
	const tenant, thread = "acme", "deltas"
	text := func(i int) events.Content { return events.Text(strings.Repeat(string(rune('a'+i%26)), 500)) }

	v := e.publish(t, c.ev(tenant, thread, events.ThreadCreated{Replies: events.RepliesOff}))
	e.waitVersion(t, tenant, thread, v)
	const steps = 40 // 40 x ~640 bytes: under this thread's cut point (28,380 bytes for acme/deltas)
	var eventBytes int
	before := written()
	for i := range steps {
		ev := c.ev(tenant, thread, events.UserMessage{Content: text(i)})
		data, err := events.Marshal(ev)
		require.NoError(t, err)
		eventBytes += len(data)
		v = e.publish(t, ev)
		e.waitVersion(t, tenant, thread, v) // one step per event
	}
	w := written().Sub(before)
	t.Logf("KV bytes per event byte: %.2f (%+v; events %d bytes)", float64(w.Bytes())/float64(eventBytes), w, eventBytes)
	require.EqualValues(t, steps, w.Deltas, "one delta per step")
	require.Zero(t, w.Chunks, "no chunk before the deltas reach a tail")
	// Each message's bytes went into KV once as a delta; the heads carry
	// the state and the chunk list, not the messages.
	require.Less(t, float64(w.Bytes())/float64(eventBytes), 4.0, "KV bytes per event byte (written %+v, events %d bytes)", w, eventBytes)
	require.Less(t, w.HeadBytes/uint64(w.Heads), uint64(4<<10), "a head without the messages is small")

	head, err := e.snaps.LoadHead(ctx, tenant, thread)
	require.NoError(t, err)
	require.Empty(t, head.State.Messages, "the head carries no messages")
	require.Len(t, head.Chunks, steps)
	for i, ch := range head.Chunks {
		require.Equal(t, snapstore.LevelDelta, ch.Level, "chunk %d", i)
		require.Equal(t, i, ch.First)
	}
	want := e.fold(t, tenant, thread)

	t.Run("one batched request reads every delta", func(t *testing.T) {
		kv := &countingKV{KeyValue: e.res.Snapshots}
		var batches atomic.Int64
		st := e.store(kv, snapstore.Options{ChunkCacheBytes: -1, Batch: func(ctx context.Context, subject string, from uint64, n int) ([]*jetstream.RawStreamMsg, error) {
			batches.Add(1)
			msgs, _, err := directget.Batch(ctx, e.js, "KV_"+e.res.Snapshots.Bucket(), subject, from, n, 0)
			return msgs, err
		}})
		for range 2 { // the second read is hinted: the batch starts with the head
			snap, err := st.Load(ctx, tenant, thread)
			require.NoError(t, err)
			requireSameState(t, want, snap.State)
		}
		require.EqualValues(t, 2, batches.Load(), "one batch per Load")
		require.EqualValues(t, 2, kv.gets.Load(), "only the head is got by key")
	})

	t.Run("without a batched get, or when it fails, each delta is got by key", func(t *testing.T) {
		for _, batch := range []func(context.Context, string, uint64, int) ([]*jetstream.RawStreamMsg, error){
			nil,
			func(context.Context, string, uint64, int) ([]*jetstream.RawStreamMsg, error) {
				return nil, errors.New("no batched direct get here")
			},
		} {
			kv := &countingKV{KeyValue: e.res.Snapshots}
			st := e.store(kv, snapstore.Options{ChunkCacheBytes: -1, Batch: batch})
			snap, err := st.Load(ctx, tenant, thread)
			require.NoError(t, err)
			requireSameState(t, want, snap.State)
			require.EqualValues(t, 1+steps, kv.gets.Load(), "the head and every delta")
		}
	})

	t.Run("deltas that reach a tail's bytes are joined into the open chunk and purged", func(t *testing.T) {
		for i := steps; i < 2*steps; i++ {
			v = e.publish(t, c.ev(tenant, thread, events.UserMessage{Content: text(i)}))
			e.waitVersion(t, tenant, thread, v)
		}
		snap, err := e.snaps.Load(ctx, tenant, thread)
		require.NoError(t, err)
		requireSameState(t, e.fold(t, tenant, thread), snap.State)
		require.Equal(t, uint8(0), snap.Chunks[0].Level, "the open chunk holds the joined deltas")
		deltaBytes := 0
		for _, ch := range snap.Chunks[1:] {
			require.Equal(t, snapstore.LevelDelta, ch.Level)
			deltaBytes += ch.Bytes
		}
		require.Less(t, deltaBytes, 32<<10)
		e.waitChunks(t, tenant, thread, snap)
	})
}

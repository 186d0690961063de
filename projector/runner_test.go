package projector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/foldcases"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/testlog"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

func TestRunnerProjectsASimpleThread(t *testing.T) {
	e := newEnv(t)
	e.start(t, projector.Config{})
	c := &clock{t: time.Unix(1700000000, 0)}
	e.publish(t, c.ev("acme", "t1", events.ThreadCreated{Title: "hello"}))
	e.publish(t, c.ev("acme", "t1", events.UserMessage{Content: events.Text("hi")}))
	last := e.publish(t, c.ev("acme", "t1", events.AssistantMessage{Content: events.Text("hello!")}))
	e.waitVersion(t, "acme", "t1", last)
	snap, err := e.snaps.Load(context.Background(), "acme", "t1")
	require.NoError(t, err)
	require.Len(t, snap.State.Messages, 2)
	requireSameState(t, e.fold(t, "acme", "t1"), snap.State)
}

// waitChunks polls until the snapshot bucket holds exactly the chunks snap
// names: garbage is purged right after the head is written.
func (e *env) waitChunks(t testing.TB, tenant, thread string, snap *snapstore.Snapshot) {
	t.Helper()
	want := map[string]bool{}
	for _, k := range snapstore.RefKeys(tenant, thread, snap.Gen, snap.Chunks) {
		want[k] = true
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := e.chunkKeys(t, "convlog_snapshots", tenant, thread)
		same := len(got) == len(want)
		for _, k := range got {
			same = same && want[k]
		}
		if same {
			return
		}
		require.True(t, time.Now().Before(deadline), "thread %s/%s: chunks %v, the head names %v", tenant, thread, got, want)
		time.Sleep(2 * time.Millisecond) // polling interval
	}
}

func content512(i int) events.Content {
	s := fmt.Sprintf("message %06d ", i)
	return events.Text(s + strings.Repeat("x", 512-len(s)))
}

// A thread of 20,000 messages of 512 bytes spans many chunks and reads back
// whole and in order; a reset starts a new generation and purges the old
// chunks; a compaction that cuts deep into the chunks loads only what it
// keeps and gives the same result as a fold of the whole stream.
func TestLongThreadSpansChunksAndGenerations(t *testing.T) {
	e := newEnv(t)
	e.start(t, projector.Config{})
	ctx := context.Background()
	c := &clock{t: time.Unix(1700000000, 0)}
	const tenant, thread = "long", "t1"

	evs := []events.Event{c.ev(tenant, thread, events.ThreadCreated{})}
	for i := 0; i < 20_000; i++ {
		if i%2 == 0 {
			evs = append(evs, c.ev(tenant, thread, events.UserMessage{Content: content512(i)}))
		} else {
			evs = append(evs, c.ev(tenant, thread, events.AssistantMessage{Content: content512(i)}))
		}
	}
	seqs := e.publishAsync(t, evs)
	e.waitVersion(t, tenant, thread, seqs[len(seqs)-1])
	snap, err := e.snaps.Load(ctx, tenant, thread)
	require.NoError(t, err)
	require.Len(t, snap.State.Messages, 20_000)
	for i, m := range snap.State.Messages {
		require.Equal(t, content512(i), m.Content, "message %d", i)
		require.Equal(t, seqs[i+1], m.Seq)
	}
	// The layout rules at the defaults (768 KiB chunks, 32 KiB tail): final
	// (level 1) chunks, each more than a third of chunkBytes because each
	// was closed when it could no longer merge with the chunks after it
	// (which together were no more than twice its size); then the
	// open (level 0) chunks of the binary counter, each larger than the
	// next and small enough to merge again, a few at most; then the deltas
	// of the steps since the last cut (level 2), fewer than a tail's bytes
	// in all.
	const chunkBytes, tailBytes = 768 << 10, 32 << 10
	require.GreaterOrEqual(t, len(snap.Chunks), 20_000*512/chunkBytes, "about 12 MB of history in chunks of at most 768 KiB")
	open, finals, deltaBytes := 0, 0, 0
	for i, ch := range snap.Chunks {
		require.LessOrEqual(t, ch.Bytes, chunkBytes, "chunk %d", i)
		switch ch.Level {
		case 1:
			require.Zero(t, open, "chunk %d of %d: a final chunk after an open one", i, len(snap.Chunks))
			require.Zero(t, deltaBytes, "chunk %d of %d: a final chunk after a delta", i, len(snap.Chunks))
			require.Greater(t, 3*ch.Bytes, chunkBytes, "chunk %d: closed while it could still merge", i)
			finals++
		case 0:
			require.Zero(t, deltaBytes, "chunk %d of %d: an open chunk after a delta", i, len(snap.Chunks))
			require.LessOrEqual(t, 2*ch.Bytes, chunkBytes+8, "chunk %d: open but too large to merge", i)
			if open > 0 {
				require.Less(t, ch.Bytes, snap.Chunks[i-1].Bytes, "chunk %d: open chunks shrink along the run", i)
			}
			open++
		case snapstore.LevelDelta:
			deltaBytes += ch.Bytes
		default:
			t.Fatalf("chunk %d: level %d", i, ch.Level)
		}
	}
	require.LessOrEqual(t, open, 7, "open chunks: about log2(chunkBytes/(tailBytes/2)) at most")
	require.LessOrEqual(t, finals, 20_000*600/(chunkBytes/3), "final chunks hold more than a third of chunkBytes each")
	require.Less(t, deltaBytes, tailBytes+2*1024, "the deltas hold less than a tail")
	require.Greater(t, snap.Bytes, 20_000*512)
	require.EqualValues(t, 0, snap.Gen)
	mem := e.fold(t, tenant, thread)
	requireSameState(t, mem, snap.State)
	e.waitChunks(t, tenant, thread, snap) // every chunk the head names exists, merged small chunks are purged
	head, err := e.snaps.LoadHead(ctx, tenant, thread)
	require.NoError(t, err)
	require.Equal(t, 20_000, head.State.MessageCount())
	require.Less(t, head.Bytes, 80<<10, "the head stays small")

	// A reset mid-way: a new generation; the old one's chunks are purged.
	evs = []events.Event{c.ev(tenant, thread, events.Reset{Reason: "new topic"})}
	for i := 0; i < 2_000; i++ {
		evs = append(evs, c.ev(tenant, thread, events.UserMessage{Content: content512(i)}))
		evs = append(evs, c.ev(tenant, thread, events.AssistantMessage{Content: content512(i)}))
	}
	seqs = e.publishAsync(t, evs)
	e.waitVersion(t, tenant, thread, seqs[len(seqs)-1])
	snap, err = e.snaps.Load(ctx, tenant, thread)
	require.NoError(t, err)
	require.Len(t, snap.State.Messages, 4_000)
	require.EqualValues(t, 1, snap.Gen)
	mem = e.foldMore(t, mem)
	requireSameState(t, mem, snap.State)
	e.waitChunks(t, tenant, thread, snap)

	// A compaction that keeps the newest 1,000 messages.
	cut := seqs[2*1500] // the assistant message of pair 1499
	last := e.publish(t, c.ev(tenant, thread, events.Compaction{UpToSeq: cut, Summary: events.Text("long story")}))
	e.waitVersion(t, tenant, thread, last)
	snap, err = e.snaps.Load(ctx, tenant, thread)
	require.NoError(t, err)
	require.Len(t, snap.State.Messages, 1+1_000)
	require.Equal(t, "long story", snap.State.Messages[0].Content.String())
	require.EqualValues(t, 2, snap.Gen)
	mem = e.foldMore(t, mem)
	requireSameState(t, mem, snap.State)
	e.waitChunks(t, tenant, thread, snap)

	// Deleted, then the id created again: a new lifetime in a new
	// generation; the old lifetime's chunks are purged (its events stay).
	evs = []events.Event{c.ev(tenant, thread, events.Deleted{}), c.ev(tenant, thread, events.ThreadCreated{Title: "second life"})}
	for i := 0; i < 500; i++ {
		evs = append(evs, c.ev(tenant, thread, events.UserMessage{Content: content512(i)}))
	}
	seqs = e.publishAsync(t, evs)
	e.waitVersion(t, tenant, thread, seqs[len(seqs)-1])
	snap, err = e.snaps.Load(ctx, tenant, thread)
	require.NoError(t, err)
	require.Len(t, snap.State.Messages, 500)
	require.Equal(t, 1, snap.State.Lifetime)
	require.Equal(t, seqs[1], snap.State.LifetimeSeq)
	require.EqualValues(t, 3, snap.Gen)
	requireSameState(t, e.foldMore(t, mem), snap.State)
	e.waitChunks(t, tenant, thread, snap)
}

// Erasure: after the subject is purged and the marker appended, the thread
// has no messages, no chunks and no index entry; other threads are intact.
func TestErasureRemovesChunksAndIndexEntry(t *testing.T) {
	e := newEnv(t)
	e.start(t, projector.Config{ChunkBytes: 4 << 10, TailBytes: 1 << 10})
	ctx := context.Background()
	c := &clock{t: time.Unix(1700000000, 0)}
	var evs []events.Event
	for _, th := range []string{"gone", "kept"} {
		evs = append(evs, c.ev("acme", th, events.ThreadCreated{Title: th}))
		for i := 0; i < 200; i++ {
			evs = append(evs, c.ev("acme", th, events.UserMessage{Content: content512(i)}))
			evs = append(evs, c.ev("acme", th, events.AssistantMessage{Content: content512(i)}))
		}
	}
	seqs := e.publishAsync(t, evs)
	e.waitVersion(t, "acme", "gone", seqs[400])
	e.waitVersion(t, "acme", "kept", seqs[len(seqs)-1])
	require.NotEmpty(t, e.chunkKeys(t, "convlog_snapshots", "acme", "gone"))
	e.waitIndex(t, "acme", "gone", seqs[400])
	e.waitIndex(t, "acme", "kept", seqs[len(seqs)-1])

	require.NoError(t, e.res.Stream.Purge(ctx, jetstream.WithPurgeSubject("conv.acme.gone")))
	marker := e.publish(t, c.ev("acme", "gone", events.Erased{RemovedEvents: 401, LastSeq: seqs[400], Reason: "user request"}))
	e.waitVersion(t, "acme", "gone", marker)

	snap, err := e.snaps.Load(ctx, "acme", "gone")
	require.NoError(t, err)
	require.True(t, snap.State.Erased)
	require.Empty(t, snap.State.Messages)
	require.Empty(t, snap.Chunks)
	// Chunks and the index entry go right after the head is written.
	deadline := time.Now().Add(10 * time.Second)
	for len(e.chunkKeys(t, "convlog_snapshots", "acme", "gone")) > 0 {
		require.True(t, time.Now().Before(deadline), "chunks of the erased thread still there")
		time.Sleep(2 * time.Millisecond) // polling interval
	}
	for {
		_, err = e.res.Index.Get(ctx, snapstore.IndexKey("acme", "gone"))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			break
		}
		require.True(t, time.Now().Before(deadline), "index entry of the erased thread still there (%v)", err)
		time.Sleep(2 * time.Millisecond) // polling interval
	}

	kept, err := e.snaps.Load(ctx, "acme", "kept")
	require.NoError(t, err)
	require.Len(t, kept.State.Messages, 400)
	e.waitIndex(t, "acme", "kept", seqs[len(seqs)-1])
}

// The index holds one summary per thread that follows the thread.
func TestIndexSummarizesEveryThread(t *testing.T) {
	e := newEnv(t)
	e.start(t, projector.Config{})
	c := &clock{t: time.Unix(1700000000, 0)}
	e.publish(t, c.ev("acme", "a", events.ThreadCreated{Owner: "u1", Agent: "bot", Title: "A", Metadata: map[string]string{"k": "v"}}))
	e.publish(t, c.ev("acme", "a", events.UserMessage{Content: events.Text("hi")}))
	e.publish(t, c.ev("acme", "a", events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "x", Name: "f", Arguments: "{}"}}}))
	last := e.publish(t, c.ev("acme", "a", events.Deleted{}))
	e.publish(t, c.ev("acme", "b", events.UserMessage{Content: events.Text("no thread")}))
	lastB := e.publish(t, c.ev("acme", "b", events.ThreadCreated{Title: "B"}))
	e.waitVersion(t, "acme", "a", last)
	e.waitVersion(t, "acme", "b", lastB)

	sum := e.waitIndex(t, "acme", "a", last)
	require.Equal(t, snapstore.Summary{Tenant: "acme", Thread: "a", Owner: "u1", Agent: "bot", Title: "A",
		Metadata: map[string]string{"k": "v"}, CreatedAt: time.Unix(1700000000, 1e6).UTC(), UpdatedAt: time.Unix(1700000000, 4e6).UTC(),
		Version: last, Messages: 2, Pending: 1, Deleted: true}, sum)

	sum = e.waitIndex(t, "acme", "b", lastB)
	require.Equal(t, "B", sum.Title)
	require.EqualValues(t, 1, sum.Rejected)
	require.Equal(t, lastB, sum.Version)
}

func TestSnapshotsReportMissingThreadsAndBadIDs(t *testing.T) {
	e := newEnv(t)
	_, err := e.snaps.Load(context.Background(), "acme", "nope")
	require.ErrorIs(t, err, snapstore.ErrNoSnapshot)
	_, err = e.snaps.LoadHead(context.Background(), "acme", "nope")
	require.ErrorIs(t, err, snapstore.ErrNoSnapshot)
	_, err = e.snaps.Load(context.Background(), "acme", "a.b")
	require.ErrorIs(t, err, events.ErrInvalidID)
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	require.NoError(t, projector.Config{}.Validate())
	err := projector.Config{ChunkBytes: 10, TailBytes: 1, Workers: -1, SnapshotBucket: "x", IndexBucket: "x", AckWait: time.Millisecond}.Validate()
	require.Error(t, err)
	for _, want := range []string{"ChunkBytes", "TailBytes", "Workers", "buckets", "AckWait"} {
		require.ErrorContains(t, err, want)
	}
}

// Readers loading a thread while it is projected (tiny chunks, so every
// few events move the tail, merge chunks and purge old ones; resets and
// compactions start new generations) always get exactly the state of the
// stream at the version they got: never a torn mix of two heads.
func TestReadersNeverSeeATornSnapshot(t *testing.T) {
	e := newEnv(t)
	// Small steps, so that there are many versions to catch.
	e.start(t, projector.Config{ChunkBytes: 2 << 10, TailBytes: 512, MaxBatch: 10})
	ctx := context.Background()
	c := &clock{t: time.Unix(1700000000, 0)}
	const tenant, thread = "torn", "t1"
	evs := []events.Event{c.ev(tenant, thread, events.ThreadCreated{})}
	for i := 0; len(evs) < 3000; i++ {
		switch {
		case i%700 == 699:
			evs = append(evs, c.ev(tenant, thread, events.Reset{}))
		default:
			evs = append(evs, c.ev(tenant, thread, events.UserMessage{Content: content512(i)}))
			evs = append(evs, c.ev(tenant, thread, events.AssistantMessage{Content: content512(i)}))
		}
	}
	type seen struct{ snap *snapstore.Snapshot }
	var snaps []seen
	done := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		reader := e.snaps // one long-lived reader: its chunk hints go stale all the time
		for {
			select {
			case <-done:
				return
			default:
			}
			s, err := reader.Load(ctx, tenant, thread)
			if errors.Is(err, snapstore.ErrNoSnapshot) {
				continue
			}
			if err != nil {
				t.Errorf("load: %v", err)
				return
			}
			if len(snaps) == 0 || snaps[len(snaps)-1].snap.State.Version != s.State.Version {
				snaps = append(snaps, seen{s})
			}
		}
	}()
	seqs := e.publishAsync(t, evs)
	e.waitVersion(t, tenant, thread, seqs[len(seqs)-1])
	close(done)
	<-readerDone
	require.Greater(t, len(snaps), 5, "the reader saw the thread at several versions")

	// Fold the stream once, checking each snapshot at its version.
	mem := fold.NewState(tenant, thread)
	k := 0
	for i, ev := range evs {
		b, err := events.Marshal(ev)
		require.NoError(t, err)
		_ = fold.ApplyBytes(mem, seqs[i], time.Time{}, b)
		for k < len(snaps) && snaps[k].snap.State.Version == seqs[i] {
			got := snaps[k].snap.State
			require.Equal(t, foldcases.Lines(mem.Messages), foldcases.Lines(got.Messages), "snapshot at version %d", seqs[i])
			require.Equal(t, mem.Generation, got.Generation)
			k++
		}
	}
	require.Equal(t, len(snaps), k, "every snapshot is at a version of the thread")
	t.Logf("%d snapshots read while projecting", len(snaps))
}

// On a server whose max payload is below the default ChunkBytes plus 64
// KiB, a projector left to the default sizes its chunks to fit (max payload
// minus 64 KiB) and projects a long thread; one given a ChunkBytes that
// does not fit refuses to start, naming the max payload.
func TestChunkBytesFitsTheServersMaxPayload(t *testing.T) {
	const maxPayload = 512 << 10
	srv := natstest.RunConfig(t, embedded.Config{MaxPayload: maxPayload})
	js := srv.JS
	ctx := context.Background()
	res, err := provision.Ensure(ctx, js, provision.Config{})
	require.NoError(t, err)
	e := envOf(t, srv, res)

	p, err := projector.New(js, projector.Config{Durable: "too-big", ChunkBytes: 768 << 10})
	require.NoError(t, err)
	err = p.Run(ctx)
	require.ErrorContains(t, err, "max payload (524288 bytes) is too small for ChunkBytes 786432")

	e.start(t, projector.Config{})
	c := &clock{t: time.Unix(1700000000, 0)}
	const tenant, thread = "small", "t1"
	evs := []events.Event{c.ev(tenant, thread, events.ThreadCreated{})}
	for i := 0; i < 2_000; i++ {
		evs = append(evs, c.ev(tenant, thread, events.UserMessage{Content: content512(i)}))
		evs = append(evs, c.ev(tenant, thread, events.AssistantMessage{Content: content512(i)}))
	}
	seqs := e.publishAsync(t, evs)
	e.waitVersion(t, tenant, thread, seqs[len(seqs)-1])
	snap, err := e.snaps.Load(ctx, tenant, thread)
	require.NoError(t, err)
	require.Len(t, snap.State.Messages, 4_000)
	require.GreaterOrEqual(t, len(snap.Chunks), 4, "2.4 MB of history in chunks of at most 448 KiB")
	for i, ch := range snap.Chunks {
		require.LessOrEqual(t, ch.Bytes, maxPayload-64<<10, "chunk %d", i)
	}
	requireSameState(t, e.fold(t, tenant, thread), snap.State)
}

// The projector's consumer takes every message of the stream, with no
// filter subject (the server's cheapest next-message path, see
// client.DurableConfig.AllSubjects): a consumer left by an older version,
// filtered on "conv.*.*", is updated, and the audit checkpoints it now
// receives are acked without a warning while the threads around them are
// projected.
func TestProjectorConsumerTakesTheWholeStream(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.js.CreateOrUpdateConsumer(ctx, "CONVLOG", jetstream.ConsumerConfig{
		Durable: "convlog-projector", FilterSubject: "conv.*.*", AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy, MaxDeliver: -1,
	})
	require.NoError(t, err)
	c := &clock{t: time.Unix(1700000000, 0)}
	e.publish(t, c.ev("acme", "t1", events.ThreadCreated{}))
	e.publishRaw(t, "conv.audit", []byte(`{"checkpoint":1}`), nil)
	last := e.publish(t, c.ev("acme", "t1", events.UserMessage{Content: events.Text("hi")}))

	var logs testlog.Buffer
	e.start(t, projector.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	e.waitVersion(t, "acme", "t1", last)
	e.publishRaw(t, "conv.audit", []byte(`{"checkpoint":2}`), nil)
	last = e.publish(t, c.ev("acme", "t1", events.UserMessage{Content: events.Text("again")}))
	e.waitVersion(t, "acme", "t1", last)
	e.waitConsumerIdle(t, "convlog-projector")

	cons, err := e.js.Consumer(ctx, "CONVLOG", "convlog-projector")
	require.NoError(t, err)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Empty(t, info.Config.FilterSubject, "the consumer is still filtered")
	require.Empty(t, info.Config.FilterSubjects)
	require.Greater(t, info.AckFloor.Stream, uint64(0))
	require.Empty(t, logs.String(), "an audit checkpoint was logged as a bad message")
}

// An instance holds at most MaxTriggerBytes of triggers (plus its pull
// buffer and the one that crossed the bound): with its one worker stuck,
// it stops taking deliveries although MaxAckPending would allow every
// event, and it projects them all once the worker goes on.
func TestHeldTriggersAreBoundedByBytes(t *testing.T) {
	e := newEnv(t)
	const n, size, bound = 600, 8 << 10, 64 << 10
	c := &clock{t: time.Unix(1700000000, 0)}
	var evs []events.Event
	for i := range n {
		evs = append(evs, c.ev("acme", fmt.Sprintf("t%d", i), events.ThreadCreated{Title: strings.Repeat("x", size)}))
	}
	seqs := e.publishAsync(t, evs)
	release := make(chan struct{})
	var once, released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	e.start(t, projector.Config{Workers: 1, MaxAckPending: 100_000, MaxTriggerBytes: bound, OnApply: func(projector.Applied) {
		once.Do(func() { <-release })
	}})
	t.Cleanup(free) // runs before the projector's stop: a failed check must not leave the worker stuck
	ctx := context.Background()
	cons, err := e.js.Consumer(ctx, "CONVLOG", "convlog-projector")
	require.NoError(t, err)
	// The pull buffer's bytes (the projector's own rule) and the event that
	// crosses the bound come on top.
	pull := max(bound/4, 2*int(e.js.Conn().MaxPayload())+64<<10)
	limit := (bound + pull + 2*size) / size
	var pending int
	for range 20 { // 1 s: the consumer would deliver all 600 in far less
		time.Sleep(50 * time.Millisecond)
		info, err := cons.Info(ctx)
		require.NoError(t, err)
		pending = info.NumAckPending
		require.LessOrEqual(t, pending, limit, "triggers delivered and held while the worker is stuck")
	}
	require.Positive(t, pending)
	free()
	e.waitVersion(t, "acme", fmt.Sprintf("t%d", n-1), seqs[n-1])
	e.waitConsumerIdle(t, "convlog-projector")
}

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// batchWatch records, from a plain subscription on the stream's subjects,
// every atomic batch sent to the server and whether its commit was sent,
// and from the server's advisories every batch it abandoned.
type batchWatch struct {
	mu        sync.Mutex
	sent      map[string]bool // batch id -> commit sent
	abandoned map[string]string
}

func watchBatches(t *testing.T, nc *nats.Conn, env *appendEnv) *batchWatch {
	w := &batchWatch{sent: map[string]bool{}, abandoned: map[string]string{}}
	sub, err := nc.Subscribe(env.c.Subjects().StreamSubjects(), func(m *nats.Msg) {
		id := m.Header.Get(jetstreamext.BatchIDHeader)
		if id == "" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.sent[id] = w.sent[id] || m.Header.Get(jetstreamext.BatchCommitHeader) != ""
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	adv, err := nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED."+env.res.Stream, func(m *nats.Msg) {
		var a struct {
			BatchID string `json:"batch"`
			Reason  string `json:"reason"`
		}
		if json.Unmarshal(m.Data, &a) == nil {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.abandoned[a.BatchID] = a.Reason
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = adv.Unsubscribe() })
	require.NoError(t, nc.Flush())
	return w
}

// incomplete returns the batches whose commit was never sent, and how many
// of them the server has abandoned so far.
func (w *batchWatch) incomplete() (open, abandoned int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, committed := range w.sent {
		if !committed {
			open++
			if _, ok := w.abandoned[id]; ok {
				abandoned++
			}
		}
	}
	return open, abandoned
}

func (w *batchWatch) committed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.sent {
		if c {
			n++
		}
	}
	return n
}

// TestTurnIsStoredWholeOrNotAtAllWhenTheWriterStopsMidPublish is docs/design.md
// invariant 3: an assistant message with 3 tool calls plus the 3 results is
// one atomic batch. Writers are stopped at random points of the publish
// (ctx cancelled, connection closed) and a crashed process leaves batches
// with 1, 2 or 3 of the 4 messages; every thread then has the whole turn or
// none of it, before and after the server abandons the incomplete batches
// (its 10 s timeout), and appending the same turn again settles each case:
// a duplicate where it was stored, a first write where it was not.
func TestTurnIsStoredWholeOrNotAtAllWhenTheWriterStopsMidPublish(t *testing.T) {
	t.Parallel()
	s := natstest.Run(t)
	env := newEnvOn(t, s.NC, provision.Config{})
	ctx := context.Background()
	tenant := events.DefaultTenant
	watch := watchBatches(t, s.NC, env)

	type attempt struct {
		thread  string
		version uint64
		turn    []events.Event
	}
	newAttempt := func(t *testing.T) attempt {
		thread, v := env.createThread(t, client.CreateOptions{})
		return attempt{thread, v, completeEvents(tenant, thread, toolTurn("call_1", "call_2", "call_3"))}
	}
	var attempts []attempt

	// How long a turn takes here, to spread the stops over it.
	warm := newAttempt(t)
	start := time.Now()
	_, err := env.c.Append(ctx, tenant, warm.thread, warm.turn, client.ExpectVersion(warm.version))
	require.NoError(t, err)
	took := time.Since(start)
	attempts = append(attempts, warm)

	stopAt := func(i int) time.Duration {
		switch i % 6 {
		case 0:
			return 0 // before anything is sent
		case 5:
			return time.Hour // never
		}
		return time.Duration(rand.Int64N(int64(took) * 3 / 2))
	}

	t.Run("a writer whose ctx is cancelled", func(t *testing.T) {
		for i := range 16 {
			a := newAttempt(t)
			attempts = append(attempts, a)
			actx, cancel := context.WithCancel(ctx)
			if d := stopAt(i); d == 0 {
				cancel()
			} else {
				defer time.AfterFunc(d, cancel).Stop()
			}
			_, err := env.c.Append(actx, tenant, a.thread, a.turn, client.ExpectVersion(a.version))
			cancel()
			if err != nil {
				require.ErrorIs(t, err, context.Canceled)
			}
		}
	})
	t.Run("a writer whose connection closes", func(t *testing.T) {
		for i := range 8 {
			a := newAttempt(t)
			attempts = append(attempts, a)
			nc, err := s.Connect()
			require.NoError(t, err)
			c := env.newClient(t, nc)
			// Warm the new client's cache so the publish starts at once.
			_, err = c.Get(ctx, tenant, a.thread, client.Consistent())
			require.NoError(t, err)
			if d := stopAt(i); d == 0 {
				nc.Close()
			} else {
				defer time.AfterFunc(d, nc.Close).Stop()
			}
			_, _ = c.Append(ctx, tenant, a.thread, a.turn, client.ExpectVersion(a.version))
			nc.Close()
		}
	})
	t.Run("a process that dies after sending part of the batch", func(t *testing.T) {
		for k := 1; k <= 3; k++ {
			a := newAttempt(t)
			attempts = append(attempts, a)
			env.publishPartialBatch(t, a.turn, a.version, k)
		}
	})

	whole := func(t *testing.T) int {
		n := 0
		for _, a := range attempts {
			msgs := env.stored(t, tenant, a.thread)
			switch len(msgs) {
			case 1:
			case 5:
				n++
				require.Equal(t, eventIDs(a.turn), storedIDs(msgs[1:]), "the turn is stored in order")
				for i := 2; i < 5; i++ {
					require.Equal(t, msgs[i-1].Seq+1, msgs[i].Seq, "at consecutive sequences")
				}
			default:
				require.Failf(t, "a partial turn is visible", "thread %s has %d messages", a.thread, len(msgs))
			}
		}
		return n
	}
	stored := whole(t)
	open, _ := watch.incomplete()
	t.Logf("%d turns: %d stored whole, %d batches left incomplete on the server", len(attempts), stored, open)
	require.Positive(t, stored)
	require.GreaterOrEqual(t, open, 3, "the dead process's batches at least")
	require.Less(t, stored, len(attempts), "some turns were stopped before their commit")

	// The server abandons every incomplete batch (after its timeout)...
	require.Eventually(t, func() bool {
		open, abandoned := watch.incomplete()
		return open == abandoned
	}, 30*time.Second, 50*time.Millisecond, "the server abandons incomplete batches")
	// ...and nothing of them ever becomes visible.
	require.Equal(t, stored, whole(t))
	require.Equal(t, stored, watch.committed(), "exactly the batches whose commit was sent are stored")

	// Appending the same turn again settles every ambiguous outcome.
	for _, a := range attempts {
		before := env.stored(t, tenant, a.thread)
		res, err := env.c.Append(ctx, tenant, a.thread, a.turn, client.ExpectVersion(a.version))
		require.NoError(t, err)
		require.Equal(t, len(before) == 5, res.Duplicate, "a duplicate exactly when the first attempt was stored")
		after := env.stored(t, tenant, a.thread)
		require.Len(t, after, 5)
		require.Equal(t, eventIDs(a.turn), storedIDs(after[1:]))
	}
}

// publishPartialBatch sends the first k messages of the atomic batch the
// client would send for evs at version expect, and never commits it.
func (e *appendEnv) publishPartialBatch(t testing.TB, evs []events.Event, expect uint64, k int) {
	t.Helper()
	bp, err := jetstreamext.NewBatchPublisher(e.js)
	require.NoError(t, err)
	for i, ev := range evs[:k] {
		m := clienttest.Msg(t, e.subject(t, ev.Tenant, ev.Thread), ev)
		if i == 0 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect, 10))
			m.Header.Set(jetstream.ExpectedStreamHeader, e.res.Stream)
		}
		require.NoError(t, bp.AddMsg(m), fmt.Sprintf("message %d of the batch", i+1))
	}
	require.NoError(t, bp.Discard())
}

//go:build cluster

package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// checked is what verify found.
type checked struct {
	threads, events, acked, userMessages int
	// staleReads counts consistent reads, after the cluster settled, that
	// showed less than the leader's last sequence of the thread.
	staleReads int
	// snapshots is how many projector snapshots were compared.
	snapshots int
}

// verify checks, once the stream's replicas are current and the agent
// workers have nothing pending, every thread of loads:
//   - every acknowledged event id is on the thread exactly once, and no
//     event id is on it twice;
//   - every user message is followed by exactly one final assistant
//     answer, replying to it, before the next user message;
//   - the consistent read, the replay at the last sequence (AtSeq) and a
//     fold of the raw events give the same state, and so does the
//     projector's snapshot once it reached the thread's last sequence.
func verify(t *testing.T, nc *nats.Conn, js jetstream.JetStream, c *client.Client, cl *natsCluster, loads ...*load) checked {
	t.Helper()
	// Every partition: its stream's replicas current, the workers' and
	// the projector's consumers on it (agentd serve runs one projector per
	// partition; compose: --projector is not off).
	snaps := map[*client.Client]*snapstore.Store{}
	for _, pc := range c.Partitions() {
		rc := pc.Config().Resources
		cl.waitStreamCurrent(t, js, rc.Stream, 60*time.Second)
		waitConsumerDone(t, js, rc.Stream, "convlog-agents")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := js.Consumer(ctx, rc.Stream, projector.DefaultConfig().Durable)
		require.NoError(t, err, "the projector's consumer on %s", rc.Stream)
		kv, err := js.KeyValue(ctx, rc.SnapshotBucket)
		cancel()
		require.NoError(t, err)
		snaps[pc] = snapstore.NewWith(kv, snapstore.Options{Sealer: pc.Keys()})
	}

	var out checked
	for _, l := range loads {
		for _, lt := range append(slices.Clone(l.threads), l.probes...) {
			out.threads++
			n, users, stale := verifyThread(t, nc, c, snaps[c.For(loadTenant, lt.id)], lt)
			out.events += n
			out.userMessages += users
			out.staleReads += stale
			out.snapshots++
			out.acked += len(lt.ackedIDs())
		}
	}
	return out
}

func verifyThread(t *testing.T, nc *nats.Conn, c *client.Client, snaps *snapstore.Store, lt *loadThread) (n, users, stale int) {
	t.Helper()
	pc := c.For(loadTenant, lt.id) // the thread's partition
	subject, err := pc.Subjects().Thread(loadTenant, lt.id)
	require.NoError(t, err)
	last, err := leaderLastSeq(nc, pc.Config().Resources.Stream, subject)
	require.NoError(t, err, "thread %s", lt.id)
	require.NotZero(t, last, "thread %s has no events", lt.id)

	get := func(opts ...client.GetOption) *client.Thread {
		var th *client.Thread
		require.NoError(t, poll(10*time.Second, 20*time.Millisecond, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			if th, err = c.Get(ctx, loadTenant, lt.id, opts...); err != nil {
				return err
			}
			if th.Version != last {
				stale++
				return fmt.Errorf("thread %s read at version %d, the leader has %d", lt.id, th.Version, last)
			}
			return nil
		}))
		return th
	}
	full := get(client.Consistent(), client.WithEvents())

	// Exactly once.
	count := map[string]int{}
	for _, e := range full.Events {
		count[e.ID]++
	}
	for id, k := range count {
		require.Equal(t, 1, k, "thread %s: event %s is stored %d times", lt.id, id, k)
	}
	acked := lt.ackedIDs()
	for _, id := range acked {
		require.Equal(t, 1, count[id], "thread %s: acknowledged event %s is stored %d times", lt.id, id, count[id])
	}

	// Every user message answered once, by the agent, before the next one.
	var cur string
	answers := map[string]int{}
	var order []string
	for _, e := range full.Events {
		switch p := e.Payload.(type) {
		case events.UserMessage:
			cur = e.ID
			order = append(order, cur)
			answers[cur] = 0
		case events.AssistantMessage:
			require.NotEmpty(t, cur, "thread %s: assistant message %s (seq %d) before any user message", lt.id, e.ID, e.Seq)
			require.Equal(t, cur, p.ReplyTo, "thread %s: assistant message %s (seq %d) answers %s, but the last user message is %s", lt.id, e.ID, e.Seq, p.ReplyTo, cur)
			require.Equal(t, loadAgent, p.Agent, "thread %s: seq %d", lt.id, e.Seq)
			if len(p.ToolCalls) == 0 {
				answers[cur]++
			}
		}
	}
	for _, id := range order {
		require.Equal(t, 1, answers[id], "thread %s: user message %s has %d final answers", lt.id, id, answers[id])
	}
	if lt.probe {
		// A probe thread holds only the load's events.
		require.Len(t, acked, len(full.Events), "thread %s: %d events stored, %d appends acknowledged", lt.id, len(full.Events), len(acked))
	} else {
		// The load acknowledged the creation and every user message, and
		// wrote nothing else.
		require.Len(t, acked, len(order)+1, "thread %s: %d user messages stored, %d appends acknowledged", lt.id, len(order), len(acked))
	}
	require.Zero(t, full.RejectedCount, "thread %s: rejections %v", lt.id, full.Rejections)

	// One state, however it is read.
	folded := fold.NewState(loadTenant, lt.id)
	for _, e := range full.Events {
		require.NoError(t, fold.Apply(folded, e), "thread %s: fold of seq %d", lt.id, e.Seq)
	}
	want := jsonOf(t, folded)
	require.JSONEq(t, want, jsonOf(t, full.FoldState()), "thread %s: consistent read with events vs fold", lt.id)
	require.JSONEq(t, want, jsonOf(t, get(client.Consistent()).FoldState()), "thread %s: consistent read vs fold", lt.id)
	require.JSONEq(t, want, jsonOf(t, get(client.AtSeq(last)).FoldState()), "thread %s: replay at seq %d vs fold", lt.id, last)
	// The projector's snapshot, once it has caught up with the log.
	var snap *snapstore.Snapshot
	require.NoError(t, poll(60*time.Second, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if snap, err = snaps.Load(ctx, loadTenant, lt.id); err != nil {
			return err
		}
		if snap.State.Version != last {
			return fmt.Errorf("thread %s snapshot at version %d, the log at %d", lt.id, snap.State.Version, last)
		}
		return nil
	}))
	require.JSONEq(t, want, jsonOf(t, snap.State), "thread %s: projector snapshot vs fold", lt.id)
	return len(full.Events), len(order), stale
}

// jsonOf is s as JSON, with no messages written as [] whether Messages is
// nil or empty (a fold gives nil, a decoded snapshot an empty slice).
func jsonOf(t *testing.T, s *fold.State) string {
	t.Helper()
	if len(s.Messages) == 0 {
		c := *s
		c.Messages = []events.Message{}
		s = &c
	}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// waitConsumerDone waits until the durable consumer has delivered and had
// acknowledged every message: no work is stuck.
func waitConsumerDone(t *testing.T, js jetstream.JetStream, stream, durable string) {
	t.Helper()
	require.NoError(t, poll(60*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cons, err := js.Consumer(ctx, stream, durable)
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return fmt.Errorf("consumer %s: %d pending, %d unacknowledged", durable, info.NumPending, info.NumAckPending)
		}
		return nil
	}))
}

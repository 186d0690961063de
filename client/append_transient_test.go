package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// TestAppendRetriesWhileTheStreamIsUnavailableAndStoresOnce: the stream
// stops capturing the thread's subject (publishes get no responders, as
// when a stream has no leader); the append retries with backoff, succeeds
// once the stream is back, and the event is stored once.
func TestAppendRetriesWhileTheStreamIsUnavailableAndStoresOnce(t *testing.T) {
	env := newAppendEnv(t, provision.Config{})
	ctx := context.Background()
	tenant := events.DefaultTenant
	thread, v := env.createThread(t, client.CreateOptions{})
	st, err := env.js.Stream(ctx, env.res.Stream)
	require.NoError(t, err)
	cfg := st.CachedInfo().Config

	parked := cfg
	parked.Subjects = []string{"parked.*.*"}
	_, err = env.js.UpdateStream(ctx, parked)
	require.NoError(t, err)
	env.logs.reset()

	type outcome struct {
		res client.AppendResult
		err error
	}
	done := make(chan outcome, 1)
	ev := completeEvents(tenant, thread, []events.Event{userEvent("are you there?")})
	go func() {
		res, err := env.c.Append(ctx, tenant, thread, ev, client.ExpectVersion(v))
		done <- outcome{res, err}
	}()
	require.Eventually(t, func() bool { return len(env.logs.find("retrying append", "", "")) > 0 },
		10*time.Second, 5*time.Millisecond, "the append retries")
	_, err = env.js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	var got outcome
	require.Eventually(t, func() bool {
		select {
		case got = <-done:
			return true
		default:
			return false
		}
	}, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, got.err)
	require.False(t, got.res.Duplicate)
	msgs := env.stored(t, tenant, thread)
	require.Len(t, msgs, 2, "stored once")
	require.Equal(t, ev[0].ID, msgs[1].ID)
	require.Equal(t, msgs[1].Seq, got.res.Version)
	retries := env.logs.find("retrying append", "", "")
	t.Logf("%d retries, first error: %s", len(retries), retries[0]["err"])
}

// TestAppendsSurviveStreamLeaderChangesOnAThreeNodeCluster: while a writer
// appends single events and turns with optimistic concurrency, the stream
// leader is made to step down again and again. Every append succeeds (the
// client retries what the leader change interrupted, with the same ids) and
// every event is stored exactly once, in the writer's order.
func TestAppendsSurviveStreamLeaderChangesOnAThreeNodeCluster(t *testing.T) {
	t.Parallel()
	cl := natstest.RunCluster(t, 3)
	nc, js := cl.Connect(t)
	// A lost ack is retried after Timeout/4; the appends themselves get a
	// longer ctx and enough retries to outlast elections on a busy machine.
	env := newEnvOn(t, nc, provision.Config{Replicas: 3}, func(c *client.Config) {
		c.Timeout, c.MaxRetries = 2*time.Second, 20
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenant := events.DefaultTenant
	thread, v := env.createThread(t, client.CreateOptions{})
	env.logs.reset()

	const appends = 60
	var progress atomic.Int64
	errc := make(chan error, 1)
	var want []string
	var results []client.AppendResult
	var turns [][]events.Event
	for i := range appends {
		evs := []events.Event{userEvent(fmt.Sprintf("message %d", i))}
		if i%3 == 2 {
			evs = toolTurn(fmt.Sprintf("call_%d", i))
		}
		evs = completeEvents(tenant, thread, evs)
		turns = append(turns, evs)
		want = append(want, eventIDs(evs)...)
	}
	go func() {
		version := v
		for _, evs := range turns {
			res, err := env.c.Append(ctx, tenant, thread, evs, client.ExpectVersion(version))
			if err != nil {
				errc <- err
				return
			}
			results = append(results, res)
			version = res.Version
			progress.Add(1)
		}
		errc <- nil
	}()

	leader := func() string {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		st, err := js.Stream(ctx, env.res.Stream)
		if err != nil || st.CachedInfo().Cluster == nil {
			return ""
		}
		return st.CachedInfo().Cluster.Leader
	}
	stepdowns := 0
	for n := int64(5); n < appends-5; n += 15 {
		require.Eventually(t, func() bool { return progress.Load() >= n }, 30*time.Second, time.Millisecond)
		old := leader()
		resp, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+env.res.Stream, nil, 5*time.Second)
		require.NoError(t, err)
		var r struct {
			Success bool                `json:"success"`
			Error   *jetstream.APIError `json:"error"`
		}
		require.NoError(t, json.Unmarshal(resp.Data, &r))
		require.True(t, r.Success, "stepdown: %v", r.Error)
		stepdowns++
		require.Eventually(t, func() bool { l := leader(); return l != "" && l != old }, 30*time.Second, 10*time.Millisecond, "a new leader")
	}
	var err error
	require.Eventually(t, func() bool {
		select {
		case err = <-errc:
			return true
		default:
			return false
		}
	}, 60*time.Second, 5*time.Millisecond)
	require.NoError(t, err)

	msgs := env.stored(t, tenant, thread)
	require.Equal(t, want, storedIDs(msgs[1:]), "every event stored exactly once, in order")
	seq := map[string]uint64{}
	for _, m := range msgs {
		seq[m.ID] = m.Seq
	}
	for _, res := range results {
		for _, e := range res.Events {
			require.Equal(t, seq[e.ID], e.Seq)
		}
	}
	th, err := env.c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Zero(t, th.RejectedCount)
	retries := env.logs.find("retrying append", "", "")
	dups := env.logs.find("append was already stored", "", "")
	t.Logf("%d stepdowns, %d retried publishes, %d appends settled as already stored", stepdowns, len(retries), len(dups))
	for _, r := range retries {
		t.Logf("retried after: %s", r["err"])
	}
}

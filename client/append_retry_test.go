package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// TestRetriedAppendAfterALostAckReturnsTheOriginalSequence covers docs/design.md
// invariant 4 on both kinds of stream: R1 checks the version before the id
// (a retry gets 10071 and is resolved by reading forward), R3 checks the id
// first (a duplicate ack); batches get 10201 on both; outside the duplicate
// window every retry gets 10071. The first attempt is published by the test
// with the client's exact bytes and headers, and its ack is dropped; then
// the client appends the same events at the same version.
func TestRetriedAppendAfterALostAckReturnsTheOriginalSequence(t *testing.T) {
	type path struct{ how, code string }
	cases := []struct {
		name     string
		turn     bool
		outside  bool
		r1, r3   path
		r3orCode string // an alternative code on R3 (10164 settles to 10071 but may persist)
	}{
		{name: "a single event retried inside the duplicate window",
			r1: path{"read_forward", "10071"}, r3: path{"duplicate_ack", "0"}},
		{name: "a four-event turn retried inside the duplicate window", turn: true,
			r1: path{"read_forward", "10201"}, r3: path{"read_forward", "10201"}},
		{name: "a single event retried after the duplicate window", outside: true,
			r1: path{"read_forward", "10071"}, r3: path{"read_forward", "10071"}, r3orCode: "10164"},
		{name: "a four-event turn retried after the duplicate window", turn: true, outside: true,
			r1: path{"read_forward", "10071"}, r3: path{"read_forward", "10071"}, r3orCode: "10164"},
	}
	run := func(t *testing.T, inside, outside *appendEnv, replicas int) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				env := inside
				if tc.outside {
					env = outside
				}
				ctx := context.Background()
				thread, v := env.createThread(t, client.CreateOptions{})
				evs := []events.Event{userEvent("what time is it?")}
				if tc.turn {
					evs = toolTurn("call_1", "call_2", "call_3")
				}
				evs = completeEvents(events.DefaultTenant, thread, evs)
				// First attempt: stored, ack lost. The client's cache still says version v.
				first := env.publishAsClient(t, evs, v)
				before := env.stored(t, events.DefaultTenant, thread)
				if tc.outside {
					env.waitUntilForgotten(t)
				}
				env.logs.reset()

				res, err := env.c.Append(ctx, events.DefaultTenant, thread, evs, client.ExpectVersion(v))

				require.NoError(t, err)
				require.True(t, res.Duplicate, "the retry must be reported as a duplicate")
				require.Equal(t, first, resultSeqs(res), "the retry returns the original sequences")
				require.Equal(t, first[len(first)-1], res.Version)
				require.Equal(t, before, env.stored(t, events.DefaultTenant, thread), "nothing new is stored")
				for i, e := range res.Events {
					require.Equal(t, evs[i].ID, e.ID)
				}
				want := tc.r1
				if replicas > 1 {
					want = tc.r3
				}
				got := env.logs.find("append was already stored", "", "")
				require.Len(t, got, 1)
				require.Equal(t, want.how, got[0]["how"], "resolved by the expected path")
				if want.code != got[0]["code"] {
					require.Equal(t, tc.r3orCode, got[0]["code"], "resolved after the expected server answer")
				}

				// A second retry is settled the same way, and so is one from
				// another client that has never seen the thread (cold cache:
				// it reads the thread and finds the events after version v).
				again, err := env.c.Append(ctx, events.DefaultTenant, thread, evs, client.ExpectVersion(v))
				require.NoError(t, err)
				require.True(t, again.Duplicate)
				require.Equal(t, first, resultSeqs(again))
				env.logs.reset()
				cold, err := env.newClient(t, env.nc).Append(ctx, events.DefaultTenant, thread, evs, client.ExpectVersion(v))
				require.NoError(t, err)
				require.True(t, cold.Duplicate)
				require.Equal(t, first, resultSeqs(cold))
				require.Len(t, env.logs.find("append was already stored", "how", "already_stored"), 1)
				require.Equal(t, before, env.stored(t, events.DefaultTenant, thread))

				// The thread goes on at the version the retry returned.
				next, err := env.c.Append(ctx, events.DefaultTenant, thread, []events.Event{userEvent("thanks")}, client.ExpectVersion(res.Version))
				require.NoError(t, err)
				require.False(t, next.Duplicate)
			})
		}
	}
	window := 200 * time.Millisecond
	t.Run("on a single-replica stream", func(t *testing.T) {
		s := natstest.Run(t)
		inside := newEnvOn(t, s.NC, provision.Config{})
		outside := newEnvOn(t, s.NC, provision.Config{Stream: "SHORTWINDOW", SubjectPrefix: "short",
			SnapshotBucket: "short_snapshots", IndexBucket: "short_threads", Duplicates: window})
		run(t, inside, outside, 1)
	})
	t.Run("on a three-replica stream in a three-node cluster", func(t *testing.T) {
		cl := natstest.RunCluster(t, 3)
		nc, _ := cl.Connect(t)
		inside := newEnvOn(t, nc, provision.Config{Replicas: 3})
		outside := newEnvOn(t, nc, provision.Config{Replicas: 3, Stream: "SHORTWINDOW", SubjectPrefix: "short",
			SnapshotBucket: "short_snapshots", IndexBucket: "short_threads", Duplicates: window})
		run(t, inside, outside, 3)
	})
}

// TestRetriedAnyVersionAppendIsNotStoredTwiceAfterTheDuplicateWindow: a
// writer that appends without a version (a tool runner) and retries after
// the server forgot the id must not store a second copy; the client looks
// the id up from its UUIDv7 time.
func TestRetriedAnyVersionAppendIsNotStoredTwiceAfterTheDuplicateWindow(t *testing.T) {
	env := newAppendEnv(t, provision.Config{Duplicates: 200 * time.Millisecond})
	ctx := context.Background()
	thread, v := env.createThread(t, client.CreateOptions{})
	_, err := env.c.Append(ctx, events.DefaultTenant, thread, []events.Event{callsEvent("call_a", "call_b")}, client.ExpectVersion(v))
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		ev   events.Event
	}{
		{"a state update", events.Event{Payload: events.StateSet{Key: "k", Value: []byte(`{"n":1}`)}}},
		{"a tool result (a second copy would also be a double answer)", resultEvent("call_a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := completeEvents(events.DefaultTenant, thread, []events.Event{tc.ev})[0]
			first, err := env.c.Append(ctx, events.DefaultTenant, thread, []events.Event{ev}, client.AnyVersion())
			require.NoError(t, err)
			require.False(t, first.Duplicate)
			n := env.count(t, events.DefaultTenant, thread)
			env.waitUntilForgotten(t)

			again, err := env.c.Append(ctx, events.DefaultTenant, thread, []events.Event{ev}, client.AnyVersion())

			require.NoError(t, err)
			require.True(t, again.Duplicate)
			require.Equal(t, first.Version, again.Version)
			require.Equal(t, n, env.count(t, events.DefaultTenant, thread), "no second copy")
		})
	}
}

// TestCreateThreadRetriedWithTheSameEventIDReturnsTheSameVersion: creating
// a thread is an append at version 0; a retry with the same event id is a
// duplicate, another create of the same id is ErrThreadExists.
func TestCreateThreadRetriedWithTheSameEventIDReturnsTheSameVersion(t *testing.T) {
	env := newAppendEnv(t, provision.Config{}, func(c *client.Config) {
		c.NewThreadID = func() string { return "from-the-hook" }
	})
	ctx := context.Background()
	opts := client.CreateOptions{ThreadID: "support-42", EventID: events.NewID(), ThreadCreated: events.ThreadCreated{Agent: "helper"}}
	tenant, thread, v, err := env.c.CreateThread(ctx, opts)
	require.NoError(t, err)
	require.Equal(t, events.DefaultTenant, tenant)
	require.Equal(t, "support-42", thread, "an explicit id wins")

	_, again := clienttest.Thread(t, env.c, opts, 0)
	require.Equal(t, v, again)
	other := env.newClient(t, env.nc) // a cold cache: the retry is settled by the server
	_, again = clienttest.Thread(t, other, opts, 0)
	require.Equal(t, v, again)
	require.Len(t, env.stored(t, tenant, thread), 1)

	opts.EventID = ""
	_, _, _, err = env.c.CreateThread(ctx, opts)
	require.ErrorIs(t, err, client.ErrThreadExists)
	var ce *client.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, v, ce.Actual)

	hooked, _ := clienttest.Thread(t, env.c, client.CreateOptions{}, 0)
	require.Equal(t, "from-the-hook", hooked, "without an id the create hook names the thread")
}

// TestAnyVersionAppendIsCheckedOnTheThreadAsItIsNotAsTheCacheRemembers: a
// client whose cached state is behind (another service called a tool since)
// still accepts the result: a verdict on the cached state is confirmed on
// the current one before it is reported.
func TestAnyVersionAppendIsCheckedOnTheThreadAsItIsNotAsTheCacheRemembers(t *testing.T) {
	env := newAppendEnv(t, provision.Config{})
	ctx := context.Background()
	thread, v := env.createThread(t, client.CreateOptions{})
	runner := env.newClient(t, env.nc)
	_, err := runner.Append(ctx, events.DefaultTenant, thread, []events.Event{userEvent("what time is it?")}, client.AnyVersion())
	require.NoError(t, err) // the runner's cache now knows the thread, without calls

	_, err = env.c.Append(ctx, events.DefaultTenant, thread, []events.Event{callsEvent("call_clock")}, client.AnyVersion())
	require.NoError(t, err)
	res, err := runner.Append(ctx, events.DefaultTenant, thread, []events.Event{resultEvent("call_clock")}, client.AnyVersion())
	require.NoError(t, err)
	require.Greater(t, res.Version, v)

	_, err = runner.Append(ctx, events.DefaultTenant, thread, []events.Event{resultEvent("call_clock")}, client.AnyVersion())
	var rej *fold.RejectionError
	require.ErrorAs(t, err, &rej, "a second answer is still refused")
	require.Equal(t, fold.CodeNotPending, rej.Code)
}

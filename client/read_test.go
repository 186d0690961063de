package client_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
)

// A reader that disconnects at random points and resumes after the last
// sequence it saw receives every event exactly once, in order.
func TestWatchResumesWithoutGapOrDuplicate(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	tenant, thread, _, err := c.CreateThread(ctx, client.CreateOptions{})
	require.NoError(t, err)
	const n = 5000
	go func() {
		for i := 0; i < n; i++ {
			if _, err := c.Append(ctx, tenant, thread, []events.Event{clienttest.User("m")}, client.AnyVersion()); err != nil {
				t.Errorf("append: %v", err)
				return
			}
		}
	}()
	var got []uint64
	var last uint64
	reconnects := 0
	for len(got) < n+1 {
		w, err := c.Watch(ctx, tenant, thread, client.WatchOptions{After: last})
		require.NoError(t, err)
		stopAfter := 1 + rand.IntN(2*n/100) // about 100 disconnects
		for i := 0; i < stopAfter && len(got) < n+1; i++ {
			select {
			case u := <-w.C:
				require.NotNil(t, u.Event)
				require.NoError(t, u.Err)
				got = append(got, u.Event.Seq)
				last = u.Event.Seq
			case <-time.After(30 * time.Second):
				t.Fatalf("no event after seq %d", last)
			}
		}
		w.Stop()
		reconnects++
	}
	require.Greater(t, reconnects, 50)
	for i := 1; i < len(got); i++ {
		require.Greater(t, got[i], got[i-1], "order/duplicate at %d", i)
	}
	th, err := c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, th.Version, got[len(got)-1])
	require.Len(t, got, n+1)
}

func TestForkDeleteErase(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	tenant, thread, _, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "a"}})
	require.NoError(t, err)
	var vs []uint64
	for _, txt := range []string{"one", "two", "three"} {
		r, err := c.Append(ctx, tenant, thread, []events.Event{clienttest.User(txt)}, client.AnyVersion())
		require.NoError(t, err)
		vs = append(vs, r.Version)
	}
	_, err = c.SetState(ctx, tenant, thread, "k", map[string]int{"x": 1})
	require.NoError(t, err)
	_, ft, _, err := c.Fork(ctx, tenant, thread, client.ForkOptions{AtSeq: vs[1]})
	require.NoError(t, err)
	f, err := c.Get(ctx, tenant, ft, client.Consistent())
	require.NoError(t, err)
	require.Len(t, f.Messages, 2)
	require.Equal(t, "two", f.Messages[1].Content.Text)
	require.Equal(t, thread, f.ForkedFrom.Thread)
	require.Equal(t, "a", f.Agent)

	_, err = c.Delete(ctx, tenant, thread, "test")
	require.NoError(t, err)
	_, err = c.Get(ctx, tenant, thread, client.Consistent())
	require.ErrorIs(t, err, client.ErrThreadNotFound)
	d, err := c.Get(ctx, tenant, thread, client.Consistent(), client.IncludeDeleted())
	require.NoError(t, err)
	require.True(t, d.Deleted)
	_, err = c.Append(ctx, tenant, thread, []events.Event{clienttest.User("x")}, client.AnyVersion())
	require.Error(t, err)
	_, err = c.Undelete(ctx, tenant, thread, "")
	require.NoError(t, err)

	rep, err := c.Erase(ctx, tenant, thread, "gdpr")
	require.NoError(t, err)
	require.Equal(t, uint64(7), rep.RemovedEvents)
	_, err = c.Get(ctx, tenant, thread, client.Consistent())
	require.ErrorIs(t, err, client.ErrThreadNotFound)
	n := 0
	for _, err := range c.Events(ctx, tenant, thread, 0, 0) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 1, n, "only the erasure marker remains")
	// the fork is untouched
	f2, err := c.Get(ctx, tenant, ft, client.Consistent())
	require.NoError(t, err)
	require.Len(t, f2.Messages, 2)
}

// A watch whose connection closes ends with an error, never silently as if
// it had been stopped (nats.go ends the consumer iterator either with
// nats.ErrConnectionClosed or with jetstream.ErrMsgIteratorClosed; both are
// an error here). Repeated, because which of the two comes is a race.
func TestWatchEndsWithAnErrorWhenItsConnectionCloses(t *testing.T) {
	s := natstest.Run(t)
	ctx := context.Background()
	setup, err := client.New(ctx, s.NC, client.Config{Provision: true})
	require.NoError(t, err)
	tenant, thread, _, err := setup.CreateThread(ctx, client.CreateOptions{})
	require.NoError(t, err)
	for i := range 20 {
		nc, err := nats.Connect(s.ClientURL())
		require.NoError(t, err)
		c, err := client.New(ctx, nc, client.Config{})
		require.NoError(t, err)
		w, err := c.Watch(ctx, tenant, thread, client.WatchOptions{})
		require.NoError(t, err)
		select {
		case u := <-w.C:
			require.NotNil(t, u.Event, "round %d: thread.created first", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: no event", i)
		}
		nc.Close()
		select {
		case <-w.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the watch did not end after its connection closed", i)
		}
		require.ErrorIs(t, w.Err(), nats.ErrConnectionClosed, "round %d", i)
		w.Stop()
	}
}

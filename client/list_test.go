package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// seedThreads creates n threads quickly: two events each (created + user
// message) published asynchronously straight to JetStream, as a bulk
// loader would; the test is about listing, not appending.
func seedThreads(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	ctx := context.Background()
	subjects := events.Subjects{}
	for i := 0; i < n; i++ {
		if i%1000 == 999 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(60 * time.Second):
				t.Fatal("async publishes not acknowledged")
			}
		}
		agent := []string{"alpha", "beta"}[i%2]
		owner := fmt.Sprintf("user%d", i%5)
		md := map[string]string{"bucket": fmt.Sprint(i % 3)}
		thread := fmt.Sprintf("t%05d", i)
		subj, err := subjects.Thread("acme", thread)
		require.NoError(t, err)
		for _, p := range []events.Payload{
			events.ThreadCreated{Agent: agent, Owner: owner, Metadata: md, Replies: events.RepliesOff},
			events.UserMessage{Content: events.Text("hello")},
		} {
			_, err = js.PublishMsgAsync(clienttest.Msg(t, subj, events.New("acme", thread, "seed", p)))
			require.NoError(t, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatal("async publishes not acknowledged")
	}
	_ = ctx
}

// Listing 10,000 threads with filters and pagination returns every matching
// thread exactly once, newest first.
func TestListTenThousandThreadsPaged(t *testing.T) {
	s := clienttest.New(t, clienttest.WithProjector(projector.Config{}))
	c := s.Client
	const n = 10_000
	seedThreads(t, s.JS, n)
	ctx := context.Background()
	require.Eventually(t, func() bool {
		p, err := c.List(ctx, "acme", client.ListOptions{Limit: client.MaxListLimit})
		if err != nil {
			return false
		}
		total := len(p.Threads)
		for p.NextCursor != "" {
			p, err = c.List(ctx, "acme", client.ListOptions{Limit: client.MaxListLimit, Cursor: p.NextCursor})
			if err != nil {
				return false
			}
			total += len(p.Threads)
		}
		return total == n
	}, 300*time.Second, 200*time.Millisecond, "projector did not index every thread")

	cases := []struct {
		name string
		opts client.ListOptions
		want func(i int) bool
	}{
		{"every thread", client.ListOptions{}, func(int) bool { return true }},
		{"threads of one agent", client.ListOptions{Agent: "beta"}, func(i int) bool { return i%2 == 1 }},
		{"threads of one owner", client.ListOptions{Owner: "user3"}, func(i int) bool { return i%5 == 3 }},
		{"threads with a metadata value and an agent", client.ListOptions{Agent: "alpha", Metadata: map[string]string{"bucket": "2"}},
			func(i int) bool { return i%2 == 0 && i%3 == 2 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := map[string]bool{}
			for i := 0; i < n; i++ {
				if tc.want(i) {
					want[fmt.Sprintf("t%05d", i)] = true
				}
			}
			seen := map[string]bool{}
			opts := tc.opts
			opts.Limit = 337
			var prev *client.ThreadSummary
			for pages := 0; ; pages++ {
				require.Less(t, pages, 1000)
				p, err := c.List(ctx, "acme", opts)
				require.NoError(t, err)
				for i := range p.Threads {
					th := p.Threads[i]
					require.True(t, want[th.Thread], "unexpected %s", th.Thread)
					require.False(t, seen[th.Thread], "%s listed twice", th.Thread)
					seen[th.Thread] = true
					if prev != nil {
						newerOrSame := prev.UpdatedAt.After(th.UpdatedAt) || prev.UpdatedAt.Equal(th.UpdatedAt) && prev.Thread > th.Thread
						require.True(t, newerOrSame, "order: %s (%s) before %s (%s)", prev.Thread, prev.UpdatedAt, th.Thread, th.UpdatedAt)
					}
					prev = &th
				}
				if p.NextCursor == "" {
					break
				}
				opts.Cursor = p.NextCursor
			}
			require.Equal(t, len(want), len(seen))
		})
	}
	_, err := c.List(ctx, "acme", client.ListOptions{Cursor: "not-a-cursor!"})
	require.ErrorIs(t, err, client.ErrBadCursor)
}

// After erasure no event, snapshot or index entry of the thread can be read
// by any API, and other threads are untouched.
func TestEraseLeavesNothingReadable(t *testing.T) {
	s := clienttest.New(t, clienttest.WithProjector(projector.Config{}))
	c := s.Client
	ctx := context.Background()
	for _, th := range []string{"victim", "bystander"} {
		clienttest.Thread(t, c, client.CreateOptions{Tenant: "acme", ThreadID: th, ThreadCreated: events.ThreadCreated{Agent: "a"}}, 0)
		for i := 0; i < 50; i++ {
			_, err := c.Append(ctx, "acme", th, []events.Event{{Payload: events.UserMessage{Content: events.Text(fmt.Sprintf("secret %d", i))}}}, client.AnyVersion())
			require.NoError(t, err)
		}
	}
	// Wait until both are projected and indexed.
	require.Eventually(t, func() bool {
		p, err := c.List(ctx, "acme", client.ListOptions{})
		return err == nil && len(p.Threads) == 2 && p.Threads[0].MessageCount == 50 && p.Threads[1].MessageCount == 50
	}, 30*time.Second, 20*time.Millisecond)
	before, err := c.Get(ctx, "acme", "bystander", client.Consistent())
	require.NoError(t, err)

	rep, err := c.Erase(ctx, "acme", "victim", "user request")
	require.NoError(t, err)
	require.Equal(t, uint64(51), rep.RemovedEvents)
	require.NotEmpty(t, rep.SnapshotKeys)

	// Give the projector time to see the erasure marker, then check every API.
	require.Eventually(t, func() bool {
		p, err := c.List(ctx, "acme", client.ListOptions{IncludeDeleted: true})
		return err == nil && len(p.Threads) == 1 && p.Threads[0].Thread == "bystander"
	}, 30*time.Second, 20*time.Millisecond)
	for _, opts := range [][]client.GetOption{nil, {client.Consistent()}, {client.AtSeq(10)}, {client.IncludeDeleted()}} {
		_, err := c.Get(ctx, "acme", "victim", opts...)
		require.ErrorIs(t, err, client.ErrThreadNotFound)
	}
	for ev, err := range c.Events(ctx, "acme", "victim", 0, 0) {
		require.NoError(t, err)
		require.Equal(t, events.TypeErased, ev.Type, "only the erasure marker remains")
	}
	kv, err := s.JS.KeyValue(ctx, "convlog_snapshots")
	require.NoError(t, err)
	lister, err := kv.ListKeysFiltered(ctx, "acme.victim", "acme.victim.>")
	require.NoError(t, err)
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err == nil {
			// A head may be rewritten by the projector as "erased": it must hold no messages.
			snap, lerr := snapstore.NewWith(kv, snapstore.Options{Sealer: c.Keys()}).Load(ctx, "acme", "victim")
			require.NoError(t, lerr, "key %s", e.Key())
			require.True(t, snap.State.Erased)
			require.Empty(t, snap.State.Messages)
		}
	}
	w, err := c.Watch(ctx, "acme", "victim", client.WatchOptions{})
	require.NoError(t, err)
	select {
	case u := <-w.C:
		require.Equal(t, events.TypeErased, u.Event.Type)
	case <-time.After(5 * time.Second):
		t.Fatal("watch delivered nothing")
	}
	w.Stop()
	after, err := c.Get(ctx, "acme", "bystander", client.Consistent())
	require.NoError(t, err)
	require.Equal(t, before.Messages, after.Messages)
}

package client_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/projector"
)

// forkSource creates thread acme/src of n user messages, each size bytes
// of "y" then its index, appended 500 at a time: the source the fork tests
// and benchmarks fork by reference.
func forkSource(tb testing.TB, c *client.Client, n, size int) {
	tb.Helper()
	_, v := clienttest.Thread(tb, c, client.CreateOptions{Tenant: "acme", ThreadID: "src"}, 0)
	text := strings.Repeat("y", size)
	clienttest.AppendUsers(tb, c, "acme", "src", v, n, 500, func(i int) string { return fmt.Sprintf("%s %d", text, i) })
}

// A fork of a thread larger than one event can hold (3,000 messages of
// 600 bytes: 1.8 MB against the 1 MiB max payload) is made by reference:
// one small event, and the fork reads back equal to its source up to the
// fork point, from the log and from the projector's snapshot; it takes
// appends; a fork of the fork reads the same lineage. Erasing the source
// takes the inherited history from its forks (and their forks), on every
// read path.
func TestForkByReferenceOfAThreadLargerThanAnEvent(t *testing.T) {
	ns := clienttest.New(t)
	c := ns.Client
	ctx := context.Background()
	forkSource(t, c, 3000, 600)
	_, err := c.SetState(ctx, "acme", "src", "k", "v")
	require.NoError(t, err)
	src, err := c.Get(ctx, "acme", "src", client.Consistent())
	require.NoError(t, err)
	require.Len(t, src.Messages, 3000)

	_, _, v, err := c.Fork(ctx, "acme", "src", client.ForkOptions{ThreadID: "fork"})
	require.NoError(t, err, "a copy would not fit: the fork is by reference")
	// The source goes on; the fork does not see it.
	_, err = c.Append(ctx, "acme", "src", []events.Event{clienttest.User("after the fork")}, client.AnyVersion())
	require.NoError(t, err)

	same := func(t *testing.T, th *client.Thread, extra int) {
		t.Helper()
		require.Len(t, th.Messages, 3000+extra)
		for i, m := range src.Messages {
			require.Equal(t, m.Content, th.Messages[i].Content, "message %d", i)
			require.Equal(t, m.Role, th.Messages[i].Role)
		}
		require.Equal(t, "\"v\"", string(th.KV["k"]))
		require.NotNil(t, th.ForkedFrom)
		require.True(t, th.ForkedFrom.ByReference)
		require.Equal(t, src.Version, th.ForkedFrom.Seq)
	}
	fk, err := c.Get(ctx, "acme", "fork", client.Consistent())
	require.NoError(t, err)
	same(t, fk, 0)
	require.Equal(t, v, fk.Version)
	ev, err := c.Get(ctx, "acme", "fork", client.WithEvents())
	require.NoError(t, err)
	require.Len(t, ev.Events, 1)
	b, err := events.Marshal(ev.Events[0].Event)
	require.NoError(t, err)
	require.Less(t, len(b), 1024, "the fork event is small")

	_, err = c.Append(ctx, "acme", "fork", []events.Event{clienttest.User("only in the fork")}, client.AnyVersion())
	require.NoError(t, err)
	fk, err = c.Get(ctx, "acme", "fork", client.Consistent())
	require.NoError(t, err)
	same(t, fk, 1)
	require.Equal(t, "only in the fork", fk.Messages[3000].Content.Text)

	_, _, _, err = c.Fork(ctx, "acme", "fork", client.ForkOptions{ThreadID: "fork2", ByReference: true})
	require.NoError(t, err)
	f2, err := c.Get(ctx, "acme", "fork2", client.Consistent())
	require.NoError(t, err)
	require.Len(t, f2.Messages, 3001)
	require.Equal(t, "only in the fork", f2.Messages[3000].Content.Text)

	// The projector's snapshot of the fork holds the inherited history.
	p, err := projector.New(ns.JS, projector.Config{})
	require.NoError(t, err)
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(pctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool {
		th, err := c.Get(ctx, "acme", "fork")
		return err == nil && th.FromSnapshot && th.Version == fk.Version
	}, 30*time.Second, 20*time.Millisecond, "the fork projected")
	snap, err := c.Get(ctx, "acme", "fork")
	require.NoError(t, err)
	require.True(t, snap.FromSnapshot)
	same(t, snap, 1)

	// Erasing the source: a fork read from the log inherits nothing.
	// (Erase purges every snapshot key of the source one by one: give it
	// more than the client's default timeout on a loaded machine.)
	ectx, ecancel := context.WithTimeout(ctx, 2*time.Minute)
	defer ecancel()
	rep, err := c.Erase(ectx, "acme", "src", "test")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"fork", "fork2"}, rep.Forks, "the forks' snapshots are purged")
	gone, err := c.Get(ctx, "acme", "fork", client.AtSeq(fk.Version))
	require.NoError(t, err)
	require.True(t, gone.ForkedFrom.SourceErased)
	require.Len(t, gone.Messages, 1)
	// Every read path, the default (snapshot) one too, and the fork of
	// the fork, which inherited through the fork.
	for id, want := range map[string]int{"fork": 1, "fork2": 1} {
		th, err := c.Get(ctx, "acme", id)
		require.NoError(t, err, id)
		require.Len(t, th.Messages, want, id)
		require.Equal(t, "only in the fork", th.Messages[0].Content.Text, id)
	}
}

// BenchmarkGetOfAForkByReference: Get (the projector's snapshot) of a fork
// by reference of a 10,000-message thread, against Get of the source, a
// thread of the same length, in one run; metric fork/source (target: at
// most 1.2).
func BenchmarkGetOfAForkByReference(b *testing.B) {
	ns := clienttest.New(b)
	c := ns.Client
	ctx := context.Background()
	forkSource(b, c, 10000, 400)
	_, _, v, err := c.Fork(ctx, "acme", "src", client.ForkOptions{ThreadID: "fork", ByReference: true})
	require.NoError(b, err)
	p, err := projector.New(ns.JS, projector.Config{})
	require.NoError(b, err)
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(pctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(b, func() bool {
		f, ferr := c.Get(ctx, "acme", "fork")
		s, serr := c.Get(ctx, "acme", "src")
		return ferr == nil && serr == nil && f.FromSnapshot && s.FromSnapshot && f.Version == v && s.Version == v-1
	}, time.Minute, 20*time.Millisecond, "both projected")
	timeGets := func(id string) time.Duration {
		t0 := time.Now()
		for range 20 {
			th, err := c.Get(ctx, "acme", id)
			require.NoError(b, err)
			require.Len(b, th.Messages, 10000)
		}
		return time.Since(t0)
	}
	var fork, source time.Duration
	for b.Loop() {
		fork += timeGets("fork")
		source += timeGets("src")
	}
	b.ReportMetric(float64(fork)/float64(source), "fork/source")
}

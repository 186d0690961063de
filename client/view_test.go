package client_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/projector"
)

// GetView returns the same thread as Get, message for message, without
// copying the chunked history: two views share the cached chunks'
// messages (the same memory), and the newest messages come from the head.
// A thread the projector has not reached is read from the log; a deleted
// one is not found, as with Get.
func TestGetViewIsGetWithoutACopy(t *testing.T) {
	s := clienttest.New(t)
	c := s.Client
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Not projected yet: the log answers.
	_, v := clienttest.Thread(t, c, clienttest.RepliesOff("acme", "early"), 0)
	_, err := c.Append(ctx, "acme", "early", []events.Event{clienttest.User("first")}, client.ExpectVersion(v))
	require.NoError(t, err)
	early, err := c.GetView(ctx, "acme", "early")
	require.NoError(t, err)
	require.Equal(t, 1, early.Len())
	require.Equal(t, "first", early.At(0).Content.Text)

	// Small chunks: a 300-message thread is several chunks and a head.
	clienttest.RunProjector(t, s.JS, projector.Config{ChunkBytes: 4 << 10, TailBytes: 1 << 10})
	_, v = clienttest.Thread(t, c, clienttest.RepliesOff("acme", "long"), 0)
	v = clienttest.AppendUsers(t, c, "acme", "long", v, 300, 1, func(i int) string { return fmt.Sprintf("message %d %s", i, strings.Repeat("x", 100)) })
	var got *client.Thread
	require.Eventually(t, func() bool {
		got, err = c.Get(ctx, "acme", "long")
		return err == nil && got.Version == v
	}, 30*time.Second, 10*time.Millisecond, "projected")
	view, err := c.GetView(ctx, "acme", "long")
	require.NoError(t, err)
	require.Equal(t, v, view.Version)
	require.Greater(t, view.Base, 0, "the history is chunked (else the view proves nothing)")
	require.Less(t, len(view.Messages), 300)
	require.Equal(t, len(got.Messages), view.Len())
	n := 0
	for i, m := range view.All() {
		require.Equal(t, i, n)
		require.Equal(t, got.Messages[i], *m, "message %d", i)
		require.Same(t, m, view.At(i))
		n++
	}
	require.Equal(t, view.Len(), n)
	// A second view shares the chunked messages: nothing was copied.
	again, err := c.GetView(ctx, "acme", "long")
	require.NoError(t, err)
	require.Same(t, view.At(0), again.At(0))
	require.Same(t, view.At(view.Base-1), again.At(again.Base-1))

	// A deleted thread is not found, as with Get.
	_, err = c.Delete(ctx, "acme", "long", "test")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.GetView(ctx, "acme", "long")
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
	_, err = c.GetView(ctx, "acme", "long")
	require.ErrorIs(t, err, client.ErrThreadDeleted)
}

// A head read again unchanged is not decoded again: two views of an
// unchanged thread share the decoded state (the same metadata map), and
// a view after the next projection sees the new head at once, never the
// kept one.
func TestGetViewDecodesAnUnchangedHeadOnce(t *testing.T) {
	s := clienttest.New(t)
	c := s.Client
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clienttest.RunProjector(t, s.JS, projector.Config{ChunkBytes: 4 << 10, TailBytes: 1 << 10})
	_, _, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "kept", ThreadCreated: events.ThreadCreated{
		Replies: events.RepliesOff, Metadata: map[string]string{"team": "blue"}}})
	require.NoError(t, err)
	v = clienttest.AppendUsers(t, c, "acme", "kept", v, 50, 1, func(i int) string { return fmt.Sprintf("message %d %s", i, strings.Repeat("x", 100)) })
	viewAt := func(version uint64) *client.ThreadView {
		var view *client.ThreadView
		require.Eventually(t, func() bool {
			view, err = c.GetView(ctx, "acme", "kept")
			// From the snapshot: before the projector's first head, GetView
			// folds the log (at the same version, and never shared).
			return err == nil && view.Version == version && view.FromSnapshot
		}, 30*time.Second, 10*time.Millisecond, "projected up to %d", version)
		return view
	}
	mapOf := func(v *client.ThreadView) uintptr { return reflect.ValueOf(v.Metadata).Pointer() }
	first := viewAt(v)
	second, err := c.GetView(ctx, "acme", "kept")
	require.NoError(t, err)
	require.Equal(t, v, second.Version)
	require.Equal(t, map[string]string{"team": "blue"}, second.Metadata)
	require.Equal(t, mapOf(first), mapOf(second), "the unchanged head was decoded again")
	second.Title = "the caller's own struct"
	require.Empty(t, first.Title)

	res, err := c.Append(ctx, "acme", "kept", []events.Event{clienttest.User("one more")}, client.ExpectVersion(v))
	require.NoError(t, err)
	third := viewAt(res.Version)
	require.NotEqual(t, mapOf(second), mapOf(third), "a new head is decoded")
	require.Equal(t, first.Len()+1, third.Len())
	require.Equal(t, "one more", third.At(third.Len()-1).Content.Text)
	require.Equal(t, map[string]string{"team": "blue"}, third.Metadata)
}

// BenchmarkGetView reads a projected thread of 1,000 messages of 512 bytes
// of text with GetView over an in-process connection (how agentd's HTTP
// API reads its embedded server), its chunks and head cached: the warm
// read that BENCHMARKS.md (section 2) compares with Redis.
//
//	go test ./client -run '^$' -bench BenchmarkGetView
func BenchmarkGetView(b *testing.B) {
	s := natstest.Run(b)
	nc, err := s.Connect()
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	ctx := context.Background()
	c, err := client.New(ctx, nc, client.Config{Provision: true})
	require.NoError(b, err)
	clienttest.RunProjector(b, s.JS, projector.Config{})
	thread, v := clienttest.Thread(b, c, clienttest.RepliesOff(events.DefaultTenant, ""), 0)
	text := strings.Repeat("x", 512)
	v = clienttest.AppendUsers(b, c, "default", thread, v, 1000, client.MaxTurnEvents, func(int) string { return text })
	require.Eventually(b, func() bool {
		view, err := c.GetView(ctx, "default", thread)
		return err == nil && view.FromSnapshot && view.Version == v
	}, 30*time.Second, 10*time.Millisecond)
	for b.Loop() {
		view, err := c.GetView(ctx, "default", thread)
		if err != nil || view.Len() != 1000 {
			b.Fatalf("view: %v", err)
		}
	}
}

// With Config.TrackSnapshots a client's GetView is the same thread, and a
// new event shows in its views once projected; the option asks for what
// it needs (the chunk cache, the deployment's permissions), and Close
// stops the watch.
func TestTrackSnapshotsGetView(t *testing.T) {
	s := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, bad := range []struct {
		cfg  client.Config
		want string
	}{
		{client.Config{TrackSnapshots: true, ChunkCacheBytes: -1}, "TrackSnapshots needs the chunk cache"},
		{client.Config{TrackSnapshots: true, Tenant: "acme"}, "TrackSnapshots needs full permissions"},
	} {
		_, err := client.New(ctx, s.NC, bad.cfg)
		require.ErrorContains(t, err, bad.want)
	}

	c, err := client.New(ctx, s.NC, client.Config{Provision: true, TrackSnapshots: true})
	require.NoError(t, err)
	clienttest.RunProjector(t, s.JS, projector.Config{})
	thread, v := clienttest.Thread(t, c, clienttest.RepliesOff(events.DefaultTenant, ""), 0)
	for i := range 3 {
		res, err := c.Append(ctx, "default", thread, []events.Event{clienttest.User(fmt.Sprintf("message %d", i))}, client.ExpectVersion(v))
		require.NoError(t, err)
		v = res.Version
		require.Eventually(t, func() bool {
			view, err := c.GetView(ctx, "default", thread)
			return err == nil && view.FromSnapshot && view.Version == v && view.Len() == i+1
		}, 30*time.Second, time.Millisecond, "message %d in the view", i)
		got, err := c.Get(ctx, "default", thread)
		require.NoError(t, err)
		view, err := c.GetView(ctx, "default", thread)
		require.NoError(t, err)
		var msgs []events.Message
		for _, m := range view.All() {
			msgs = append(msgs, *m)
		}
		require.Equal(t, got.Messages, msgs)
	}
	c.Close()
	_, err = c.GetView(ctx, "default", thread)
	require.ErrorIs(t, err, client.ErrClosed)
}

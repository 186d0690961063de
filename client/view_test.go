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
	"github.com/convlog/convlog/projector"
)

// GetView returns the same thread as Get, message for message, without
// copying the chunked history: two views share the cached chunks'
// messages (the same memory), and the newest messages come from the head.
// A thread the projector has not reached is read from the log; a deleted
// one is not found, as with Get.
func TestGetViewIsGetWithoutACopy(t *testing.T) {
	c, s := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Not projected yet: the log answers.
	_, _, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "early", ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
	require.NoError(t, err)
	_, err = c.Append(ctx, "acme", "early", []events.Event{user("first")}, client.ExpectVersion(v))
	require.NoError(t, err)
	early, err := c.GetView(ctx, "acme", "early")
	require.NoError(t, err)
	require.Equal(t, 1, early.Len())
	require.Equal(t, "first", early.At(0).Content.Text)

	// Small chunks: a 300-message thread is several chunks and a head.
	p, err := projector.New(s.JS, projector.Config{ChunkBytes: 4 << 10, TailBytes: 1 << 10})
	require.NoError(t, err)
	pctx, pcancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(pctx) }()
	t.Cleanup(func() { pcancel(); <-done })
	<-p.Ready()
	_, _, v, err = c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "long", ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
	require.NoError(t, err)
	for i := range 300 {
		res, err := c.Append(ctx, "acme", "long", []events.Event{user(fmt.Sprintf("message %d %s", i, strings.Repeat("x", 100)))}, client.ExpectVersion(v))
		require.NoError(t, err)
		v = res.Version
	}
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

package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/projector"
)

// An erasure marker published by hand after events that are still stored
// does not hide the thread, neither from a consistent read (the log) nor
// from the projector's snapshot: the thread is found with its events, and
// the fold records the marker as rejected (erasure_not_first). A real
// erase (purge, then the marker) still erases.
func TestAForgedErasureMarkerHidesNothing(t *testing.T) {
	srv := clienttest.New(t, clienttest.WithProjector(projector.Config{}))
	c := srv.Client
	ctx := context.Background()
	thread, _ := clienttest.Thread(t, c, clienttest.RepliesOff("acme", ""), 0)
	_, err := c.Append(ctx, "acme", thread, []events.Event{clienttest.User("one"), clienttest.User("two")}, client.AnyVersion())
	require.NoError(t, err)

	forgedSeq := publishBehindTheClient(t, srv.JS, events.New("acme", thread, "attacker", events.Erased{RemovedEvents: 3, Reason: "forged"}))

	th, err := c.Get(ctx, "acme", thread, client.Consistent())
	require.NoError(t, err, "the log still holds the thread's events")
	require.False(t, th.Erased)
	require.Len(t, th.Messages, 2)
	require.Equal(t, forgedSeq, th.Version)
	require.NotEmpty(t, th.Rejections)
	require.Equal(t, fold.CodeErasureNotFirst, th.Rejections[len(th.Rejections)-1].Code)

	require.Eventually(t, func() bool {
		s, err := c.Get(ctx, "acme", thread)
		return err == nil && s.FromSnapshot && s.Version == forgedSeq && !s.Erased && len(s.Messages) == 2
	}, 10*time.Second, 10*time.Millisecond, "the snapshot keeps the thread")

	// A real erase still erases, over the projector's existing head.
	_, err = c.Erase(ctx, "acme", thread, "test")
	require.NoError(t, err)
	_, err = c.Get(ctx, "acme", thread, client.Consistent())
	require.ErrorIs(t, err, client.ErrThreadNotFound)
	require.Eventually(t, func() bool {
		_, err := c.Get(ctx, "acme", thread)
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
}

// publishBehindTheClient publishes ev on its thread's subject straight to
// JetStream, with convlog's headers but none of the client's checks, as a
// raw NATS publisher could, and returns its sequence.
func publishBehindTheClient(t *testing.T, js jetstream.JetStream, ev events.Event) uint64 {
	t.Helper()
	subject, err := events.Subjects{}.Thread(ev.Tenant, ev.Thread)
	require.NoError(t, err)
	ack, err := js.PublishMsg(context.Background(), clienttest.Msg(t, subject, ev))
	require.NoError(t, err)
	return ack.Sequence
}

package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/clienttest"
)

// A stray first event that is not thread.created, published over NATS on
// a fresh thread subject, does not burn the thread id: CreateThread
// creates the thread after it (the fold keeps the stray event as a
// no_thread rejection), and a second create is ErrThreadExists.
func TestCreateThreadAfterAStrayFirstEvent(t *testing.T) {
	srv := clienttest.New(t)
	c := srv.Client
	ctx := context.Background()
	thread := "stray-first"
	publishBehindTheClient(t, srv.JS, events.New("acme", thread, "someone", events.UserMessage{Content: events.Text("too early")}))

	_, _, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: thread, ThreadCreated: events.ThreadCreated{Title: "mine"}})
	require.NoError(t, err, "the id is not burnt by an event that created nothing")
	require.Equal(t, uint64(2), v)
	th, err := c.Get(ctx, "acme", thread, client.Consistent())
	require.NoError(t, err)
	require.True(t, th.Exists)
	require.Equal(t, "mine", th.Title)
	require.Empty(t, th.Messages)
	require.Equal(t, fold.CodeNoThread, th.Rejections[0].Code)

	_, _, _, err = c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: thread})
	require.ErrorIs(t, err, client.ErrThreadExists)
}

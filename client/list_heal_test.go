package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// An index entry that does not decode does not hide its thread from List:
// the thread is listed, read from its log.
func TestListShowsAThreadWhoseIndexEntryIsUnreadable(t *testing.T) {
	srv := clienttest.New(t, clienttest.WithProjector(projector.Config{}))
	c := srv.Client
	ctx := context.Background()
	thread, version := clienttest.Thread(t, c, client.CreateOptions{Tenant: "acme", ThreadCreated: events.ThreadCreated{Title: "kept", Replies: events.RepliesOff}}, 1)
	require.Eventually(t, func() bool {
		page, err := c.List(ctx, "acme", client.ListOptions{})
		return err == nil && len(page.Threads) == 1 && page.Threads[0].Version == version
	}, 10*time.Second, 10*time.Millisecond)

	idx, err := srv.JS.KeyValue(ctx, c.Config().Resources.IndexBucket)
	require.NoError(t, err)
	_, err = idx.Put(ctx, snapstore.IndexKey("acme", thread), []byte("\xc1 garbage"))
	require.NoError(t, err)

	page, err := c.List(ctx, "acme", client.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Threads, 1, "the thread is listed")
	got := page.Threads[0]
	require.Equal(t, thread, got.Thread)
	require.Equal(t, "kept", got.Title)
	require.Equal(t, version, got.Version)
	require.Equal(t, 1, got.MessageCount)
}

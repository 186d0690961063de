package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

// The default read of a thread comes from a view of its snapshot (its
// history in chunks): the body is the one a read of the log gives (every
// message, base 0), and a poll with the current ETag gets 304.
func TestGetThreadFromAViewIsTheWholeThread(t *testing.T) {
	e := newEnv(t, withProjector(), withoutWorkers())
	ctx := context.Background()
	id, v := clienttest.Thread(t, e.c, clienttest.RepliesOff("acme", ""), 0)
	// 200 messages of 512 bytes: more than a tail (32 KiB), so the
	// snapshot's history is in chunks.
	v = clienttest.AppendUsers(t, e.c, "acme", id, v, 200, client.MaxTurnEvents, func(i int) string { return fmt.Sprintf("%03d %s", i, strings.Repeat("x", 508)) })
	path := "/v1/threads/" + id
	type body struct {
		Version      uint64           `json:"version"`
		Base         int              `json:"base"`
		MessageCount int              `json:"message_count"`
		Messages     []events.Message `json:"messages"`
	}
	var view body
	var r resp
	require.Eventually(t, func() bool {
		r = e.do("GET", path, keyAcme, nil)
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		view = body{}
		r.json(t, &view)
		return view.Version == v
	}, 30*time.Second, 10*time.Millisecond, "the snapshot at version %d", v)
	snap, err := e.c.GetView(ctx, "acme", id)
	require.NoError(t, err)
	require.True(t, snap.FromSnapshot)
	require.Positive(t, snap.Base, "the view's history is chunked")

	var log body
	rl := e.do("GET", path+"?consistent=true", keyAcme, nil)
	require.Equal(t, http.StatusOK, rl.status)
	rl.json(t, &log)
	require.Equal(t, log, view)
	require.Equal(t, 200, view.MessageCount)
	require.Len(t, view.Messages, 200)
	require.Zero(t, view.Base)
	require.Equal(t, "199 "+strings.Repeat("x", 508), view.Messages[199].Content.Text)

	tag := r.header.Get("ETag")
	require.NotEmpty(t, tag)
	r = e.do("GET", path, keyAcme, nil, "If-None-Match", tag)
	require.Equal(t, http.StatusNotModified, r.status)
	require.Equal(t, tag, r.header.Get("ETag"))
	require.Empty(t, r.body)
}

package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/transcripts"
)

// Importing every real transcript stores each conversation once with zero
// rejections; a second import stores nothing; exporting a thread in the
// OpenAI format gives back the source conversation exactly.
func TestImportExportRealTranscripts(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	set := transcripts.Load(t)
	n := 0
	for f, conv := range set.Conversations(t) {
		res, err := c.ImportConversation(ctx, conv, client.ImportOptions{})
		require.NoError(t, err, "%s %s", f, conv.ID)
		require.False(t, res.AlreadyImported)
		n++
		if n%40 == 0 || f == "sweagent_fc_demos.jsonl" {
			again, err := c.ImportConversation(ctx, conv, client.ImportOptions{})
			require.NoError(t, err)
			require.True(t, again.AlreadyImported)
			require.Equal(t, res.Version, again.Version)
			var buf bytes.Buffer
			require.NoError(t, c.ExportThread(ctx, res.Tenant, res.Thread, client.ExportOpenAI, &buf))
			var back events.Conversation
			require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
			want, _ := json.Marshal(conv.Messages)
			got, _ := json.Marshal(back.Messages)
			require.JSONEq(t, string(want), string(got), "%s %s", f, conv.ID)
			require.JSONEq(t, string(conv.Meta), string(back.Meta))
			th, err := c.Get(ctx, res.Tenant, res.Thread, client.Consistent())
			require.NoError(t, err)
			require.Zero(t, th.RejectedCount)
			require.Equal(t, events.RepliesOff, th.Replies)
		}
	}
	require.Equal(t, set.Total().Conversations, n)
}

// A thread exported as raw events imports into another deployment (and
// tenant) with the same ids and history, a compaction's sequence
// translated; a second import stores nothing. (Event ids are de-duplicated
// stream-wide, so a copy inside the same deployment needs new ids.)
func TestExportImportEvents(t *testing.T) {
	c := clienttest.New(t).Client
	target := clienttest.New(t).Client
	ctx := context.Background()
	th, _ := clienttest.Thread(t, c, client.CreateOptions{Tenant: "src", ThreadCreated: events.ThreadCreated{Agent: "a"}}, 0)
	var firstSeq uint64
	for i := 0; i < 5; i++ {
		r, err := c.Append(ctx, "src", th, []events.Event{clienttest.User(fmt.Sprintf("m%d", i))}, client.AnyVersion())
		require.NoError(t, err)
		if i == 1 {
			firstSeq = r.Version
		}
	}
	_, err := c.Append(ctx, "src", th, []events.Event{{Payload: events.Compaction{UpToSeq: firstSeq, Summary: events.Text("summary of m0, m1")}}}, client.AnyVersion())
	require.NoError(t, err)
	src, err := c.Get(ctx, "src", th, client.Consistent())
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, c.ExportThread(ctx, "src", th, client.ExportEvents, &buf))
	exported := buf.String()
	for pass := 0; pass < 2; pass++ {
		rep, err := target.ImportEvents(ctx, strings.NewReader(exported), "dst")
		require.NoError(t, err)
		require.Equal(t, 7, rep.Events)
		require.Zero(t, rep.Rejected)
		require.Equal(t, pass*7, rep.Already)
	}
	dst, err := target.Get(ctx, "dst", th, client.Consistent())
	require.NoError(t, err)
	require.Len(t, dst.Messages, len(src.Messages))
	for i := range src.Messages {
		require.Equal(t, src.Messages[i].Content, dst.Messages[i].Content)
		require.Equal(t, src.Messages[i].EventID, dst.Messages[i].EventID)
	}
	require.Equal(t, "summary of m0, m1", dst.Messages[0].Content.Text)
}

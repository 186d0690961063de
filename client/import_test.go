package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/transcripts"
)

// Importing every real transcript stores each conversation once with zero
// rejections; a second import stores nothing; exporting a thread in the
// OpenAI format gives back the source conversation exactly.
func TestImportExportRealTranscripts(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	dir, err := transcripts.Dir()
	require.NoError(t, err)
	n := 0
	for _, f := range transcripts.Files {
		for conv, err := range transcripts.Read(filepath.Join(dir, f)) {
			require.NoError(t, err)
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
	}
	require.Equal(t, 283, n)
}

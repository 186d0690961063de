package importer_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/importer"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

// A transcript file imports as one thread per conversation, reports its
// progress up to the files' size, stores nothing twice when imported
// again, and verifies identical; a broken line is counted, not fatal.
func TestConversationsImportOnceAndVerifyIdentical(t *testing.T) {
	cl := clienttest.New(t).Client
	ctx := context.Background()
	src := filepath.Join("..", "..", "testdata", "conversations", "tooltalk.jsonl")
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "convs.jsonl")
	require.NoError(t, os.WriteFile(file, append(b, []byte("{not json\n")...), 0o600))
	total, err := importer.FilesSize([]string{file})
	require.NoError(t, err)

	var last int64
	opts := client.ImportOptions{Tenant: "acme", Replies: events.RepliesOff}
	sum, err := importer.Conversations(ctx, cl, []string{file}, opts, func(done int64) { last = done }, nil)
	require.NoError(t, err)
	require.Equal(t, total, last, "progress ends at the files' size")
	require.Equal(t, 4, sum.Threads)
	require.Zero(t, sum.AlreadyImported)
	require.Positive(t, sum.Events)
	require.Equal(t, 1, sum.Failed)
	require.Equal(t, map[string]int{"unreadable line": 1}, sum.Rejections)

	again, err := importer.Conversations(ctx, cl, []string{file}, opts, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 4, again.AlreadyImported, "a second import stores nothing twice")

	rep, err := importer.Verify(ctx, cl, "acme", []string{src}, nil)
	require.NoError(t, err)
	require.Equal(t, importer.Report{Threads: 4, Identical: 4}, rep)
	rep, err = importer.Verify(ctx, cl, "other", []string{src}, nil)
	require.NoError(t, err)
	require.Equal(t, 4, rep.Threads)
	require.Len(t, rep.Differing, 4, "another tenant has none of the threads")
}

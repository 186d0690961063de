package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/provision"
)

// TestCompactionOfOldMessagesIsCheckedOnTheWholeHistory: the client keeps
// only the newest messages of a thread to check appends; a compaction that
// cuts before them is checked on the whole history, accepted when valid and
// rejected when it would separate a tool call from its result.
func TestCompactionOfOldMessagesIsCheckedOnTheWholeHistory(t *testing.T) {
	env := newAppendEnv(t, provision.Config{})
	ctx := context.Background()
	tenant := events.DefaultTenant
	thread, v := env.createThread(t, client.CreateOptions{})
	var seqs []uint64 // of each message
	add := func(evs ...events.Event) {
		res, err := env.c.Append(ctx, tenant, thread, evs, client.ExpectVersion(v))
		require.NoError(t, err)
		for _, e := range res.Events {
			seqs = append(seqs, e.Seq)
		}
		v = res.Version
	}
	add(userEvent("first question"))
	add(toolTurn("call_early")...) // messages 1 (call) and 2 (result)
	for i := range 20 {
		add(userEvent(fmt.Sprintf("question %d", i)))
	}

	compact := func(upTo uint64) error {
		_, err := env.c.Append(ctx, tenant, thread, []events.Event{{Payload: events.Compaction{
			UpToSeq: upTo, Summary: events.Text("summary")}}}, client.ExpectVersion(v))
		return err
	}
	err := compact(seqs[1])
	var rej *fold.RejectionError
	require.ErrorAs(t, err, &rej, "cutting between the early call and its result")
	require.Equal(t, fold.CodeInvalidHistory, rej.Code)

	require.NoError(t, compact(seqs[5]))
	th, err := env.c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Zero(t, th.RejectedCount)
	require.Equal(t, len(seqs)-6+1, th.MessageCount(), "the summary and the messages after the cut")
}

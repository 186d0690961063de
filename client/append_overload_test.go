package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// TestAnAtomicAppendRefusedForLoadIsOverloaded: every atomic batch slot
// of the stream is held open, so the server refuses each attempt of a
// two-event append with 10210 (too many atomic batches in flight). Once
// the retries are spent, the error is ErrOverloaded (retryable), names
// the server's refusal, and nothing was stored; a one-event append, which
// is no batch, is stored meanwhile.
func TestAnAtomicAppendRefusedForLoadIsOverloaded(t *testing.T) {
	env := newAppendEnv(t, provision.Config{}, func(c *client.Config) {
		c.MaxRetries, c.RetryBackoff = 2, time.Millisecond
	})
	ctx := context.Background()
	tenant := events.DefaultTenant
	thread, v := env.createThread(t, client.CreateOptions{})
	require.Positive(t, natstest.FillAtomicBatches(t, env.nc, env.subject(t, tenant, "holder")))

	_, err := env.c.Append(ctx, tenant, thread, []events.Event{userEvent("one"), userEvent("two")}, client.ExpectVersion(v))
	require.ErrorIs(t, err, client.ErrOverloaded)
	require.ErrorContains(t, err, "atomic publish too many inflight")
	require.Equal(t, uint64(1), env.count(t, tenant, thread), "nothing of the turn is stored")

	res, err := env.c.Append(ctx, tenant, thread, []events.Event{userEvent("alone")}, client.ExpectVersion(v))
	require.NoError(t, err)
	require.Greater(t, res.Version, v)
}

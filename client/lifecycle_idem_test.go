package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

// Delete, Undelete and Fork are idempotent in the client (before, only the
// HTTP handlers were): a repeated delete or undelete writes nothing and
// returns the version; a fork repeated with the same new id returns that
// fork; another thread under the id is ErrThreadExists.
func TestLifecycleCallsAreIdempotent(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	tenant := events.DefaultTenant
	th, _ := clienttest.Thread(t, c, clienttest.RepliesOff(events.DefaultTenant, ""), 1)

	v1, err := c.Delete(ctx, tenant, th, "first")
	require.NoError(t, err)
	v2, err := c.Delete(ctx, tenant, th, "again")
	require.NoError(t, err, "deleting a deleted thread")
	require.Equal(t, v1, v2, "nothing written")
	u1, err := c.Undelete(ctx, tenant, th, "")
	require.NoError(t, err)
	u2, err := c.Undelete(ctx, tenant, th, "")
	require.NoError(t, err, "undeleting a live thread")
	require.Equal(t, u1, u2)

	_, f1, fv1, err := c.Fork(ctx, tenant, th, client.ForkOptions{ThreadID: "fork-1"})
	require.NoError(t, err)
	_, f2, fv2, err := c.Fork(ctx, tenant, th, client.ForkOptions{ThreadID: "fork-1"})
	require.NoError(t, err, "a retried fork")
	require.Equal(t, f1, f2)
	require.Equal(t, fv1, fv2)
	_, _, _, err = c.Fork(ctx, tenant, th, client.ForkOptions{ThreadID: th})
	require.ErrorIs(t, err, client.ErrThreadExists, "forking onto an unrelated thread")
}

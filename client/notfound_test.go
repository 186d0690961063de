package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

// Why a thread is not found is a sentinel, not prose: an erased thread is
// ErrThreadErased, a soft-deleted one ErrThreadDeleted, both
// ErrThreadNotFound; an id with no events is only ErrThreadNotFound.
func TestNotFoundSaysWhyBySentinel(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	create := func() string {
		th, _ := clienttest.Thread(t, c, clienttest.RepliesOff(events.DefaultTenant, ""), 0)
		return th
	}
	erased, deleted := create(), create()
	_, err := c.Erase(ctx, events.DefaultTenant, erased, "test")
	require.NoError(t, err)
	_, err = c.Delete(ctx, events.DefaultTenant, deleted, "test")
	require.NoError(t, err)

	_, err = c.Get(ctx, events.DefaultTenant, erased, client.Consistent())
	require.ErrorIs(t, err, client.ErrThreadNotFound)
	require.ErrorIs(t, err, client.ErrThreadErased)
	require.NotErrorIs(t, err, client.ErrThreadDeleted)

	_, err = c.Get(ctx, events.DefaultTenant, deleted, client.Consistent())
	require.ErrorIs(t, err, client.ErrThreadNotFound)
	require.ErrorIs(t, err, client.ErrThreadDeleted)
	require.NotErrorIs(t, err, client.ErrThreadErased)

	_, err = c.Get(ctx, events.DefaultTenant, "never-written", client.Consistent())
	require.ErrorIs(t, err, client.ErrThreadNotFound)
	require.NotErrorIs(t, err, client.ErrThreadErased)
	require.NotErrorIs(t, err, client.ErrThreadDeleted)

	_, err = c.Erase(ctx, events.DefaultTenant, erased, "again")
	require.ErrorIs(t, err, client.ErrThreadErased)
}

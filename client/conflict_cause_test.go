package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

// A conflict the server answered keeps the server's answer as its cause
// (errors.As finds the *jetstream.APIError), and is still ErrConflict.
func TestAServerConflictKeepsTheServersError(t *testing.T) {
	srv := clienttest.New(t)
	a := srv.Client
	b, err := client.New(context.Background(), srv.NC, client.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	thread, v := clienttest.Thread(t, a, clienttest.RepliesOff(events.DefaultTenant, ""), 0)
	_, err = b.Append(ctx, events.DefaultTenant, thread, []events.Event{clienttest.User("from b")}, client.AnyVersion())
	require.NoError(t, err)
	// a's state of the thread is its own write at v: it publishes with v
	// and the server refuses.
	_, err = a.Append(ctx, events.DefaultTenant, thread, []events.Event{clienttest.User("from a")}, client.ExpectVersion(v))
	require.ErrorIs(t, err, client.ErrConflict)
	var conflict *client.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.NotNil(t, conflict.Cause, "the conflict came from the server, and says so")
	var apiErr *jetstream.APIError
	require.True(t, errors.As(err, &apiErr), "the cause is the server's API error")
	require.Equal(t, jetstream.ErrorCode(10071), apiErr.ErrorCode)
}

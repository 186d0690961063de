package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// Finding 7 of the reliability issue: an event id reused with a different
// event is refused with ErrIdempotencyMismatch naming what differs, by
// every duplicate path (the server's duplicate window with AnyVersion, the
// read-forward of an ExpectVersion retry, another thread), and nothing is
// stored; an exact retry is still a duplicate that echoes the stored
// event. Before, a state.set sent with the id of a stored message.user was
// answered as a duplicate echoing the new type.
func TestReusingAnEventIDWithAnotherEventIsRefused(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	_, thread, v0, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
	require.NoError(t, err)
	_, other, _, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
	require.NoError(t, err)
	id := events.NewID()
	first, err := c.Append(ctx, "acme", thread, []events.Event{{ID: id, Payload: events.UserMessage{Content: events.Text("hello")}}}, client.ExpectVersion(v0))
	require.NoError(t, err)

	cases := []struct {
		name   string
		thread string
		ev     events.Payload
		opt    client.AppendOption
		field  string
	}{
		{"another type, any version", thread, events.StateSet{Key: "k", Value: []byte(`1`)}, client.AnyVersion(), "type"},
		{"another type, the version of the first attempt", thread, events.StateSet{Key: "k", Value: []byte(`1`)}, client.ExpectVersion(v0), "type"},
		{"another payload, any version", thread, events.UserMessage{Content: events.Text("HELLO")}, client.AnyVersion(), "payload"},
		{"another payload, the version of the first attempt", thread, events.UserMessage{Content: events.Text("HELLO")}, client.ExpectVersion(v0), "payload"},
		{"another thread", other, events.UserMessage{Content: events.Text("hello")}, client.AnyVersion(), "thread"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Append(ctx, "acme", tc.thread, []events.Event{{ID: id, Payload: tc.ev}}, tc.opt)
			require.ErrorIs(t, err, client.ErrIdempotencyMismatch)
			var mm *client.IdempotencyMismatchError
			require.ErrorAs(t, err, &mm)
			require.Equal(t, tc.field, mm.Field)
			require.Equal(t, id, mm.EventID)
			require.Equal(t, first.Version, mm.Seq)
			require.Contains(t, err.Error(), id)
		})
	}

	again, err := c.Append(ctx, "acme", thread, []events.Event{{ID: id, Payload: events.UserMessage{Content: events.Text("hello")}}}, client.AnyVersion())
	require.NoError(t, err, "an exact retry is a duplicate")
	require.True(t, again.Duplicate)
	require.Equal(t, first.Version, again.Version)
	require.Equal(t, events.TypeUserMessage, again.Events[0].Type)

	th, err := c.Get(ctx, "acme", thread, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, first.Version, th.Version, "nothing was stored")
	require.Empty(t, th.KV)
	require.Len(t, th.Messages, 1)
}

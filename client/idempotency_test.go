package client_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

// An event id reused with a different event (another type, payload or
// thread) is refused with ErrIdempotencyMismatch naming the field that
// differs, by every duplicate path (the server's duplicate window with
// AnyVersion, the read-forward of an ExpectVersion retry, another thread),
// and nothing is stored; an exact retry is a duplicate that echoes the
// stored event.
func TestReusingAnEventIDWithAnotherEventIsRefused(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	thread, v0 := clienttest.Thread(t, c, clienttest.RepliesOff("acme", ""), 0)
	other, _ := clienttest.Thread(t, c, clienttest.RepliesOff("acme", ""), 0)
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

// Event ids stored by one append and sent again in an append of another
// number of events (or of the same events in another order) are another
// append: every duplicate path (the server's 10201 for a batch and its
// duplicate ack for one event, the read forward from the version of the
// first append, the search from the id's time) answers
// ErrIdempotencyMismatch at once, with Field "events" naming the first id
// the other append stored and how, and nothing is stored. The ids are
// derived ones (UUIDv5, as the HTTP API derives them from an
// Idempotency-Key) or the client's UUIDv7s.
func TestReusingEventIDsInAnAppendOfOtherEventsIsRefused(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	msg := func(id, text string) events.Event {
		return events.Event{ID: id, Payload: events.UserMessage{Content: events.Text(text)}}
	}
	newThread := func(t *testing.T) (string, uint64) {
		thread, v := clienttest.Thread(t, c, clienttest.RepliesOff("acme", ""), 0)
		return thread, v
	}
	type version int
	const (
		anyVersion version = iota // client.AnyVersion
		current                   // the thread's version after the first append
		first                     // the version the first append was made at
	)
	cases := []struct {
		name   string
		stored []string // ids of the first append's events, in order
		sent   []string // ids of the second append's events
		at     version
		index  int    // the first of sent's ids stored by the other append
		how    string // how it was stored
	}{
		{"one event stored, two sent, any version", []string{"a"}, []string{"a", "b"}, anyVersion, 0, "alone"},
		{"one event stored, two sent, at the current version", []string{"a"}, []string{"a", "b"}, current, 0, "alone"},
		{"one event stored, two sent, at the first append's version", []string{"a"}, []string{"a", "b"}, first, 0, "alone"},
		{"one event stored, two sent with it second", []string{"a"}, []string{"b", "a"}, anyVersion, 1, "alone"},
		{"two events stored, one sent, any version", []string{"a", "b"}, []string{"a"}, anyVersion, 0, "as event 1 of an atomic append"},
		{"two events stored, one sent, at the first append's version", []string{"a", "b"}, []string{"a"}, first, 0, "as event 1 of an atomic append"},
		{"two events stored, the second sent alone", []string{"a", "b"}, []string{"b"}, anyVersion, 0, "as the last event of an atomic append of 2"},
		{"two events stored, three sent", []string{"a", "b"}, []string{"a", "b", "c"}, anyVersion, 0, "as event 1 of an atomic append"},
		{"two events stored, three sent at the first append's version", []string{"a", "b"}, []string{"a", "b", "c"}, first, 0, "as event 1 of an atomic append"},
		{"two events stored, sent in the other order", []string{"a", "b"}, []string{"b", "a"}, anyVersion, 0, "as the last event of an atomic append of 2"},
	}
	for _, tc := range cases {
		for _, kind := range []string{"derived ids", "UUIDv7 ids"} {
			t.Run(tc.name+", "+kind, func(t *testing.T) {
				ids := map[string]string{}
				for _, k := range []string{"a", "b", "c"} {
					ids[k] = uuid.NewSHA1(uuid.NameSpaceURL, []byte(t.Name()+"/"+k)).String()
					if kind == "UUIDv7 ids" {
						ids[k] = events.NewID()
					}
				}
				thread, v0 := newThread(t)
				var stored []events.Event
				for _, k := range tc.stored {
					stored = append(stored, msg(ids[k], "text "+k))
				}
				res, err := c.Append(ctx, "acme", thread, stored, client.ExpectVersion(v0))
				require.NoError(t, err)
				var sent []events.Event
				for _, k := range tc.sent {
					sent = append(sent, msg(ids[k], "text "+k))
				}
				opt := client.AnyVersion()
				switch tc.at {
				case current:
					opt = client.ExpectVersion(res.Version)
				case first:
					opt = client.ExpectVersion(v0)
				}

				_, err = c.Append(ctx, "acme", thread, sent, opt)
				require.ErrorIs(t, err, client.ErrIdempotencyMismatch)
				var mm *client.IdempotencyMismatchError
				require.ErrorAs(t, err, &mm)
				require.Equal(t, "events", mm.Field)
				require.Equal(t, tc.index, mm.Index)
				require.Equal(t, ids[tc.sent[tc.index]], mm.EventID)
				require.Equal(t, tc.how, mm.Stored)
				require.Equal(t, strconv.Itoa(len(tc.sent)), mm.Sent)
				storedAt := map[string]uint64{}
				for _, st := range res.Events {
					storedAt[st.ID] = st.Seq
				}
				require.Equal(t, storedAt[mm.EventID], mm.Seq)
				require.Contains(t, err.Error(), mm.EventID)

				th, err := c.Get(ctx, "acme", thread, client.Consistent())
				require.NoError(t, err)
				require.Equal(t, res.Version, th.Version, "nothing was stored")
			})
		}
	}
}

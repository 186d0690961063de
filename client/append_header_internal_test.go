package client

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/eventfixtures"
)

// The pooled header of a one-event append carries the event's headers,
// takes the OCC headers in place, and is given back clean; a header whose
// map was changed otherwise is not reused.
func TestSingleEventHeaderIsPooledAndGivenBackClean(t *testing.T) {
	e := eventfixtures.Event(1, "p", events.UserMessage{Content: events.Text("hi")})
	p := &prepared{}
	h := p.eventHeader(e, true)
	require.Equal(t, string(events.TypeUserMessage), h.Get(events.HeaderType))
	require.Equal(t, "1", h.Get(events.HeaderSchema))
	require.Equal(t, e.ID, h.Get(events.HeaderMsgID))
	require.Equal(t, []string{""}, h[jetstream.ExpectedLastSubjSeqHeader])
	setHeader(h, jetstream.ExpectedLastSubjSeqHeader, "41")
	setHeader(h, jetstream.ExpectedStreamHeader, "S")
	require.Equal(t, "41", h.Get(jetstream.ExpectedLastSubjSeqHeader))
	require.Equal(t, "S", h.Get(jetstream.ExpectedStreamHeader))
	require.Len(t, h, 5)

	sh := p.header
	require.NotNil(t, sh)
	require.True(t, sh.intact())
	p.release()
	require.Nil(t, p.header)
	require.Equal(t, [5]string{}, sh.v, "no id or sequence is kept in the pool")
	require.True(t, sh.intact())

	sh.h.Set(events.HeaderMsgID, "other") // a new slice: no longer sh.v's
	require.False(t, sh.intact())

	// An append of several events, or of an older schema, gets a header of its own.
	q := &prepared{}
	h = q.eventHeader(e, false)
	require.Nil(t, q.header)
	require.Equal(t, e.ID, h.Get(events.HeaderMsgID))
	require.Len(t, h, 3)
}

package threadkey

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// SealLocated, given the payload member from the encoding, stores the
// bytes SealEvent stores (the same random bytes drawn), for an event of
// each format and one never sealed; a member that does not fit the bytes
// is refused, nothing sealed.
func TestSealLocatedStoresWhatSealEventStores(t *testing.T) {
	s := natstest.RunConfig(t, embedded.Config{StoreDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := provision.Ensure(ctx, s.JS, provision.Config{})
	require.NoError(t, err)
	k, err := New(ctx, s.JS, r.Keys, 0)
	require.NoError(t, err)

	saved := randRead
	t.Cleanup(func() { randRead = saved })
	seal := func(f func(data []byte, pm events.PayloadMember) ([]byte, error), data []byte, pm events.PayloadMember) []byte {
		var c counter
		randRead = c.Read
		out, err := f(data, pm)
		randRead = saved
		require.NoError(t, err)
		return out
	}
	byEvent := func(data []byte, _ events.PayloadMember) ([]byte, error) { return k.SealEvent(ctx, data) }
	byLocated := func(data []byte, pm events.PayloadMember) ([]byte, error) { return k.SealLocated(ctx, data, pm) }

	// The thread's key is created first: its record takes random bytes too.
	_, err = k.SealValue(ctx, "acme", "t1", "warm", []byte("x"))
	require.NoError(t, err)
	evs := []events.Event{
		events.New("acme", "t1", "p", events.UserMessage{Content: events.Text("a secret")}),
		events.New("acme", "t1", "p", events.ToolResult{ToolCallID: "c1", Content: events.Text("out")}),
		events.New("acme", "t1", "p", events.Erased{Reason: "gdpr"}),
	}
	notUUID := events.New("acme", "t1", "p", events.UserMessage{Content: events.Text("format 1")})
	notUUID.ID = "not-a-uuid"
	evs = append(evs, notUUID)
	for _, ev := range evs {
		clear, pm, err := events.MarshalAppendLocated([]byte("before"), ev)
		require.NoError(t, err)
		clear = clear[len("before"):]
		pm.Start -= len("before")
		pm.End -= len("before")
		want := seal(byEvent, clear, pm)
		got := seal(byLocated, clear, pm)
		require.Equal(t, want, got, "%s %s", ev.Type, ev.ID)
		if Sealable(ev.Type) {
			require.NotEqual(t, clear, got)
		}
	}

	clear, pm, err := events.MarshalAppendLocated(nil, evs[0])
	require.NoError(t, err)
	moved := pm
	moved.Start++
	shortened := pm
	shortened.Value = shortened.Value[:len(shortened.Value)-1]
	elsewhere := pm
	elsewhere.Value = append([]byte(nil), pm.Value...)
	outside := pm
	outside.End = len(clear) + 1
	for name, bad := range map[string]events.PayloadMember{"moved": moved, "shortened": shortened, "a copy": elsewhere, "outside": outside} {
		out, err := k.SealLocated(ctx, clear, bad)
		require.ErrorIs(t, err, events.ErrDecode, name)
		require.Nil(t, out, name)
	}
}

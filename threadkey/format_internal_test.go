package threadkey

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// sealed returns a clear event of tenant acme, thread t, with id and
// text, and it sealed with tk by seal.
func sealed(t *testing.T, tk *threadKey, id, text string, seal func(*threadKey, []byte, events.PayloadMember) ([]byte, error)) (clear, box []byte, pm events.PayloadMember) {
	t.Helper()
	ev := events.New("acme", "t", "test", events.UserMessage{Content: events.Text(text)})
	if id != "" {
		ev.ID = id
	}
	clear, err := events.Marshal(ev)
	require.NoError(t, err)
	cpm, err := events.LocatePayload(clear)
	require.NoError(t, err)
	box, err = seal(tk, clear, cpm)
	require.NoError(t, err)
	pm, err = events.LocatePayload(box)
	require.NoError(t, err)
	require.True(t, pm.Sealed)
	return clear, box, pm
}

func TestWritersSealFormat2AndFormat1StillOpens(t *testing.T) {
	tk, err := newKey()
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		id     string
		text   string
		seal   func(*threadKey, []byte, events.PayloadMember) ([]byte, error)
		format byte
	}{
		{"a writer seals format 2", "", "hello", sealEvent, formatV2},
		{"a payload over 255 bytes gets a bin16", "", strings.Repeat("x", 300), sealEvent, formatV2},
		{"a payload over 64 KiB gets a bin32", "", strings.Repeat("x", 70000), sealEvent, formatV2},
		{"format 1 opens", "", "hello", sealEventV1, formatV1},
		{"an id that is not a canonical UUID is sealed in format 1", "01972B6E-8A40-7C1D-8E2F-3A4B5C6D7E01", "hello", sealEvent, formatV1},
	} {
		t.Run(c.name, func(t *testing.T) {
			clear, box, pm := sealed(t, tk, c.id, c.text, c.seal)
			require.Equal(t, c.format, pm.Value[0])
			require.Equal(t, events.ReplacePayload(clear, mustLocate(t, clear), pm.Value, true), box, "the encoding events.ReplacePayload writes")
			_, ok := wellFormed(pm)
			require.True(t, ok)
			got, err := openEvent(tk, box, pm)
			require.NoError(t, err)
			require.Equal(t, clear, got)
			u, _ := uuidBytes(pm.Envelope.ID)
			got, err = openEventID(tk, bytes.Clone(box), mustLocate(t, box), u, true)
			require.NoError(t, err)
			require.Equal(t, clear, got, "in place")
		})
	}
}

// After a rotation the table holds each event's own key, of its format:
// it opens that event and no other, and the thread key is not needed.
func TestEachEventOpensWithItsOwnKeyOfEitherFormat(t *testing.T) {
	old, err := newKey()
	require.NoError(t, err)
	clear1, box1, pm1 := sealed(t, old, "", "format one", sealEventV1)
	clear2, box2, pm2 := sealed(t, old, "", "format two", sealEvent)
	_, box3, pm3 := sealed(t, old, "", "redacted", sealEvent)
	_, box4, pm4 := sealed(t, old, "", "not kept", sealEvent)
	rep := []byte{0x81, 0xa7, 'c', 'o', 'n', 't', 'e', 'n', 't', 0xa0}

	cur, err := newKey()
	require.NoError(t, err)
	cur.table = map[string]tableEntry{
		pm1.Envelope.ID: {key: sealedKey(old, pm1)},
		pm2.Envelope.ID: {key: sealedKey(old, pm2)},
		pm3.Envelope.ID: {replacement: rep},
	}
	got, err := openEvent(cur, box1, pm1)
	require.NoError(t, err)
	require.Equal(t, clear1, got)
	got, err = openEvent(cur, box2, pm2)
	require.NoError(t, err)
	require.Equal(t, clear2, got)
	for _, c := range []struct {
		clear, box []byte
	}{{clear1, box1}, {clear2, box2}} {
		box := bytes.Clone(c.box)
		pm := mustLocate(t, box)
		u, _ := uuidBytes(pm.Envelope.ID)
		got, err = openEventID(cur, box, pm, u, true)
		require.NoError(t, err)
		require.Equal(t, c.clear, got, "in place, with the table's key")
	}
	got, err = openEvent(cur, box3, pm3)
	require.NoError(t, err)
	rpm, err := events.LocatePayload(got)
	require.NoError(t, err)
	require.Equal(t, rep, rpm.Value, "a redacted event reads as its replacement")
	_, err = openEvent(cur, box4, pm4)
	require.ErrorIs(t, err, ErrOtherKey, "an event the table does not keep stays closed")

	cur.table[pm4.Envelope.ID] = tableEntry{key: sealedKey(old, pm2)}
	_, err = openEvent(cur, box4, pm4)
	require.ErrorIs(t, err, ErrCorrupt, "one event's key opens no other")
	require.NotEqual(t, sealedKey(old, pm2), sealedKey(old, pm4))
}

func mustLocate(t *testing.T, b []byte) events.PayloadMember {
	t.Helper()
	pm, err := events.LocatePayload(b)
	require.NoError(t, err)
	return pm
}

// Format 2 takes the event id's 16 bytes from its canonical form only, so
// that no two ids share a key.
func TestOnlyCanonicalUUIDsGiveFormat2Bytes(t *testing.T) {
	for range 100 {
		id := events.NewID()
		u, ok := uuidBytes(id)
		require.True(t, ok, id)
		require.Equal(t, [16]byte(uuid.MustParse(id)), u)
	}
	for _, id := range []string{
		"01972B6E-8A40-7C1D-8E2F-3A4B5C6D7E01",
		"01972b6e8a40-7c1d-8e2f-3a4b5c6d7e01-",
		"01972b6e-8a40-7c1d-8e2f-3a4b5c6d7e0g",
		"{01972b6e-8a40-7c1d-8e2f-3a4b5c6d7e0}",
		"01972b6e-8a40-7c1d-8e2f-3a4b5c6d7e0",
		"",
	} {
		_, ok := uuidBytes(id)
		require.False(t, ok, id)
	}
}

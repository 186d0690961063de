package events_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// LocatePayload reads only the envelope, without Unmarshal's whole-value
// check: it must still never panic, whatever the bytes (every prefix of
// an event, every byte of it altered), and splicing a member back gives
// the bytes it was taken from.
func TestLocatePayloadOnAnyBytes(t *testing.T) {
	for _, ev := range sampleEvents() {
		b, err := events.Marshal(ev)
		require.NoError(t, err)
		pm, err := events.LocatePayload(b)
		require.NoError(t, err)
		require.False(t, pm.Sealed)
		require.Equal(t, ev.ID, pm.Envelope.ID)
		sealed := events.ReplacePayload(b, pm, []byte("ciphertext"), true)
		spm, err := events.LocatePayload(sealed)
		require.NoError(t, err)
		require.True(t, spm.Sealed)
		require.Equal(t, "ciphertext", string(spm.Value))
		require.Equal(t, b, events.ReplacePayload(sealed, spm, pm.Value, false), "the round trip gives the same bytes")
		_, err = events.Unmarshal(sealed)
		require.ErrorIs(t, err, events.ErrSealed)

		for i := range sealed {
			_, _ = events.LocatePayload(sealed[:i])
			for _, x := range []byte{0x00, 0xff, 0xc6, 0xdf} {
				c := bytes.Clone(sealed)
				c[i] = x
				require.NotPanics(t, func() { _, _ = events.LocatePayload(c) })
			}
		}
	}
	_, err := events.LocatePayload([]byte{0x91, 0x01})
	require.ErrorIs(t, err, events.ErrDecode, "not a map")
}

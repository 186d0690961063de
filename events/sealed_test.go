package events_test

import (
	"bytes"
	"maps"
	"slices"
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

// MarshalAppendLocated reports the payload member LocatePayload finds in
// the bytes it appended (offsets into the whole result), for every event
// type, rich and minimal, after an empty and a non-empty dst, and appends
// MarshalAppend's bytes.
func TestMarshalAppendLocatedReportsThePayloadLocatePayloadFinds(t *testing.T) {
	evs := slices.Collect(maps.Values(sampleEvents()))
	evs = append(evs, slices.Collect(maps.Values(minimalEvents()))...)
	for _, ev := range evs {
		for _, prefix := range [][]byte{nil, []byte("some bytes before")} {
			want, err := events.MarshalAppend(bytes.Clone(prefix), ev)
			require.NoError(t, err)
			got, pm, err := events.MarshalAppendLocated(bytes.Clone(prefix), ev)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s: the same bytes as MarshalAppend", ev.Type)

			loc, err := events.LocatePayloadNoCopy(got[len(prefix):])
			require.NoError(t, err)
			loc.Start += len(prefix)
			loc.End += len(prefix)
			require.Equal(t, loc, pm, "%s after %d bytes", ev.Type, len(prefix))
			require.Same(t, &got[pm.End-1], &pm.Value[len(pm.Value)-1], "Value aliases the result")
		}
	}
	_, pm, err := events.MarshalAppendLocated([]byte("kept"), events.Event{ID: "x"})
	require.Error(t, err, "a nil payload")
	require.Zero(t, pm)
}

package directget

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireSameAsTimeParse checks parseTimestamp against time.Parse.
func requireSameAsTimeParse(t *testing.T, s string) {
	t.Helper()
	want, werr := time.Parse(time.RFC3339Nano, s)
	got, gerr := parseTimestamp(s)
	require.Equal(t, werr == nil, gerr == nil, "%q: time.Parse error %v, parseTimestamp error %v", s, werr, gerr)
	if werr != nil {
		require.Equal(t, werr.Error(), gerr.Error(), s)
		return
	}
	require.Equal(t, want, got, s)
	require.True(t, want.Equal(got), s)
	require.Equal(t, want.Location(), got.Location(), s)
}

// parseTimestamp reads the server's timestamps exactly as time.Parse
// does, and leaves every other form to time.Parse.
func TestParseTimestampAgreesWithTimeParse(t *testing.T) {
	for _, s := range []string{
		"2025-03-14T15:09:26.535897932Z", "2025-03-14T15:09:26Z", "2025-03-14T15:09:26.5Z", "2025-03-14T15:09:26.000000001Z",
		"2025-03-14T15:09:26.100Z", "2024-02-29T23:59:59.999999999Z", "2023-02-29T00:00:00Z", "2000-02-29T00:00:00Z",
		"1900-02-29T00:00:00Z", "2025-04-31T00:00:00Z", "2025-12-31T23:59:60Z", "2025-13-01T00:00:00Z", "2025-00-01T00:00:00Z",
		"2025-01-00T00:00:00Z", "2025-01-01T24:00:00Z", "2025-01-01T00:60:00Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
		"2025-03-14T15:09:26.Z", "2025-03-14T15:09:26.1234567891Z", "2025-03-14T15:09:26,5Z", "2025-03-14T15:09:26+01:00",
		"2025-03-14T15:09:26.5+01:00", "2025-03-14t15:09:26Z", "2025-03-14T15:09:26z", "+025-03-14T15:09:26Z", "2025-3-14T15:09:26Z",
		"2025-03-14T15:09:2aZ", "", "Z", "garbage-that-is-long-enough-Z", "2025-03-14T15:09:26.-5Z", "2025-03-14 15:09:26Z",
	} {
		requireSameAsTimeParse(t, s)
	}
	now := time.Now().UTC()
	for i := range 1000 {
		tm := now.Add(time.Duration(i) * 7919 * time.Microsecond)
		requireSameAsTimeParse(t, tm.Format(time.RFC3339Nano))
	}
}

func FuzzParseTimestamp(f *testing.F) {
	f.Add("2025-03-14T15:09:26.535897932Z")
	f.Add("2025-03-14T15:09:26Z")
	f.Add("2024-02-29T23:59:59.5Z")
	f.Fuzz(requireSameAsTimeParse)
}

package events_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/transcripts"
)

// fuzzSeedConversations is how many conversations of each transcript file
// seed FuzzUnmarshal.
const fuzzSeedConversations = 3

// unmarshalSeeds returns encodings of one rich and one minimal event of
// every type, the golden vectors of schemas/, the events of the first
// conversations of each transcript file, and some garbage.
func unmarshalSeeds(t testing.TB) [][]byte {
	t.Helper()
	var seeds [][]byte
	add := func(e events.Event) {
		b, err := events.Marshal(e)
		require.NoError(t, err)
		seeds = append(seeds, b)
	}
	for _, set := range []map[events.Type]events.Event{sampleEvents(), minimalEvents()} {
		for _, typ := range events.AllTypes {
			add(set[typ])
		}
	}

	// The golden vectors of schemas/ (one or more per event type).
	golden, err := filepath.Glob(filepath.Join("..", "schemas", "testdata", "golden", "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(golden), len(events.AllTypes), "golden vectors in ../schemas/testdata/golden")
	for _, path := range golden {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var v struct {
			MsgpackHex string `json:"msgpack_hex"`
		}
		require.NoError(t, json.Unmarshal(raw, &v), path)
		b, err := hex.DecodeString(v.MsgpackHex)
		require.NoError(t, err, path)
		require.NotEmpty(t, b, path)
		seeds = append(seeds, b)
	}

	set := transcripts.Load(t)
	base := time.Date(2025, 1, 1, 0, 0, 0, 123456789, time.UTC)
	for _, file := range transcripts.Files {
		convs := loadConversations(t, set.Path(file))
		require.GreaterOrEqual(t, len(convs), fuzzSeedConversations)
		for _, c := range convs[:fuzzSeedConversations] {
			evs, err := transcripts.Events(c, "import", transcripts.ThreadID(c), "fuzz", base)
			require.NoError(t, err)
			for _, e := range evs {
				add(e)
			}
		}
	}

	seeds = append(seeds,
		nil,
		[]byte{0xc0},
		[]byte{0x80},
		[]byte{0x90},
		[]byte{0xc1},
		[]byte("\x81\xa4type\xadmessage.user"),
		[]byte("{\"id\":\"not msgpack at all\"}"),
		[]byte{0xdf, 0xff, 0xff, 0xff, 0xff},
		[]byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0},
		[]byte{0x82, 0xa4, 't', 'y', 'p', 'e', 0xaf, 't', 'h', 'r', 'e', 'a', 'd', '.', 'r', 'e', 's', 't', 'o', 'r', 'e', 'd', 0xa7, 'p', 'a', 'y', 'l', 'o', 'a', 'd', 0x81, 0xa8, 'm', 'e', 's', 's', 'a', 'g', 'e', 's', 0x91, 0x80},
	)
	return seeds
}

// FuzzUnmarshal checks that Unmarshal never panics on any input, that its
// errors are the documented ones, and that a decoded event is canonical:
// it re-encodes to bytes that decode to an equal event and re-encode to the
// same bytes.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range unmarshalSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := events.Unmarshal(b)
		if err != nil {
			require.True(t, errors.Is(err, events.ErrDecode) || errors.Is(err, events.ErrUnknownType) || errors.Is(err, events.ErrNewerSchema),
				"undocumented error: %v", err)
			require.Nil(t, e.Payload)
			return
		}
		require.NotNil(t, e.Payload)
		require.Equal(t, e.Type, e.Payload.EventType())
		require.Equal(t, time.UTC, e.Time.Location())
		_ = e.Validate() // must not panic on anything that decodes

		b2, err := events.Marshal(e)
		require.NoError(t, err)
		e2, err := events.Unmarshal(b2)
		require.NoError(t, err)
		require.Equal(t, e, e2)
		b3, err := events.Marshal(e2)
		require.NoError(t, err)
		require.Equal(t, b2, b3)

		// A valid event must also survive the JSON form, which non-Go
		// producers and the schemas use.
		if e.Validate() == nil {
			j, err := e.MarshalJSON()
			require.NoError(t, err, "a valid event must have a JSON form")
			var ej events.Event
			require.NoError(t, ej.UnmarshalJSON(j), string(j))
			require.Equal(t, e, ej, string(j))
		}
	})
}

// TestUnmarshalSeedsDecode makes sure the fuzz seeds are what they claim:
// every encoded event among them decodes.
func TestUnmarshalSeedsDecode(t *testing.T) {
	seeds := unmarshalSeeds(t)
	decoded := 0
	for _, s := range seeds {
		if _, err := events.Unmarshal(s); err == nil {
			decoded++
		}
	}
	require.Greater(t, decoded, 3*len(events.AllTypes)+fuzzSeedConversations*len(transcripts.Files), "events of every type, the golden vectors and the transcripts decode")
	require.Less(t, decoded, len(seeds), "the garbage seeds do not decode")
}

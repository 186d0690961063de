package schemas

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
)

// These tests pin the msgpack facts README.md tells non-Go producers.

// msgpackKeys returns the keys of the msgpack map b in order.
func msgpackKeys(t *testing.T, b []byte) []string {
	t.Helper()
	keys, _ := msgpackMap(t, b)
	return keys
}

// msgpackMap returns the keys of the msgpack map b in order and the raw
// encoding of each value.
func msgpackMap(t *testing.T, b []byte) ([]string, map[string][]byte) {
	t.Helper()
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	n, err := dec.DecodeMapLen()
	require.NoError(t, err)
	var keys []string
	vals := map[string][]byte{}
	for range n {
		k, err := dec.DecodeString()
		require.NoError(t, err)
		raw, err := dec.DecodeRaw()
		require.NoError(t, err)
		keys = append(keys, k)
		vals[k] = raw
	}
	return keys, vals
}

// specTimestamp encodes tm as the msgpack specification's timestamp
// extension (type -1) in its smallest form, written here from the
// specification rather than by the library under test.
func specTimestamp(tm time.Time) []byte {
	sec, nsec := tm.Unix(), uint64(tm.Nanosecond())
	switch {
	case sec >= 0 && sec>>34 == 0 && nsec == 0 && sec>>32 == 0: // timestamp 32
		b := []byte{0xd6, 0xff, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[2:], uint32(sec))
		return b
	case sec >= 0 && sec>>34 == 0: // timestamp 64
		b := []byte{0xd7, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(b[2:], nsec<<34|uint64(sec))
		return b
	default: // timestamp 96
		b := []byte{0xc7, 12, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[3:], uint32(nsec))
		binary.BigEndian.PutUint64(b[7:], uint64(sec))
		return b
	}
}

func TestTimeIsTheSmallestMsgpackTimestamp(t *testing.T) {
	cases := []struct {
		name   string
		time   time.Time
		header string
	}{
		{"a whole second is a 4-byte timestamp (fixext 4)", time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC), "d6ff"},
		{"a time with nanoseconds is an 8-byte timestamp (fixext 8)", time.Date(2025, 6, 1, 12, 0, 1, 123456789, time.UTC), "d7ff"},
		{"a time in another zone is written as the same instant", time.Date(2025, 6, 1, 14, 0, 1, 5, time.FixedZone("CEST", 7200)), "d7ff"},
		{"a time before 1970 is a 12-byte timestamp (ext 8)", time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC), "c70cff"},
		{"a time after 2514 is a 12-byte timestamp (ext 8)", time.Date(2600, 1, 1, 0, 0, 0, 1, time.UTC), "c70cff"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := fxEvent(6, "p", events.Reset{})
			e.Time = c.time
			b, err := events.Marshal(e)
			require.NoError(t, err)
			_, vals := msgpackMap(t, b)
			want := specTimestamp(c.time)
			require.Equal(t, c.header, hex.EncodeToString(want[:len(c.header)/2]), "the case tests the form it names")
			require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(vals["time"]))

			back, err := events.Unmarshal(b)
			require.NoError(t, err)
			require.True(t, c.time.Equal(back.Time))
			require.Equal(t, time.UTC, back.Time.Location())
		})
	}
}

// Raw JSON fields (metadata, state values) are msgpack bin holding the JSON
// text exactly as the writer gave it; the JSON form carries the value,
// compacted.
func TestRawJSONFieldsAreMsgpackBinOfTheJSONText(t *testing.T) {
	text := `{"a": [1, 2], "b": "ü"}` // insignificant spaces on purpose
	e := fxEvent(9, "p", events.StateSet{Key: "k", Value: json.RawMessage(text)})
	b, err := events.Marshal(e)
	require.NoError(t, err)
	_, vals := msgpackMap(t, b)
	_, payload := msgpackMap(t, vals["payload"])
	require.Equal(t, append([]byte{0xc4, byte(len(text))}, text...), payload["value"], "bin 8 of the JSON text, spaces kept")

	j, err := e.MarshalJSON()
	require.NoError(t, err)
	require.Contains(t, string(j), `"value":{"a":[1,2],"b":"ü"}`, "the JSON form has the compacted value")

	back, err := events.Unmarshal(b)
	require.NoError(t, err)
	require.Equal(t, text, string(back.Payload.(events.StateSet).Value), "msgpack round trip keeps the text")

	// A producer whose library writes str instead of bin is still read.
	asStr := bytes.Replace(b, payload["value"], append([]byte{0xa0 | byte(len(text))}, text...), 1)
	require.NotEqual(t, b, asStr)
	back, err = events.Unmarshal(asStr)
	require.NoError(t, err)
	require.Equal(t, text, string(back.Payload.(events.StateSet).Value))
}

// Empty optional fields are left out of the map; fields without omitempty
// are always written, null included.
func TestEmptyFieldsAreOmittedAndRequiredOnesWritten(t *testing.T) {
	e := fxEvent(5, "", events.ToolResult{ToolCallID: "c"})
	b, err := events.Marshal(e)
	require.NoError(t, err)
	keys, vals := msgpackMap(t, b)
	require.Equal(t, []string{"id", "type", "tenant", "thread", "time", "producer", "v", "payload"}, keys)
	require.Equal(t, []byte{0xa0}, vals["producer"], "an empty producer is an empty str")
	require.Equal(t, []byte{0x01}, vals["v"], "v is a positive fixint")
	keys, pvals := msgpackMap(t, vals["payload"])
	require.Equal(t, []string{"tool_call_id", "content"}, keys)
	require.Equal(t, []byte{0xc0}, pvals["content"], "null content is nil")
}

// Keys of map-typed fields (thread metadata, forked state) are sorted by
// their bytes, whatever Go's map order.
func TestMapKeysAreSortedByTheirBytes(t *testing.T) {
	keys := []string{"zeta", "Alpha", "alpha", "ä", "10", "9", "_", "-"}
	sorted := []string{"-", "10", "9", "Alpha", "_", "alpha", "zeta", "ä"}
	md := map[string]string{}
	state := map[string]json.RawMessage{}
	for i, k := range keys {
		md[k] = fmt.Sprint(i)
		state[k] = json.RawMessage(fmt.Sprint(i))
	}
	cases := []struct {
		name  string
		event events.Event
		field func(payload map[string][]byte) []byte
	}{
		{"thread.created metadata", fxEvent(1, "p", events.ThreadCreated{Metadata: md}),
			func(p map[string][]byte) []byte { return p["metadata"] }},
		{"thread.updated metadata", fxEvent(2, "p", events.ThreadUpdated{Metadata: md}),
			func(p map[string][]byte) []byte { return p["metadata"] }},
		{"thread.forked state", fxEvent(11, "p", events.Forked{SourceTenant: "a", SourceThread: "b", State: state}),
			func(p map[string][]byte) []byte { return p["state"] }},
		{"thread.forked created metadata", fxEvent(11, "p", events.Forked{SourceTenant: "a", SourceThread: "b", Created: events.ThreadCreated{Metadata: md}}),
			func(p map[string][]byte) []byte { _, c := msgpackMap(t, p["created"]); return c["metadata"] }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for range 20 { // Go randomizes map order on every iteration
				b, err := events.Marshal(c.event)
				require.NoError(t, err)
				_, vals := msgpackMap(t, b)
				_, payload := msgpackMap(t, vals["payload"])
				require.Equal(t, sorted, msgpackKeys(t, c.field(payload)))
			}
		})
	}
}

// Integers use the smallest msgpack form.
func TestIntegersAreCompact(t *testing.T) {
	cases := []struct {
		name string
		n    uint64
		want string
	}{
		{"a small sequence is a positive fixint", 42, "2a"},
		{"a sequence up to 255 is uint 8", 200, "ccc8"},
		{"a sequence up to 65535 is uint 16", 4711, "cd1267"},
		{"a sequence up to 2^32-1 is uint 32", 1 << 31, "ce80000000"},
		{"a larger sequence is uint 64", 1 << 40, "cf0000010000000000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := fxEvent(8, "p", events.Compaction{UpToSeq: c.n, Summary: events.Text("s")})
			b, err := events.Marshal(e)
			require.NoError(t, err)
			_, vals := msgpackMap(t, b)
			_, payload := msgpackMap(t, vals["payload"])
			require.Equal(t, c.want, hex.EncodeToString(payload["up_to_seq"]))
		})
	}
}

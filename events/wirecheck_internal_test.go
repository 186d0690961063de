package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// forkedWire must carry every field of Forked under the same msgpack name,
// or Marshal would silently drop a field of fork events.
func TestForkedWireHasEveryFieldOfForked(t *testing.T) {
	ft, wt := reflect.TypeFor[Forked](), reflect.TypeFor[forkedWire]()
	require.Equal(t, ft.NumField(), wt.NumField())
	for i := range ft.NumField() {
		f, w := ft.Field(i), wt.Field(i)
		assert.Equal(t, f.Name, w.Name)
		assert.Equal(t, f.Tag.Get("msgpack"), w.Tag.Get("msgpack"), f.Name)
		assert.True(t, w.Type.ConvertibleTo(f.Type), f.Name)
	}
}

// sortedRawMap writes what msgpack writes for the same map, in key order.
func TestSortedRawMapEncodesLikeMsgpackInKeyOrder(t *testing.T) {
	one := map[string]json.RawMessage{"k": json.RawMessage(`{"a":1}`)}
	nilValue := map[string]json.RawMessage{"n": nil}
	for _, m := range []map[string]json.RawMessage{nil, {}, one, nilValue} {
		want, err := msgpack.Marshal(m)
		require.NoError(t, err)
		got, err := msgpack.Marshal(sortedRawMap(m))
		require.NoError(t, err)
		assert.Equal(t, want, got, "%v", m)
	}
	got, err := msgpack.Marshal(sortedRawMap{"b": json.RawMessage("2"), "a": json.RawMessage("1"), "c": nil})
	require.NoError(t, err)
	assert.Equal(t, []byte{0x83, 0xa1, 'a', 0xc4, 1, '1', 0xa1, 'b', 0xc4, 1, '2', 0xa1, 'c', 0xc0}, got)
}

func TestCheckWireAcceptsEveryMsgpackFormat(t *testing.T) {
	values := []any{
		nil, true, false, 0, 127, -1, -32, -33, 200, 70000, 1 << 40, -200, -70000, -(1 << 40), uint64(1 << 63),
		float32(1.5), 2.5, "", "short", strings.Repeat("s", 40), strings.Repeat("s", 300), strings.Repeat("s", 70000),
		[]byte{}, []byte("bin"), bytes.Repeat([]byte{1}, 300), bytes.Repeat([]byte{1}, 70000),
		[]any{}, []any{1, "a"}, make([]any, 20), make([]any, 70000),
		map[string]any{}, map[string]any{"a": 1}, mapOf(20), mapOf(70000),
		time.Unix(1, 0), time.Unix(1, 5), time.Unix(1<<35, 5), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		msgpack.RawMessage{0xd4, 1, 2}, msgpack.RawMessage{0xd5, 1, 2, 3}, msgpack.RawMessage{0xd8, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		msgpack.RawMessage{0xc7, 3, 5, 1, 2, 3}, msgpack.RawMessage{0xc8, 0, 2, 5, 1, 2}, msgpack.RawMessage{0xc9, 0, 0, 0, 1, 5, 1},
	}
	for _, v := range values {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, checkWire(b), "%T %x", v, b[:min(len(b), 16)])
		require.Error(t, checkWire(append(b, 0xc0)), "trailing byte after %T", v)
		if len(b) > 1 {
			require.Error(t, checkWire(b[:len(b)-1]), "truncated %T", v)
		}
	}
}

func mapOf(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[strconv.Itoa(i)] = i
	}
	return m
}

// FuzzCheckWire compares checkWire with the msgpack library: whatever the
// library reads as exactly one value, checkWire accepts unless it nests too
// deep, and whatever checkWire accepts, the library reads completely.
func FuzzCheckWire(f *testing.F) {
	f.Add([]byte{0xc0})
	f.Add([]byte{0x92, 0x01, 0x81, 0xa1, 'a', 0xc3})
	f.Add([]byte{0xd7, 0xff, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0xc7, 0x0c, 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0xdc, 0x00, 0x02, 0xc2, 0xc3})
	f.Add(append(bytes.Repeat([]byte{0x91}, 70), 0xc0))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkWire(b)
		r := bytes.NewReader(b)
		dec := msgpack.NewDecoder(r)
		libErr := dec.Skip()
		libOK := libErr == nil && r.Len() == 0
		if err == nil {
			require.True(t, libOK, "checkWire accepted %x, msgpack: %v, %d left", b, libErr, r.Len())
			return
		}
		if libOK {
			require.Contains(t, err.Error(), "nest more than", "checkWire rejected %x, which msgpack reads: %v", b, err)
		}
	})
}

package snapstore

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// fullState is a state with every field set (checked), so that a field
// added to fold.State and not to writeState fails
// TestHeadEncodingIsTheReflectionEncoding.
func fullState(t *testing.T) *fold.State {
	at := time.Date(2026, 11, 28, 17, 0, 0, 123456789, time.UTC)
	prompt := "be brief"
	s := &fold.State{Tenant: "acme", Thread: "t1", Version: 1 << 40, Events: 300, Exists: true, Deleted: true,
		Erased: true, Owner: "ann", Agent: "helper", SystemPrompt: &prompt, Title: "a title",
		Metadata: map[string]string{"k": "v"}, Replies: events.RepliesOff, PendingPolicy: "reject",
		ForkedFrom: &fold.ForkRef{Tenant: "acme", Thread: "t0", Seq: 9, ByReference: true}, ExternalID: "ext-1",
		Lifetime: 2, LifetimeSeq: 77, CreatedAt: at, UpdatedAt: at.Add(time.Hour), Generation: 3, Base: 70000,
		Messages:   []events.Message{{Role: events.RoleUser, Content: events.Text("hi"), Seq: 5}},
		Pending:    []fold.PendingCall{{ID: "c1", Name: "search", Seq: 4, EventID: "e4"}},
		KV:         map[string]json.RawMessage{"x": json.RawMessage(`1`)},
		AgentTurns: map[string]int{"helper": 4}, LastUser: &fold.MessageRef{EventID: "e5", Seq: 5},
		LastUserAnswered: true, RejectedCount: 2, Rejections: []fold.Rejection{{Seq: 6, Reason: "no"}},
		Redactions:  []fold.Redaction{{Seq: 7, EventID: "e7", Fields: []string{"content"}, At: at}},
		Checkpoints: &fold.CheckpointIndex{}}
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero(), "fullState sets fold.State.%s", v.Type().Field(i).Name)
	}
	return s
}

// TestHeadEncodingIsTheReflectionEncoding checks that writeHead writes the
// bytes msgpack's reflection encoder writes for the head (compact
// integers, as encodeHead sets), with every omitempty field empty and
// with each one set, so that heads stay in format 1.
func TestHeadEncodingIsTheReflectionEncoding(t *testing.T) {
	full := fullState(t)
	bare := &fold.State{Tenant: "acme", Thread: "t1", Version: 3, CreatedAt: full.CreatedAt, UpdatedAt: full.UpdatedAt}
	empties := &fold.State{Tenant: "acme", Thread: "t1", Metadata: map[string]string{}, Pending: []fold.PendingCall{},
		KV: map[string]json.RawMessage{}, AgentTurns: map[string]int{}, Messages: []events.Message{}}
	chunks := []ChunkRef{{First: 0, Count: 70000, Bytes: 1 << 20, FirstSeq: 1, LastSeq: 1 << 33, Level: 1}}
	cases := map[string]head{
		"a zero head":                      {},
		"only the required fields":         {Format: headFormat, Gen: 1, State: bare, Tail: []byte{0x90}},
		"empty maps and slices":            {Format: headFormat, State: empties, Tail: []byte{}},
		"every field of head and of state": {Format: headFormat, Gen: 1 << 35, State: full, Tail: []byte{0x91, 1}, Chunks: chunks, Garbage: []string{"a.b.>"}, DeltaRev: 1 << 20},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			var want, got bytes.Buffer
			enc := msgpack.NewEncoder(&want)
			enc.UseCompactInts(true)
			require.NoError(t, enc.Encode(&h))
			enc = msgpack.NewEncoder(&got)
			enc.UseCompactInts(true)
			require.NoError(t, writeHead(enc, &h))
			require.Equal(t, want.Bytes(), got.Bytes())
		})
	}
}

// TestAHeadIsEncodedWithFewerAllocationsThanByReflection: writeHead does
// not box the fields it tests for emptiness.
func TestAHeadIsEncodedWithFewerAllocationsThanByReflection(t *testing.T) {
	s := fullState(t)
	s.Messages = nil
	h := &head{Format: headFormat, Gen: 1, State: s, Chunks: []ChunkRef{{Count: 1}}}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	encode := func(f func() error) float64 {
		return testing.AllocsPerRun(100, func() {
			buf.Reset()
			if err := f(); err != nil {
				t.Fatal(err)
			}
		})
	}
	byHand := encode(func() error { return writeHead(enc, h) })
	byReflection := encode(func() error { return enc.Encode(h) })
	t.Logf("%.0f allocations by hand, %.0f by reflection", byHand, byReflection)
	require.Less(t, byHand, byReflection-10)
}

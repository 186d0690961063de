package events

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Marshal writes the envelope by hand; it must give exactly the bytes the
// reflection encoder gives for wireMsgpack (which Unmarshal decodes), for
// every optional-field combination and every msgpack time form (32-, 64-
// and 96-bit timestamps).
func TestMarshalEnvelopeMatchesReflection(t *testing.T) {
	times := []time.Time{
		time.Unix(1700000000, 0).UTC(),                         // 32-bit form
		time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC), // 64-bit form
		time.Date(1969, 7, 20, 20, 17, 40, 5, time.UTC),        // 96-bit form (before 1970)
		time.Date(2500, 1, 1, 0, 0, 0, 1, time.FixedZone("x", 3600)),
	}
	payloads := []Payload{
		UserMessage{Content: Text("hi")},
		AssistantMessage{Content: Text("ok"), ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}}},
		ThreadCreated{Metadata: map[string]string{"b": "2", "a": "1"}},
		Forked{SourceTenant: "t", SourceThread: "s", State: map[string]json.RawMessage{"k": json.RawMessage("1")}},
	}
	n := 0
	for _, tm := range times {
		for _, p := range payloads {
			for _, ids := range [][2]string{{"", ""}, {"c", ""}, {"", "r"}, {"c", "r"}} {
				e := Event{ID: "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b", Type: p.EventType(), Tenant: "acme", Thread: "t-1",
					Time: tm, Producer: "p", CausationID: ids[0], CorrelationID: ids[1], SchemaVersion: SchemaVersion, Payload: p}
				got, err := Marshal(e)
				require.NoError(t, err)
				var body any = p
				if f, ok := p.(Forked); ok {
					body = forkedWireOf(f)
				}
				pb, err := encodeMsgpack(body)
				require.NoError(t, err)
				want, err := encodeMsgpack(wireMsgpack{wire: e.wire(), Payload: pb})
				require.NoError(t, err)
				require.Equal(t, want, got, "time %v, payload %T, ids %q", tm, p, ids)
				n++
			}
		}
	}
	require.Equal(t, 64, n)
}

// knownType must agree with newPayload on every type and on unknown ones.
func TestKnownTypeAgreesWithNewPayload(t *testing.T) {
	for _, typ := range append(append([]Type(nil), AllTypes...), "", "thread", "message.user ", "MESSAGE.USER") {
		require.Equal(t, newPayload(typ) != nil, knownType(typ), "%q", typ)
	}
}

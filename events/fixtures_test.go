package events_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/eventfixtures"
)

// testTime is a fixed event time with nanoseconds, in UTC.
var testTime = eventfixtures.RichTime

func strp(s string) *string { return &s }

// envelope returns a fully populated envelope (every optional field set)
// around p. The id is a fixed UUIDv7 so encodings are reproducible.
func envelope(p events.Payload) events.Event {
	return events.Event{
		ID:            "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b",
		Type:          p.EventType(),
		Tenant:        "acme",
		Thread:        "support-42_a",
		Time:          testTime,
		Producer:      "agent-worker/7",
		CausationID:   "01959a3c-5e2b-7cc1-9a40-000000000001",
		CorrelationID: "turn-3",
		SchemaVersion: events.SchemaVersion,
		Payload:       p,
	}
}

// richMessages is eventfixtures.RichMessages.
func richMessages() []events.Message { return eventfixtures.RichMessages() }

// sampleEvents returns one event of every type in events.AllTypes, each
// with as many fields set as its payload has, keyed by type.
func sampleEvents() map[events.Type]events.Event {
	payloads := eventfixtures.Rich()
	out := make(map[events.Type]events.Event, len(payloads))
	for _, p := range payloads {
		out[p.EventType()] = envelope(p)
	}
	return out
}

// minimalEvents returns one event of every type with only the required
// fields set (zero values everywhere else), keyed by type.
func minimalEvents() map[events.Type]events.Event {
	payloads := eventfixtures.Minimal()
	out := make(map[events.Type]events.Event, len(payloads))
	for _, p := range payloads {
		e := events.Event{ID: "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b", Type: p.EventType(), Tenant: "t", Thread: "th",
			Time: testTime, SchemaVersion: events.SchemaVersion, Payload: p}
		out[p.EventType()] = e
	}
	return out
}

// TestFixturesCoverEveryTypeAndAreValid guards the fixtures themselves: a
// new event type must get a sample, and every sample must be valid so the
// round-trip tests exercise events writers can really append.
func TestFixturesCoverEveryTypeAndAreValid(t *testing.T) {
	for name, set := range map[string]map[events.Type]events.Event{"rich": sampleEvents(), "minimal": minimalEvents()} {
		require.Len(t, set, len(events.AllTypes), "%s fixtures", name)
		for _, typ := range events.AllTypes {
			e, ok := set[typ]
			require.True(t, ok, "%s fixtures have no %s event", name, typ)
			require.NoError(t, e.Validate(), fmt.Sprintf("%s %s", name, typ))
		}
	}
}

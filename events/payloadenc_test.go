package events_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/eventfixtures"
	"github.com/convlog/convlog/internal/transcripts"
)

// requireReflectionBytes fails t unless Marshal gives e the bytes the
// reflection encoder gives it.
func requireReflectionBytes(t *testing.T, e events.Event, msgAndArgs ...any) {
	t.Helper()
	got, err := events.Marshal(e)
	require.NoError(t, err, msgAndArgs...)
	want, err := events.MarshalReflect(e)
	require.NoError(t, err, msgAndArgs...)
	require.Equal(t, want, got, msgAndArgs...)
}

// The payloads Marshal writes without reflection are encoded byte for byte
// as the reflection encoder encodes them: every event type with every field
// set and with none, the golden events, and the fields' edge forms (each
// content shape and part field, empty versus absent, integer widths).
func TestPayloadEncodersMatchReflection(t *testing.T) {
	var payloads []events.Payload
	payloads = append(payloads, eventfixtures.Rich()...)
	payloads = append(payloads, eventfixtures.Minimal()...)
	for _, g := range eventfixtures.Golden() {
		payloads = append(payloads, g.Event.Payload)
	}
	allParts := events.Parts(
		events.Part{Type: events.PartText, Text: "a"},
		events.Part{Type: events.PartImage, URL: "https://x/y.png", Detail: "low"},
		events.Part{Type: events.PartImage, Data: eventfixtures.PNG, MediaType: "image/png"},
		events.Part{Type: events.PartFile, FileID: "f-1", Filename: "a.pdf", MediaType: "application/pdf", Data: "AAE=", URL: "u", Text: "t", Detail: "d"},
		events.Part{},
	)
	long := string(make([]byte, 70000))
	for _, c := range []events.Content{{}, events.Text(""), events.Text("x"), events.Text(long), events.Parts(), {Kind: events.ContentParts}, allParts} {
		payloads = append(payloads,
			events.UserMessage{Content: c},
			events.UserMessage{Content: c, Name: "n", Metadata: json.RawMessage(`{}`)},
			events.UserMessage{Content: c, Metadata: json.RawMessage{}},
			events.AssistantMessage{Content: c},
			events.ToolResult{ToolCallID: "c", Content: c, IsError: true},
			events.ToolResult{Content: c, Name: "n"},
			events.Compaction{UpToSeq: 3, Summary: c})
	}
	for _, u := range []*events.Usage{{}, {InputTokens: 1}, {OutputTokens: -1}, {TotalTokens: math.MaxInt64},
		{InputTokens: math.MinInt64, OutputTokens: 200, TotalTokens: 70000}, {InputTokens: -33, OutputTokens: 1 << 40}} {
		payloads = append(payloads, events.AssistantMessage{Usage: u, Reasoning: "r"})
	}
	many := make([]events.ToolCall, 17)
	for i := range many {
		many[i] = events.ToolCall{ID: string(rune('a' + i)), Name: "f"}
	}
	payloads = append(payloads,
		events.AssistantMessage{ToolCalls: many, Agent: "a", Model: "m", ReplyTo: "r"},
		events.AssistantMessage{ToolCalls: []events.ToolCall{}},
		events.StateSet{}, events.StateSet{Value: json.RawMessage{}}, events.StateSet{Key: long, Value: json.RawMessage(long)},
		events.StateDeleted{}, &events.UserMessage{Content: events.Text("by pointer")})
	seen := map[events.Type]bool{}
	for i, p := range payloads {
		requireReflectionBytes(t, eventfixtures.Event(1, "p", p), "payload %d (%T): %+v", i, p, p)
		seen[p.EventType()] = true
	}
	for _, ti := range events.Registry() {
		require.True(t, seen[ti.Type], "no payload of type %s was compared", ti.Type)
	}
}

// Every event of the real transcripts is encoded as the reflection encoder
// encodes it.
func TestTranscriptEventsEncodeAsReflectionDoes(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 600, time.UTC)
	n := 0
	for file, conv := range transcripts.Load(t).Conversations(t) {
		evs, err := transcripts.Events(conv, "import", transcripts.ThreadID(conv), "transcripts-test", base)
		require.NoError(t, err, "%s: conversation %s", file, conv.ID)
		for i, e := range evs {
			requireReflectionBytes(t, e, "%s: conversation %s event %d", file, conv.ID, i)
			n++
		}
	}
	require.Positive(t, n)
}

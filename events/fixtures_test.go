package events_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// testTime is a fixed event time with nanoseconds, in UTC.
var testTime = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

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

// richMessages is a history with every role, every content shape and every
// message field a Restore or Forked payload can carry.
func richMessages() []events.Message {
	return []events.Message{
		{Role: events.RoleSystem, Content: events.Text("You are terse.")},
		{Role: events.RoleUser, Content: events.Parts(
			events.Part{Type: events.PartText, Text: "what is in this picture? ünïcødé ✓"},
			events.Part{Type: events.PartImage, URL: "https://example.com/cat.png", Detail: "low"},
			events.Part{Type: events.PartImage, Data: "aGVsbG8=", MediaType: "image/png"},
			events.Part{Type: events.PartFile, FileID: "file-123", Filename: "report.pdf", MediaType: "application/pdf"},
		), Name: "alice", Metadata: json.RawMessage(`{"client":"web"}`),
			Seq: 7, EventID: "01959a3c-5e2b-7cc1-9a40-000000000007", Time: testTime},
		{Role: events.RoleAssistant, Content: events.Content{}, Reasoning: "look it up",
			ToolCalls: []events.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"cat"}`}},
			Agent:     "helper", Model: "gpt-4o", Usage: &events.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
			Metadata: json.RawMessage(`{"finish_reason":"tool_calls"}`)},
		{Role: events.RoleTool, ToolCallID: "call_1", Name: "lookup", Content: events.Text(""), IsError: true,
			Synthetic: true},
		{Role: events.RoleAssistant, Content: events.Text("It is a cat.\r\n\bdone")},
	}
}

// sampleEvents returns one event of every type in events.AllTypes, each
// with as many fields set as its payload has, keyed by type.
func sampleEvents() map[events.Type]events.Event {
	created := events.ThreadCreated{
		Owner: "user-9", Agent: "helper", SystemPrompt: strp("Be nice.\nAlways."), Title: "Refund <order> & more",
		Metadata: map[string]string{"source": "import", "lang": "de", "ζ": "ω"},
		Replies:  events.RepliesOff, PendingPolicy: events.PendingCancel,
	}
	payloads := []events.Payload{
		created,
		events.ThreadUpdated{Title: strp("new title"), SystemPrompt: strp(""), Metadata: map[string]string{"lang": "", "tier": "gold"},
			Replies: events.RepliesAuto, Agent: strp("other")},
		events.UserMessage{Content: events.Text("Hello, I need help with ünïcødé \"quotes\" and <tags>"), Name: "alice",
			Metadata: json.RawMessage(`{"ip":"10.0.0.1","n":[1,2.5,null]}`)},
		events.AssistantMessage{Content: events.Text("Let me check."), Reasoning: "The user wants a refund.",
			ToolCalls: []events.ToolCall{
				{ID: "call_a", Name: "get_order", Arguments: `{"order_id": "#W123"}`},
				{ID: "call_b", Name: "think", Arguments: `{}`},
			},
			Agent: "helper", Model: "gpt-4o-2024-08-06", Usage: &events.Usage{InputTokens: 1200, OutputTokens: 34, TotalTokens: 1234},
			Name: "bot", Metadata: json.RawMessage(`{"raw":{"id":"chatcmpl-1"}}`), ReplyTo: "01959a3c-5e2b-7cc1-9a40-000000000002"},
		events.ToolResult{ToolCallID: "call_a", Name: "get_order", Content: events.Text(`{"status":"delivered"}`), IsError: true},
		events.Reset{Reason: "user asked to start over"},
		events.Restore{Messages: richMessages(), Reason: "rewind to checkpoint 3"},
		events.Compaction{UpToSeq: 1234, Summary: events.Text("The user asked for a refund; granted."), Role: events.RoleAssistant},
		events.StateSet{Key: "cart", Value: json.RawMessage(`{"items":[{"sku":"A1","qty":2}],"total":19.99}`)},
		events.StateDeleted{Key: "cart"},
		events.Forked{SourceTenant: "acme", SourceThread: "support-41", SourceSeq: 99, Created: created,
			Messages: richMessages(),
			State:    map[string]json.RawMessage{"cart": json.RawMessage(`{"items":[]}`), "n": json.RawMessage(`3`), "null": json.RawMessage(`null`)}},
		events.Deleted{Reason: "spam"},
		events.Undeleted{Reason: "not spam after all"},
		events.Erased{RemovedEvents: 512, LastSeq: 9001, Reason: "GDPR request 77"},
		events.Redacted{Seq: 41, EventID: "01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6c", Fields: []string{"content", "metadata"}, Reason: "leaked API key"},
		events.CheckpointSaved{NS: "outer:task-1", ID: "1ef4f797-8335-6428-8001-8a1503f9b875", Parent: "1ef4f797-8335-6428-8000-8a1503f9b875",
			Checkpoint: json.RawMessage(`{"type":"json","json":{"v":4,"id":"1ef4f797-8335-6428-8001-8a1503f9b875","channel_versions":{"messages":2}}}`),
			Metadata:   json.RawMessage(`{"type":"json","json":{"source":"loop","step":1}}`),
			Channels:   json.RawMessage(`{"messages":{"type":"json","json":[{"content":"hi"}]},"big":{"type":"bytes","blob":"lg/3f2a","size":70000},"raw":{"type":"bytes","base64":"AAE="}}`),
			Messages: []events.Message{{Role: events.RoleUser, Content: events.Text("hi"), Metadata: json.RawMessage(`{"langgraph_id":"m1"}`)},
				{Role: events.RoleAssistant, Content: events.Text(""), ToolCalls: []events.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Oslo"}`}}},
				{Role: events.RoleTool, ToolCallID: "call_1", Name: "weather", Content: events.Text("sunny")}}},
		events.CheckpointWrites{NS: "outer:task-1", Checkpoint: "1ef4f797-8335-6428-8001-8a1503f9b875", Task: "task-2", Path: "~__pregel_pull, agent",
			Writes: json.RawMessage(`[{"idx":0,"channel":"messages","value":{"type":"json","json":[]}},{"idx":-1,"channel":"__error__","value":{"type":"json","json":"boom"}}]`)},
	}
	out := make(map[events.Type]events.Event, len(payloads))
	for _, p := range payloads {
		out[p.EventType()] = envelope(p)
	}
	return out
}

// minimalEvents returns one event of every type with only the required
// fields set (zero values everywhere else), keyed by type.
func minimalEvents() map[events.Type]events.Event {
	payloads := []events.Payload{
		events.ThreadCreated{},
		events.ThreadUpdated{},
		events.UserMessage{Content: events.Text("")},
		events.AssistantMessage{Content: events.Text("")},
		events.ToolResult{ToolCallID: "c"},
		events.Reset{},
		events.Restore{},
		events.Compaction{UpToSeq: 1, Summary: events.Text("")},
		events.StateSet{Key: "k", Value: json.RawMessage(`null`)},
		events.StateDeleted{Key: "k"},
		events.Forked{SourceTenant: "t", SourceThread: "s", SourceSeq: 1},
		events.Deleted{},
		events.Undeleted{},
		events.Erased{},
		events.Redacted{Seq: 1, EventID: "e"},
		events.CheckpointSaved{ID: "c", Checkpoint: json.RawMessage(`{"type":"json"}`)},
		events.CheckpointWrites{Checkpoint: "c", Task: "t", Writes: json.RawMessage(`[]`)},
	}
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

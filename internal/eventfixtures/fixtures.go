// Package eventfixtures holds the test events of every event type, in one
// place: adding an event type adds its lines here (a realistic golden event,
// a rich payload with every field set, a minimal valid payload) besides its
// payload type, registry entry, fold case and schema. The events tests
// round-trip the rich and minimal payloads through every codec; the schemas
// tests validate all of them and write the golden vectors from [Golden].
package eventfixtures

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/convlog/convlog/events"
)

// Fixed envelope values of the golden events, so that the golden vectors
// are stable.
const (
	Tenant      = "acme"
	Thread      = "support-4711"
	Correlation = "turn-2025-06-01-0007"
)

// ID returns the n-th fixture event id (n from 1 to 255): a UUIDv7
// (version 7, RFC 4122 variant) in canonical lower-case form.
func ID(n int) string {
	return fmt.Sprintf("01972b6e-8a40-7c1d-8e2f-3a4b5c6d7e%02x", n)
}

// Time returns the fixture time of the n-th event: nanosecond precision,
// UTC, so the envelope time is an 8-byte msgpack timestamp.
func Time(n int) time.Time {
	return time.Date(2025, 6, 1, 12, 0, n, 123456789, time.UTC)
}

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// Event wraps p in the fixture envelope of event n.
func Event(n int, producer string, p events.Payload) events.Event {
	return events.Event{
		ID:            ID(n),
		Type:          p.EventType(),
		Tenant:        Tenant,
		Thread:        Thread,
		Time:          Time(n),
		Producer:      producer,
		SchemaVersion: events.SchemaVersion,
		Payload:       p,
	}
}

// PNG is a 1x1 PNG, base64: the inline image of the multimodal example.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// terminalOutput is tool output as terminals produce it (the SWE-agent
// transcripts have the like): CR LF line ends, a progress counter that is
// overwritten with backspaces, and non-ASCII text.
const terminalOutput = "$ lookup-order 4711\r\n" +
	"status: delivered (beschädigt)\r\n" +
	"fetching 42%\b\b\b100%\r\n" +
	"Empfänger: Jürgen Groß, 東京都\r\n"

// GoldenEvent is one golden vector's event: the file name is its type.
type GoldenEvent struct {
	// Note says what the vector shows; it is written to the file as
	// "description".
	Note  string
	Event events.Event
}

// Golden returns one realistic event per event type, in events.AllTypes
// order: the source of schemas/testdata/golden (go test ./schemas/ -update).
// Raw JSON fields (metadata, state values) are compact JSON text: the JSON
// form of an event always carries them compact, so only compact text
// reproduces the same msgpack bytes from the JSON form.
func Golden() []GoldenEvent {
	return slices.Concat(goldenMessages(), goldenHistory(), goldenLifecycle(), goldenCheckpoints())
}

// goldenMessages returns the thread.created, thread.updated, message and tool.result vectors.
func goldenMessages() []GoldenEvent {
	created := events.ThreadCreated{
		Owner:         "u-1029",
		Agent:         "support-bot",
		SystemPrompt:  Ptr("You are Acme's support agent. Antworte auf Deutsch, wenn der Kunde Deutsch schreibt."),
		Title:         "Rückerstattung für Bestellung #4711",
		Metadata:      map[string]string{"plan": "pro", "channel": "web", "locale": "de-DE"},
		Replies:       events.RepliesAuto,
		PendingPolicy: events.PendingCancel,
	}
	createdEv := Event(1, "chat-frontend", created)
	createdEv.CorrelationID = Correlation

	updatedEv := Event(2, "ops-console", events.ThreadUpdated{
		Title:    Ptr("Rückerstattung erledigt ✅"),
		Metadata: map[string]string{"status": "resolved", "locale": ""},
		Replies:  events.RepliesOff,
		Agent:    Ptr("billing-bot"),
	})

	userEv := Event(3, "chat-frontend", events.UserMessage{
		Content: events.Parts(
			events.Part{Type: events.PartText, Text: "Hallo! Das Paket kam beschädigt an — siehe Fotos und Rechnung. 📦"},
			events.Part{Type: events.PartImage, URL: "https://cdn.example.com/uploads/4711/box.jpg?sig=a1&exp=1748779200", Detail: "high"},
			events.Part{Type: events.PartImage, Data: PNG, MediaType: "image/png"},
			events.Part{Type: events.PartFile, FileID: "file-7Qm2xR9kLp", Filename: "rechnung_4711.pdf", MediaType: "application/pdf"},
		),
		Name:     "kunde_1029",
		Metadata: json.RawMessage(`{"client":"web-2.3.1","ip_country":"DE","tags":["damaged","refund"]}`),
	})
	userEv.CorrelationID = Correlation

	assistantEv := Event(4, "agent-worker/support-bot", events.AssistantMessage{
		Content:   events.Content{},
		Reasoning: "The customer reports a damaged parcel. Look up order 4711 and the refund policy before answering.",
		ToolCalls: []events.ToolCall{
			{ID: "call_8f3a", Name: "lookup_order", Arguments: `{"order_id": "4711", "include": ["items", "shipping"]}`},
			{ID: "call_8f3b", Name: "search_kb", Arguments: `{"query":"beschädigte Lieferung Rückerstattung","top_k":3}`},
		},
		Agent:    "support-bot",
		Model:    "gpt-4o-2024-08-06",
		Usage:    &events.Usage{InputTokens: 1234, OutputTokens: 56, TotalTokens: 1290},
		Metadata: json.RawMessage(`{"finish_reason":"tool_calls","provider":"openai","system_fingerprint":"fp_5f2c"}`),
		ReplyTo:  ID(3),
	})
	assistantEv.CausationID = ID(3)
	assistantEv.CorrelationID = Correlation

	toolEv := Event(5, "tool-runner", events.ToolResult{
		ToolCallID: "call_8f3a",
		Name:       "lookup_order",
		Content:    events.Text(terminalOutput),
	})
	toolEv.CausationID = ID(4)
	toolEv.CorrelationID = Correlation

	return []GoldenEvent{
		{"thread.created: owner, agent, a system prompt, non-ASCII title, metadata (keys sorted in msgpack), reply mode and pending policy; a correlation id.", createdEv},
		{"thread.updated: pointer fields set, a metadata key removed by an empty value; system_prompt absent (unchanged).", updatedEv},
		{"message.user: multimodal content (text with non-ASCII and emoji, image by URL with detail, image as base64 data, file reference) and raw JSON metadata (msgpack bin).", userEv},
		{"message.assistant: null content with reasoning, two tool calls whose arguments are raw JSON text kept byte for byte (spaces included), usage, model, agent, raw JSON metadata, reply_to, causation and correlation ids.", assistantEv},
		{"tool.result: string content with CR LF line ends, backspace (\\b) bytes and non-ASCII text, as terminal output has it.", toolEv},
	}
}

// goldenHistory returns the vectors of the history and the key-value
// state: reset, restore, compaction, state.set and state.deleted.
func goldenHistory() []GoldenEvent {
	restoreEv := Event(7, "deepagents-checkpointer", events.Restore{
		Messages: []events.Message{
			{Role: events.RoleSystem, Content: events.Text("Be terse.")},
			{Role: events.RoleUser, Content: events.Text("What are 7 × 6 and 0 ÷ 0? Log the first."), Name: "kunde_1029"},
			{Role: events.RoleAssistant, Content: events.Content{}, Reasoning: "Use the calculator twice.",
				ToolCalls: []events.ToolCall{
					{ID: "call_1", Name: "calc", Arguments: `{"expr":"7*6"}`},
					{ID: "call_2", Name: "calc", Arguments: `{"expr":"0/0"}`},
				},
				Agent: "math-bot", Model: "llama-3.1-8b-instruct", Usage: &events.Usage{InputTokens: 40, OutputTokens: 9}},
			{Role: events.RoleTool, ToolCallID: "call_1", Name: "calc", Content: events.Text("42")},
			{Role: events.RoleTool, ToolCallID: "call_2", Name: "calc", Content: events.Text("error: division by zero"), IsError: true},
			{Role: events.RoleAssistant, Content: events.Text(""),
				ToolCalls: []events.ToolCall{{ID: "call_3", Name: "log_answer", Arguments: `{"value":42}`}}},
			{Role: events.RoleTool, ToolCallID: "call_3", Name: "log_answer", Content: events.Text("")},
			{Role: events.RoleAssistant, Content: events.Text("42; 0 ÷ 0 is undefined."), Metadata: json.RawMessage(`{"finish_reason":"stop"}`)},
		},
		Reason: "restore checkpoint 3",
	})

	return []GoldenEvent{
		{"thread.reset: a reason.", Event(6, "chat-frontend", events.Reset{Reason: "user asked to start over"})},
		{"thread.restored: a whole history with system, user, assistant (null content, tool call, usage), an error tool result, empty-string content (distinct from null) and metadata.", restoreEv},
		{"thread.compacted: a summary in assistant role standing in for every message up to sequence 42.", Event(8, "summarizer", events.Compaction{
			UpToSeq: 42,
			Summary: events.Text("Zusammenfassung: Kunde meldet beschädigtes Paket (#4711); Rückerstattung über 49,90 € genehmigt."),
			Role:    events.RoleAssistant,
		})},
		{"state.set: a JSON object value (msgpack bin holding compact JSON text).", Event(9, "agent-worker/support-bot", events.StateSet{
			Key:   "cart",
			Value: json.RawMessage(`{"items":[{"sku":"A-1","qty":2}],"total":49.9,"currency":"EUR","note":"Größe M"}`),
		})},
		{"state.deleted: one key.", Event(10, "agent-worker/support-bot", events.StateDeleted{Key: "cart"})},
	}
}

// goldenLifecycle returns the vectors of a thread's lifecycle: fork, delete, undelete, erase, redact.
func goldenLifecycle() []GoldenEvent {
	forkedEv := Event(11, "client/fork", events.Forked{
		SourceTenant: Tenant,
		SourceThread: "support-4700",
		SourceSeq:    9,
		Created: events.ThreadCreated{
			Owner:         "u-1029",
			Agent:         "support-bot",
			SystemPrompt:  Ptr(""),
			Title:         "Fork: Lieferstatus",
			Metadata:      map[string]string{"forked_from": "support-4700"},
			PendingPolicy: events.PendingCancel,
		},
		Messages: []events.Message{
			{Role: events.RoleUser, Content: events.Text("Wo ist mein Paket?"), Seq: 3,
				EventID: "01972b60-0000-7000-8000-000000000003", Time: time.Date(2025, 5, 31, 9, 15, 2, 500000000, time.UTC)},
			{Role: events.RoleAssistant, Content: events.Content{},
				ToolCalls: []events.ToolCall{{ID: "call_1", Name: "track", Arguments: `{"order_id":"4700"}`}},
				Agent:     "support-bot", Model: "gpt-4o-mini", Seq: 4,
				EventID: "01972b60-0000-7000-8000-000000000004", Time: time.Date(2025, 5, 31, 9, 15, 4, 1, time.UTC)},
			{Role: events.RoleTool, ToolCallID: "call_1", Name: "track", Content: events.Text(events.CancelledContent),
				IsError: true, Synthetic: true},
			{Role: events.RoleUser, Content: events.Text("Egal, bitte einfach erstatten."), Seq: 6,
				EventID: "01972b60-0000-7000-8000-000000000006", Time: time.Date(2025, 5, 31, 9, 16, 0, 0, time.UTC)},
		},
		// Keys in msgpack are sorted by their bytes, whatever the map order.
		State: map[string]json.RawMessage{
			"cart":      json.RawMessage(`{"items":[{"sku":"A-1","qty":2}],"total":49.9,"currency":"EUR"}`),
			"Step":      json.RawMessage(`3`),
			"escalated": json.RawMessage(`false`),
			"notes":     json.RawMessage(`["Kunde ungeduldig","Paket verloren?"]`),
			"agent":     json.RawMessage(`null`),
		},
	})
	forkedEv.CausationID = "01972b60-0000-7000-8000-000000000009"

	deletedEv := Event(12, "ops-console", events.Deleted{Reason: "user closed the account"})
	deletedEv.Time = time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC) // whole second: 4-byte timestamp

	return []GoldenEvent{
		{"thread.forked: source thread and sequence, the source's attributes (an explicitly empty system prompt), projected messages with seq, event_id and time (timestamps inside the payload), a synthetic cancelled tool result, and state (keys sorted by their bytes in msgpack: \"Step\" before \"agent\").", forkedEv},
		{"thread.deleted: a reason; the time is a whole second, so it is a 4-byte msgpack timestamp.", deletedEv},
		{"thread.undeleted: a reason.", Event(13, "ops-console", events.Undeleted{Reason: "restored by support (ticket 99)"})},
		{"thread.erased: counts of what the purge removed.", Event(14, "agentd/purge", events.Erased{RemovedEvents: 17, LastSeq: 128, Reason: "GDPR erasure request"})},
		{"event.redacted: the sequence and id of the redacted event, the fields redacted, a reason.", Event(15, "agentd/redact", events.Redacted{Seq: 42, EventID: "01972b6e-8a40-7c1d-8e2f-3a4b5c6d7e03", Fields: []string{"content"}, Reason: "GDPR request about one message"})},
	}
}

// goldenCheckpoints returns the checkpoint.saved and checkpoint.writes vectors.
func goldenCheckpoints() []GoldenEvent {
	return []GoldenEvent{
		{"checkpoint.saved: a LangGraph checkpoint of the root graph with its parent, metadata and channel values as value objects (inline JSON, base64 bytes, a blob reference); each of checkpoint, metadata and channels is a msgpack bin holding the writer's JSON text.", Event(16, "@convlog/langgraph", events.CheckpointSaved{
			ID: "1ef4f797-8335-6428-8001-8a1503f9b875", Parent: "1ef4f797-8335-6428-8000-8a1503f9b875",
			Checkpoint: json.RawMessage(`{"type":"json","json":{"v":4,"id":"1ef4f797-8335-6428-8001-8a1503f9b875","ts":"2025-06-01T12:00:16.123Z","channel_versions":{"messages":2,"big":1},"versions_seen":{}}}`),
			Metadata:   json.RawMessage(`{"type":"json","json":{"source":"loop","step":1,"parents":{}}}`),
			Channels: json.RawMessage(`{"messages":{"type":"json","json":[{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"Größe M?"}}]},` +
				`"big":{"type":"json","blob":"lg/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":70000},"raw":{"type":"bytes","base64":"AAEC"}}`),
		})},
		{"checkpoint.writes: a task's pending writes against a checkpoint of a subgraph's namespace, with a negative idx for a special channel.", Event(17, "@convlog/langgraph", events.CheckpointWrites{
			NS: "agent:8a1503f9", Checkpoint: "1ef4f797-8335-6428-8001-8a1503f9b875", Task: "4a7c0d3e-2b1f-5e9a-8c6d-0f1e2d3c4b5a", Path: "~__pregel_pull, agent",
			Writes: json.RawMessage(`[{"idx":0,"channel":"messages","value":{"type":"json","json":[]}},{"idx":-1,"channel":"__error__","value":{"type":"json","json":"boom"}}]`),
		})},
	}
}

// RichTime is the time inside [RichMessages]: nanoseconds, in UTC.
var RichTime = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// RichMessages is a history with every role, every content shape and every
// message field a Restore or Forked payload can carry.
func RichMessages() []events.Message {
	return []events.Message{
		{Role: events.RoleSystem, Content: events.Text("You are terse.")},
		{Role: events.RoleUser, Content: events.Parts(
			events.Part{Type: events.PartText, Text: "what is in this picture? ünïcødé ✓"},
			events.Part{Type: events.PartImage, URL: "https://example.com/cat.png", Detail: "low"},
			events.Part{Type: events.PartImage, Data: "aGVsbG8=", MediaType: "image/png"},
			events.Part{Type: events.PartFile, FileID: "file-123", Filename: "report.pdf", MediaType: "application/pdf"},
		), Name: "alice", Metadata: json.RawMessage(`{"client":"web"}`),
			Seq: 7, EventID: "01959a3c-5e2b-7cc1-9a40-000000000007", Time: RichTime},
		{Role: events.RoleAssistant, Content: events.Content{}, Reasoning: "look it up",
			ToolCalls: []events.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"cat"}`}},
			Agent:     "helper", Model: "gpt-4o", Usage: &events.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
			Metadata: json.RawMessage(`{"finish_reason":"tool_calls"}`)},
		{Role: events.RoleTool, ToolCallID: "call_1", Name: "lookup", Content: events.Text(""), IsError: true,
			Synthetic: true},
		{Role: events.RoleAssistant, Content: events.Text("It is a cat.\r\n\bdone")},
	}
}

// Rich returns one payload of every type, in events.AllTypes order, each
// with as many fields set as it has.
func Rich() []events.Payload {
	created := events.ThreadCreated{
		Owner: "user-9", Agent: "helper", SystemPrompt: Ptr("Be nice.\nAlways."), Title: "Refund <order> & more",
		Metadata: map[string]string{"source": "import", "lang": "de", "ζ": "ω"},
		Replies:  events.RepliesOff, PendingPolicy: events.PendingCancel,
	}
	payloads := []events.Payload{
		created,
		events.ThreadUpdated{Title: Ptr("new title"), SystemPrompt: Ptr(""), Metadata: map[string]string{"lang": "", "tier": "gold"},
			Replies: events.RepliesAuto, Agent: Ptr("other")},
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
		events.Restore{Messages: RichMessages(), Reason: "rewind to checkpoint 3"},
		events.Compaction{UpToSeq: 1234, Summary: events.Text("The user asked for a refund; granted."), Role: events.RoleAssistant},
		events.StateSet{Key: "cart", Value: json.RawMessage(`{"items":[{"sku":"A1","qty":2}],"total":19.99}`)},
		events.StateDeleted{Key: "cart"},
		events.Forked{SourceTenant: "acme", SourceThread: "support-41", SourceSeq: 99, Created: created,
			Messages: RichMessages(),
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
	return payloads
}

// Minimal returns one payload of every type, in events.AllTypes order,
// with only the required fields set (zero values everywhere else).
func Minimal() []events.Payload {
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
	return payloads
}

package schemas

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/convlog/convlog/events"
)

// Fixed envelope values of the fixtures, so that the golden vectors are
// stable.
const (
	fxTenant      = "acme"
	fxThread      = "support-4711"
	fxCorrelation = "turn-2025-06-01-0007"
)

// fxID returns the n-th fixture event id (n from 1 to 255): a UUIDv7
// (version 7, RFC 4122 variant) in canonical lower-case form.
func fxID(n int) string {
	return fmt.Sprintf("01972b6e-8a40-7c1d-8e2f-3a4b5c6d7e%02x", n)
}

// fxTime returns the fixture time of the n-th event: nanosecond precision,
// UTC, so the envelope time is an 8-byte msgpack timestamp.
func fxTime(n int) time.Time {
	return time.Date(2025, 6, 1, 12, 0, n, 123456789, time.UTC)
}

func ptr[T any](v T) *T { return &v }

// fxEvent wraps p in the fixture envelope of event n.
func fxEvent(n int, producer string, p events.Payload) events.Event {
	return events.Event{
		ID:            fxID(n),
		Type:          p.EventType(),
		Tenant:        fxTenant,
		Thread:        fxThread,
		Time:          fxTime(n),
		Producer:      producer,
		SchemaVersion: events.SchemaVersion,
		Payload:       p,
	}
}

// A 1x1 PNG, base64: the inline image of the multimodal example.
const fxPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// terminalOutput is tool output as terminals produce it (the SWE-agent
// transcripts have the like): CR LF line ends, a progress counter that is
// overwritten with backspaces, and non-ASCII text.
const terminalOutput = "$ lookup-order 4711\r\n" +
	"status: delivered (beschädigt)\r\n" +
	"fetching 42%\b\b\b100%\r\n" +
	"Empfänger: Jürgen Groß, 東京都\r\n"

// goldenEvent is one golden vector's event: the file name is its type.
type goldenEvent struct {
	// note says what the vector shows; it is written to the file as
	// "description".
	note  string
	event events.Event
}

// goldenEvents returns one realistic event per event type, in
// events.AllTypes order. They are the source of testdata/golden (-update).
// Raw JSON fields (metadata, state values) are compact JSON text: the JSON
// form of an event always carries them compact, so only compact text
// reproduces the same msgpack bytes from the JSON form.
func goldenEvents() []goldenEvent {
	created := events.ThreadCreated{
		Owner:         "u-1029",
		Agent:         "support-bot",
		SystemPrompt:  ptr("You are Acme's support agent. Antworte auf Deutsch, wenn der Kunde Deutsch schreibt."),
		Title:         "Rückerstattung für Bestellung #4711",
		Metadata:      map[string]string{"plan": "pro", "channel": "web", "locale": "de-DE"},
		Replies:       events.RepliesAuto,
		PendingPolicy: events.PendingCancel,
	}
	createdEv := fxEvent(1, "chat-frontend", created)
	createdEv.CorrelationID = fxCorrelation

	updatedEv := fxEvent(2, "ops-console", events.ThreadUpdated{
		Title:    ptr("Rückerstattung erledigt ✅"),
		Metadata: map[string]string{"status": "resolved", "locale": ""},
		Replies:  events.RepliesOff,
		Agent:    ptr("billing-bot"),
	})

	userEv := fxEvent(3, "chat-frontend", events.UserMessage{
		Content: events.Parts(
			events.Part{Type: events.PartText, Text: "Hallo! Das Paket kam beschädigt an — siehe Fotos und Rechnung. 📦"},
			events.Part{Type: events.PartImage, URL: "https://cdn.example.com/uploads/4711/box.jpg?sig=a1&exp=1748779200", Detail: "high"},
			events.Part{Type: events.PartImage, Data: fxPNG, MediaType: "image/png"},
			events.Part{Type: events.PartFile, FileID: "file-7Qm2xR9kLp", Filename: "rechnung_4711.pdf", MediaType: "application/pdf"},
		),
		Name:     "kunde_1029",
		Metadata: json.RawMessage(`{"client":"web-2.3.1","ip_country":"DE","tags":["damaged","refund"]}`),
	})
	userEv.CorrelationID = fxCorrelation

	assistantEv := fxEvent(4, "agent-worker/support-bot", events.AssistantMessage{
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
		ReplyTo:  fxID(3),
	})
	assistantEv.CausationID = fxID(3)
	assistantEv.CorrelationID = fxCorrelation

	toolEv := fxEvent(5, "tool-runner", events.ToolResult{
		ToolCallID: "call_8f3a",
		Name:       "lookup_order",
		Content:    events.Text(terminalOutput),
	})
	toolEv.CausationID = fxID(4)
	toolEv.CorrelationID = fxCorrelation

	restoreEv := fxEvent(7, "deepagents-checkpointer", events.Restore{
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

	forkedEv := fxEvent(11, "client/fork", events.Forked{
		SourceTenant: fxTenant,
		SourceThread: "support-4700",
		SourceSeq:    9,
		Created: events.ThreadCreated{
			Owner:         "u-1029",
			Agent:         "support-bot",
			SystemPrompt:  ptr(""),
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

	deletedEv := fxEvent(12, "ops-console", events.Deleted{Reason: "user closed the account"})
	deletedEv.Time = time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC) // whole second: 4-byte timestamp

	return []goldenEvent{
		{"thread.created: owner, agent, a system prompt, non-ASCII title, metadata (keys sorted in msgpack), reply mode and pending policy; a correlation id.", createdEv},
		{"thread.updated: pointer fields set, a metadata key removed by an empty value; system_prompt absent (unchanged).", updatedEv},
		{"message.user: multimodal content (text with non-ASCII and emoji, image by URL with detail, image as base64 data, file reference) and raw JSON metadata (msgpack bin).", userEv},
		{"message.assistant: null content with reasoning, two tool calls whose arguments are raw JSON text kept byte for byte (spaces included), usage, model, agent, raw JSON metadata, reply_to, causation and correlation ids.", assistantEv},
		{"tool.result: string content with CR LF line ends, backspace (\\b) bytes and non-ASCII text, as terminal output has it.", toolEv},
		{"thread.reset: a reason.", fxEvent(6, "chat-frontend", events.Reset{Reason: "user asked to start over"})},
		{"thread.restored: a whole history with system, user, assistant (null content, tool call, usage), an error tool result, empty-string content (distinct from null) and metadata.", restoreEv},
		{"thread.compacted: a summary in assistant role standing in for every message up to sequence 42.", fxEvent(8, "summarizer", events.Compaction{
			UpToSeq: 42,
			Summary: events.Text("Zusammenfassung: Kunde meldet beschädigtes Paket (#4711); Rückerstattung über 49,90 € genehmigt."),
			Role:    events.RoleAssistant,
		})},
		{"state.set: a JSON object value (msgpack bin holding compact JSON text).", fxEvent(9, "agent-worker/support-bot", events.StateSet{
			Key:   "cart",
			Value: json.RawMessage(`{"items":[{"sku":"A-1","qty":2}],"total":49.9,"currency":"EUR","note":"Größe M"}`),
		})},
		{"state.deleted: one key.", fxEvent(10, "agent-worker/support-bot", events.StateDeleted{Key: "cart"})},
		{"thread.forked: source thread and sequence, the source's attributes (an explicitly empty system prompt), projected messages with seq, event_id and time (timestamps inside the payload), a synthetic cancelled tool result, and state (keys sorted by their bytes in msgpack: \"Step\" before \"agent\").", forkedEv},
		{"thread.deleted: a reason; the time is a whole second, so it is a 4-byte msgpack timestamp.", deletedEv},
		{"thread.undeleted: a reason.", fxEvent(13, "ops-console", events.Undeleted{Reason: "restored by support (ticket 99)"})},
		{"thread.erased: counts of what the purge removed.", fxEvent(14, "agentd/purge", events.Erased{RemovedEvents: 17, LastSeq: 128, Reason: "GDPR erasure request"})},
		{"event.redacted: the sequence and id of the redacted event, the fields redacted, a reason.", fxEvent(15, "agentd/redact", events.Redacted{Seq: 42, EventID: "01972b6e-8a40-7c1d-8e2f-3a4b5c6d7e03", Fields: []string{"content"}, Reason: "GDPR request about one message"})},
		{"checkpoint.saved: a LangGraph checkpoint of the root graph with its parent, metadata and channel values as value objects (inline JSON, base64 bytes, a blob reference); each of checkpoint, metadata and channels is a msgpack bin holding the writer's JSON text.", fxEvent(16, "@convlog/langgraph", events.CheckpointSaved{
			ID: "1ef4f797-8335-6428-8001-8a1503f9b875", Parent: "1ef4f797-8335-6428-8000-8a1503f9b875",
			Checkpoint: json.RawMessage(`{"type":"json","json":{"v":4,"id":"1ef4f797-8335-6428-8001-8a1503f9b875","ts":"2025-06-01T12:00:16.123Z","channel_versions":{"messages":2,"big":1},"versions_seen":{}}}`),
			Metadata:   json.RawMessage(`{"type":"json","json":{"source":"loop","step":1,"parents":{}}}`),
			Channels: json.RawMessage(`{"messages":{"type":"json","json":[{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"Größe M?"}}]},` +
				`"big":{"type":"json","blob":"lg/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":70000},"raw":{"type":"bytes","base64":"AAEC"}}`),
		})},
		{"checkpoint.writes: a task's pending writes against a checkpoint of a subgraph's namespace, with a negative idx for a special channel.", fxEvent(17, "@convlog/langgraph", events.CheckpointWrites{
			NS: "agent:8a1503f9", Checkpoint: "1ef4f797-8335-6428-8001-8a1503f9b875", Task: "4a7c0d3e-2b1f-5e9a-8c6d-0f1e2d3c4b5a", Path: "~__pregel_pull, agent",
			Writes: json.RawMessage(`[{"idx":0,"channel":"messages","value":{"type":"json","json":[]}},{"idx":-1,"channel":"__error__","value":{"type":"json","json":"boom"}}]`),
		})},
	}
}

// validEvents returns Go-built events that must encode to schema-valid JSON:
// the golden events and variants that exercise the optional and edge shapes
// of every type.
func validEvents() []struct {
	name  string
	event events.Event
} {
	type tc = struct {
		name  string
		event events.Event
	}
	var out []tc
	for _, g := range goldenEvents() {
		out = append(out, tc{"the golden " + string(g.event.Type) + " event is valid", g.event})
	}
	nonUTC := fxEvent(1, "", events.ThreadCreated{})
	nonUTC.Time = time.Date(2025, 6, 1, 14, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	return append(out,
		tc{"an empty thread.created payload with an empty producer is valid", fxEvent(1, "", events.ThreadCreated{})},
		tc{"an event created in a non-UTC zone is valid (it is written in UTC)", nonUTC},
		tc{"a thread.updated with an empty title is valid", fxEvent(2, "p", events.ThreadUpdated{Title: ptr("")})},
		tc{"a user message with plain text is valid", fxEvent(3, "p", events.UserMessage{Content: events.Text("hi")})},
		tc{"a user message with empty text is valid", fxEvent(3, "p", events.UserMessage{Content: events.Text("")})},
		tc{"a user message with an empty parts list is valid", fxEvent(3, "p", events.UserMessage{Content: events.Parts()})},
		tc{"a user message with an image data URL and a file by URL is valid", fxEvent(3, "p", events.UserMessage{Content: events.Parts(
			events.Part{Type: events.PartImage, URL: "data:image/png;base64," + fxPNG, Detail: "low"},
			events.Part{Type: events.PartFile, URL: "s3://bucket/key.pdf"},
			events.Part{Type: events.PartFile, Data: "JVBERi0xLjQK", Filename: "a.pdf"},
			events.Part{Type: events.PartText},
		)})},
		tc{"an assistant message with text only is valid", fxEvent(4, "p", events.AssistantMessage{Content: events.Text("Gern geschehen!")})},
		tc{"an assistant message with null content and only reasoning is valid", fxEvent(4, "p", events.AssistantMessage{Reasoning: "thinking"})},
		tc{"an assistant message with empty tool arguments object is valid", fxEvent(4, "p", events.AssistantMessage{
			ToolCalls: []events.ToolCall{{ID: "c", Name: "now", Arguments: "{}"}}, Metadata: json.RawMessage(`null`)})},
		tc{"a tool result with null content and the error flag is valid", fxEvent(5, "p", events.ToolResult{ToolCallID: "c", IsError: true})},
		tc{"a tool result with an image part is valid", fxEvent(5, "p", events.ToolResult{ToolCallID: "c",
			Content: events.Parts(events.Part{Type: events.PartImage, Data: fxPNG, MediaType: "image/png"})})},
		tc{"a reset without a reason is valid", fxEvent(6, "p", events.Reset{})},
		tc{"a restore to an empty history is valid", fxEvent(7, "p", events.Restore{Messages: []events.Message{}})},
		tc{"a restore with a nil history (JSON null) is valid", fxEvent(7, "p", events.Restore{})},
		tc{"a compaction with a parts summary and no role is valid", fxEvent(8, "p", events.Compaction{UpToSeq: 1,
			Summary: events.Parts(events.Part{Type: events.PartText, Text: "summary"})})},
		tc{"a state.set with a null value is valid", fxEvent(9, "p", events.StateSet{Key: "k", Value: json.RawMessage(`null`)})},
		tc{"a state.set with a string value is valid", fxEvent(9, "p", events.StateSet{Key: "ключ", Value: json.RawMessage(`"значение"`)})},
		tc{"a fork with empty attributes and no state is valid", fxEvent(11, "p", events.Forked{SourceTenant: "default", SourceThread: "t", Messages: []events.Message{}})},
		tc{"a delete without a reason is valid", fxEvent(12, "p", events.Deleted{})},
		tc{"an undelete without a reason is valid", fxEvent(13, "p", events.Undeleted{})},
		tc{"an erasure of nothing is valid", fxEvent(14, "p", events.Erased{})},
		tc{"a redaction of every event up to a sequence (retention)", fxEvent(15, "p", events.Redacted{UpToSeq: 40, Reason: "retention: keep 720h"})},
		tc{"a checkpoint with only an id and a checkpoint value is valid", fxEvent(16, "p", events.CheckpointSaved{ID: "c", Checkpoint: json.RawMessage(`{"type":"json","json":{}}`)})},
		tc{"a checkpoint with the graph's new messages is valid", fxEvent(16, "p", events.CheckpointSaved{ID: "c", Checkpoint: json.RawMessage(`{"type":"json","json":{}}`),
			Messages: []events.Message{{Role: events.RoleUser, Content: events.Text("hi")}, {Role: events.RoleAssistant, Content: events.Text("hello")}}})},
		tc{"checkpoint writes with no write are valid", fxEvent(17, "p", events.CheckpointWrites{Checkpoint: "c", Task: "t", Writes: json.RawMessage(`[]`)})},
	)
}

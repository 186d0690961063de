package schemas

import (
	"encoding/json"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/eventfixtures"
)

// fxEvent wraps a payload in the fixture envelope of event n
// (eventfixtures.Event).
var fxEvent = eventfixtures.Event

const fxPNG = eventfixtures.PNG

func ptr[T any](v T) *T { return &v }

// goldenEvents is eventfixtures.Golden.
func goldenEvents() []eventfixtures.GoldenEvent { return eventfixtures.Golden() }

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
		out = append(out, tc{"the golden " + string(g.Event.Type) + " event is valid", g.Event})
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

package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// of returns the rich sample event of type typ after applying edit to it.
func of(typ events.Type, edit func(e *events.Event)) events.Event {
	e := sampleEvents()[typ]
	if edit != nil {
		edit(&e)
	}
	return e
}

// forked returns the sample thread.forked event with its payload changed
// by edit.
func forked(edit func(f *events.Forked)) events.Event {
	return of(events.TypeForked, func(e *events.Event) {
		f := e.Payload.(events.Forked)
		edit(&f)
		e.Payload = f
	})
}

// withPayload returns a valid envelope around p.
func withPayload(p events.Payload) events.Event { return envelope(p) }

func assistant(calls ...events.ToolCall) events.Event {
	return withPayload(events.AssistantMessage{ToolCalls: calls})
}

func restore(ms ...events.Message) events.Event { return withPayload(events.Restore{Messages: ms}) }

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", 257)
	okCall := events.ToolCall{ID: "call_1", Name: "f", Arguments: `{}`}
	cases := []struct {
		name  string
		event events.Event
		// field is the ValidationError's Field; idKind, when set, means an
		// *IDError of that kind is expected instead.
		field  string
		idKind string
		reason string // a substring of the error text
	}{
		// Valid events.
		{name: "a tool-call-only assistant turn with null content is valid", event: assistant(okCall)},
		{name: "a reasoning-only assistant turn is valid", event: withPayload(events.AssistantMessage{Reasoning: "hmm"})},
		{name: "an assistant turn with empty text is valid", event: withPayload(events.AssistantMessage{Content: events.Text("")})},
		{name: "a tool result with empty content is valid (the think tool)", event: withPayload(events.ToolResult{ToolCallID: "c", Content: events.Text("")})},
		{name: "a thread update may blank a metadata key to remove it", event: withPayload(events.ThreadUpdated{Metadata: map[string]string{"k": ""}})},
		{name: "a state value may be JSON null", event: withPayload(events.StateSet{Key: "k", Value: json.RawMessage("null")})},
		{name: "a deterministic UUIDv5 id (as imports use) is valid", event: of(events.TypeReset, func(e *events.Event) { e.ID = "8c5b5d6e-1f2a-5b3c-9d4e-0f1a2b3c4d5e" })},
		{name: "content with CR, backspace and non-ASCII text is valid", event: withPayload(events.ToolResult{ToolCallID: "c", Content: events.Text("a\r\n\b é 漢")})},

		// Envelope.
		{name: "an event without an id is invalid", event: of(events.TypeReset, func(e *events.Event) { e.ID = "" }), field: "id", reason: "required"},
		{name: "an upper-case id is invalid", event: of(events.TypeReset, func(e *events.Event) { e.ID = strings.ToUpper(e.ID) }), field: "id", reason: "canonical"},
		{name: "an id in braces is invalid", event: of(events.TypeReset, func(e *events.Event) { e.ID = "{" + e.ID + "}" }), field: "id"},
		{name: "an id that is not a UUID is invalid", event: of(events.TypeReset, func(e *events.Event) { e.ID = "evt-1" }), field: "id"},
		{name: "an event without a type is invalid", event: of(events.TypeReset, func(e *events.Event) { e.Type = "" }), field: "type"},
		{name: "an unknown type is invalid", event: of(events.TypeReset, func(e *events.Event) { e.Type = "thread.exploded" }), field: "type", reason: "not a known event type"},
		{name: "a payload of another type than the envelope names is invalid", event: of(events.TypeReset, func(e *events.Event) { e.Type = events.TypeDeleted }), field: "type", reason: `the payload is a "thread.reset"`},
		{name: "an empty tenant is an id error", event: of(events.TypeReset, func(e *events.Event) { e.Tenant = "" }), idKind: "tenant", reason: "must not be empty"},
		{name: "a tenant with a dot is an id error naming the dot", event: of(events.TypeReset, func(e *events.Event) { e.Tenant = "acme.eu" }), idKind: "tenant", reason: `character '.' (U+002E) at byte 4`},
		{name: "a thread id with a wildcard is an id error naming it", event: of(events.TypeReset, func(e *events.Event) { e.Thread = "t*" }), idKind: "thread id", reason: `character '*'`},
		{name: "a thread id with a space is an id error", event: of(events.TypeReset, func(e *events.Event) { e.Thread = "my thread" }), idKind: "thread id", reason: `character ' ' (U+0020) at byte 2`},
		{name: "a thread id with an accent names the whole character", event: of(events.TypeReset, func(e *events.Event) { e.Thread = "café" }), idKind: "thread id", reason: `character 'é' (U+00E9) at byte 3`},
		{name: "a thread id longer than 128 bytes is an id error", event: of(events.TypeReset, func(e *events.Event) { e.Thread = strings.Repeat("a", 129) }), idKind: "thread id", reason: "129 bytes, the limit is 128"},
		{name: "a zero time is invalid", event: of(events.TypeReset, func(e *events.Event) { e.Time = time.Time{} }), field: "time"},
		{name: "schema version 0 is invalid", event: of(events.TypeReset, func(e *events.Event) { e.SchemaVersion = 0 }), field: "v"},
		{name: "a newer schema version is invalid", event: of(events.TypeReset, func(e *events.Event) { e.SchemaVersion = events.SchemaVersion + 1 }), field: "v"},
		{name: "a producer over the name limit is invalid", event: of(events.TypeReset, func(e *events.Event) { e.Producer = long }), field: "producer", reason: "257 bytes"},
		{name: "an event without payload is invalid", event: of(events.TypeReset, func(e *events.Event) { e.Payload = nil }), field: "payload"},

		// Messages.
		{name: "a user message with null content is invalid", event: withPayload(events.UserMessage{}), field: "payload.content"},
		{name: "a user message that is not UTF-8 is invalid", event: withPayload(events.UserMessage{Content: events.Text("a\xffb")}), field: "payload.content", reason: "UTF-8"},
		{name: "user metadata that is not JSON is invalid", event: withPayload(events.UserMessage{Content: events.Text("x"), Metadata: json.RawMessage(`{"a":`)}), field: "payload.metadata"},
		{name: "a user name over the limit is invalid", event: withPayload(events.UserMessage{Content: events.Text("x"), Name: long}), field: "payload.name"},
		{name: "an empty assistant message is invalid", event: withPayload(events.AssistantMessage{}), field: "payload.content", reason: "needs content, reasoning or tool calls"},
		{name: "the second tool call with malformed arguments is named", event: assistant(okCall, events.ToolCall{ID: "call_2", Name: "g", Arguments: `{"a":1`}), field: "payload.tool_calls[1].arguments", reason: "not well-formed JSON"},
		{name: "empty arguments are not JSON", event: assistant(events.ToolCall{ID: "c", Name: "f"}), field: "payload.tool_calls[0].arguments"},
		{name: "a tool call without id is invalid", event: assistant(okCall, events.ToolCall{Name: "f", Arguments: `{}`}), field: "payload.tool_calls[1].id", reason: "required"},
		{name: "a call id used twice in one message is invalid", event: assistant(okCall, okCall), field: "payload.tool_calls[1].id", reason: "used twice"},
		{name: "a tool call without name is invalid", event: assistant(events.ToolCall{ID: "c", Arguments: `{}`}), field: "payload.tool_calls[0].name"},
		{name: "a tool name over the limit is invalid", event: assistant(events.ToolCall{ID: "c", Name: long, Arguments: `{}`}), field: "payload.tool_calls[0].name"},
		{name: "a model name over the limit names the model", event: withPayload(events.AssistantMessage{Content: events.Text("x"), Model: long}), field: "payload.model"},
		{name: "an agent name over the limit names the agent", event: withPayload(events.AssistantMessage{Content: events.Text("x"), Agent: long}), field: "payload.agent"},
		{name: "assistant metadata that is not JSON is invalid", event: withPayload(events.AssistantMessage{Content: events.Text("x"), Metadata: json.RawMessage(`nope`)}), field: "payload.metadata"},
		{name: "a tool result without tool_call_id is invalid", event: withPayload(events.ToolResult{Content: events.Text("x")}), field: "payload.tool_call_id"},
		{name: "a tool result with a tool name over the limit is invalid", event: withPayload(events.ToolResult{ToolCallID: "c", Name: long}), field: "payload.name"},
		{name: "an image part with both url and data is invalid", event: withPayload(events.UserMessage{Content: events.Parts(events.Part{Type: events.PartImage, URL: "https://x", Data: "AA==", MediaType: "image/png"})}), field: "payload.content[0]", reason: "exactly one of url and data"},
		{name: "an image part with data but no media type is invalid", event: withPayload(events.UserMessage{Content: events.Parts(events.Part{Type: events.PartText, Text: "x"}, events.Part{Type: events.PartImage, Data: "AA=="})}), field: "payload.content[1].media_type"},
		{name: "a file part with no reference is invalid", event: withPayload(events.ToolResult{ToolCallID: "c", Content: events.Parts(events.Part{Type: events.PartFile, Filename: "a.pdf"})}), field: "payload.content[0]"},
		{name: "a part of unknown type is invalid", event: withPayload(events.UserMessage{Content: events.Parts(events.Part{Type: "audio"})}), field: "payload.content[0].type"},
		{name: "a text part that is not UTF-8 is invalid", event: withPayload(events.UserMessage{Content: events.Parts(events.Part{Type: events.PartText, Text: "\xc3"})}), field: "payload.content[0].text"},

		// Every string must be UTF-8 and every time must have an RFC 3339
		// form, or the event has no faithful JSON form.
		{name: "a producer that is not UTF-8 is invalid", event: of(events.TypeReset, func(e *events.Event) { e.Producer = "p\xff" }), field: "producer"},
		{name: "a causation id that is not UTF-8 is invalid", event: of(events.TypeReset, func(e *events.Event) { e.CausationID = "\xc7" }), field: "causation_id"},
		{name: "a time after the year 9999 is invalid", event: of(events.TypeReset, func(e *events.Event) { e.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), field: "time", reason: "year 10000"},
		{name: "a reason that is not UTF-8 is invalid", event: withPayload(events.Reset{Reason: "\xff"}), field: "payload.reason"},
		{name: "a tool call id that is not UTF-8 is named by its path", event: assistant(okCall, events.ToolCall{ID: "c\xff", Name: "f", Arguments: "{}"}), field: "payload.tool_calls[1].id"},
		{name: "arguments with a string that is not UTF-8 are invalid", event: assistant(events.ToolCall{ID: "c", Name: "f", Arguments: "{\"a\":\"\xff\"}"}), field: "payload.tool_calls[0].arguments", reason: "UTF-8"},
		{name: "metadata JSON with a string that is not UTF-8 is invalid", event: withPayload(events.UserMessage{Content: events.Text("x"), Metadata: json.RawMessage("\"\xff\"")}), field: "payload.metadata", reason: "UTF-8"},
		{name: "an image URL that is not UTF-8 is invalid", event: withPayload(events.UserMessage{Content: events.Parts(events.Part{Type: events.PartImage, URL: "https://x/\xff"})}), field: "payload.content[0].url"},
		{name: "a restored message time after 9999 is invalid", event: restore(events.Message{Role: events.RoleUser, Content: events.Text("x"), Time: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}), field: "payload.messages[0].time"},
		{name: "a restored message name that is not UTF-8 is invalid", event: restore(events.Message{Role: events.RoleUser, Content: events.Text("x"), Name: "\xff"}), field: "payload.messages[0].name"},
		{name: "a fork's state key that is not UTF-8 is invalid", event: forked(func(f *events.Forked) { f.State = map[string]json.RawMessage{"\xff": json.RawMessage("1")} }), field: `payload.state["\xff"]`},
		{name: "a fork's owner that is not UTF-8 names the nested field", event: forked(func(f *events.Forked) { f.Created.Owner = "\xff" }), field: "payload.created.owner"},
		{name: "a system prompt update that is not UTF-8 is invalid", event: withPayload(events.ThreadUpdated{SystemPrompt: strp("\xff")}), field: "payload.system_prompt"},

		// Thread, state, history payloads.
		{name: "an unknown reply mode is invalid", event: withPayload(events.ThreadCreated{Replies: "sometimes"}), field: "payload.replies"},
		{name: "an unknown pending policy is invalid", event: withPayload(events.ThreadCreated{PendingPolicy: "merge"}), field: "payload.pending_policy"},
		{name: "an empty metadata value on thread creation is invalid", event: withPayload(events.ThreadCreated{Metadata: map[string]string{"k": ""}}), field: `payload.metadata["k"]`},
		{name: "an empty metadata key is invalid", event: withPayload(events.ThreadUpdated{Metadata: map[string]string{"": "v"}}), field: "payload.metadata"},
		{name: "a system prompt that is not UTF-8 is invalid", event: withPayload(events.ThreadCreated{SystemPrompt: strp("\xff")}), field: "payload.system_prompt"},
		{name: "a thread update with an unknown reply mode is invalid", event: withPayload(events.ThreadUpdated{Replies: "never"}), field: "payload.replies"},
		{name: "a compaction up to sequence 0 is invalid", event: withPayload(events.Compaction{Summary: events.Text("s")}), field: "payload.up_to_seq"},
		{name: "a compaction summary in the tool role is invalid", event: withPayload(events.Compaction{UpToSeq: 1, Summary: events.Text("s"), Role: events.RoleTool}), field: "payload.role"},
		{name: "a compaction without summary is invalid", event: withPayload(events.Compaction{UpToSeq: 1}), field: "payload.summary"},
		{name: "setting state without a key is invalid", event: withPayload(events.StateSet{Value: json.RawMessage(`1`)}), field: "payload.key"},
		{name: "setting state without a value is invalid", event: withPayload(events.StateSet{Key: "k"}), field: "payload.value", reason: "use null for null"},
		{name: "a checkpoint without an id is invalid", event: withPayload(events.CheckpointSaved{Checkpoint: json.RawMessage(`{"type":"json"}`)}), field: "payload.id"},
		{name: "a checkpoint that is not a value object is invalid", event: withPayload(events.CheckpointSaved{ID: "c", Checkpoint: json.RawMessage(`[1]`)}), field: "payload.checkpoint"},
		{name: "a checkpoint channel that is not a value object is invalid", event: withPayload(events.CheckpointSaved{ID: "c", Checkpoint: json.RawMessage(`{}`), Channels: json.RawMessage(`{"x":1}`)}), field: "payload.channels[x]"},
		{name: "checkpoint writes that are not an array are invalid", event: withPayload(events.CheckpointWrites{Checkpoint: "c", Task: "t", Writes: json.RawMessage(`{}`)}), field: "payload.writes"},
		{name: "checkpoint writes without a task are invalid", event: withPayload(events.CheckpointWrites{Checkpoint: "c", Writes: json.RawMessage(`[]`)}), field: "payload.task"},
		{name: "setting state to malformed JSON is invalid", event: withPayload(events.StateSet{Key: "k", Value: json.RawMessage(`{'a':1}`)}), field: "payload.value"},
		{name: "deleting a state key over the limit is invalid", event: withPayload(events.StateDeleted{Key: long}), field: "payload.key"},
		{name: "a restored message with an unknown role is invalid", event: restore(events.Message{Role: events.RoleUser, Content: events.Text("x")}, events.Message{Role: "robot"}), field: "payload.messages[1].role"},
		{name: "a restored tool message without tool_call_id is invalid", event: restore(events.Message{Role: events.RoleTool, Content: events.Text("x")}), field: "payload.messages[0].tool_call_id"},
		{name: "a restored assistant message with bad arguments names the call", event: restore(events.Message{Role: events.RoleAssistant, ToolCalls: []events.ToolCall{okCall, {ID: "c2", Name: "f", Arguments: "[1,"}}}), field: "payload.messages[0].tool_calls[1].arguments"},
		{name: "restored metadata that is not JSON is invalid", event: restore(events.Message{Role: events.RoleUser, Content: events.Text("x"), Metadata: json.RawMessage("{")}), field: "payload.messages[0].metadata"},
		{name: "a fork from a bad source thread is invalid", event: forked(func(f *events.Forked) { f.SourceThread = "a.b" }), field: "payload.source_thread", reason: `character '.'`},
		{name: "a fork from a bad source tenant is invalid", event: forked(func(f *events.Forked) { f.SourceTenant = "" }), field: "payload.source_tenant"},
		{name: "a fork whose created attributes are invalid names the nested field", event: forked(func(f *events.Forked) { f.Created.PendingPolicy = "merge" }), field: "payload.created.pending_policy"},
		{name: "a fork with malformed state names the key", event: forked(func(f *events.Forked) { f.State = map[string]json.RawMessage{"cart": json.RawMessage("{")} }), field: `payload.state["cart"]`},
		{name: "a fork with an invalid message names it", event: forked(func(f *events.Forked) { f.Messages = append(f.Messages, events.Message{Role: events.RoleTool}) }), field: "payload.messages[5].tool_call_id"},
	}
	require.GreaterOrEqual(t, len(cases), 20)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.event.Validate()
			if c.field == "" && c.idKind == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if c.reason != "" {
				assert.Contains(t, err.Error(), c.reason)
			}
			if c.idKind != "" {
				var ie *events.IDError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, c.idKind, ie.Kind)
				require.ErrorIs(t, err, events.ErrInvalidID)
				require.False(t, errors.Is(err, events.ErrInvalid))
				return
			}
			var ve *events.ValidationError
			require.ErrorAs(t, err, &ve)
			require.ErrorIs(t, err, events.ErrInvalid)
			assert.Equal(t, c.field, ve.Field)
			assert.Equal(t, c.event.ID, ve.EventID)
			assert.Equal(t, c.event.Type, ve.Type)
			assert.NotEmpty(t, ve.Reason)
			assert.Contains(t, err.Error(), c.field, "the message names the field")
			if c.event.ID != "" {
				assert.Contains(t, err.Error(), c.event.ID, "the message names the event")
			}
		})
	}
}

func TestValidateLimitsAppliesTheGivenLimits(t *testing.T) {
	l := events.Limits{MaxToolCalls: 1, MaxNameLen: 16, MaxMessages: 2} // the sample producer has 14 bytes
	cases := []struct {
		name  string
		event events.Event
		field string
	}{
		{"two tool calls exceed a limit of one", assistant(
			events.ToolCall{ID: "a", Name: "f", Arguments: "{}"}, events.ToolCall{ID: "b", Name: "f", Arguments: "{}"}), "payload.tool_calls"},
		{"three restored messages exceed a limit of two", restore(
			events.Message{Role: events.RoleUser, Content: events.Text("1")},
			events.Message{Role: events.RoleUser, Content: events.Text("2")},
			events.Message{Role: events.RoleUser, Content: events.Text("3")}), "payload.messages"},
		{"a 17-byte state key exceeds a limit of 16", withPayload(events.StateDeleted{Key: strings.Repeat("k", 17)}), "payload.key"},
		{"a 17-byte tool call id exceeds a limit of 16", withPayload(events.ToolResult{ToolCallID: strings.Repeat("c", 17)}), "payload.tool_call_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.event.Validate(), "valid under the default limits")
			err := c.event.ValidateLimits(l)
			var ve *events.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, c.field, ve.Field)
		})
	}
	assert.Equal(t, events.Limits{MaxToolCalls: 128, MaxNameLen: 256, MaxMessages: 100_000}, events.DefaultLimits())
}

func TestValidationErrorsReadWell(t *testing.T) {
	err := assistant(events.ToolCall{ID: "c", Name: "f", Arguments: "{"}).Validate()
	assert.Equal(t, `events: invalid message.assistant event 01959a3c-5e2b-7cc1-9a40-3b1d2e4f5a6b: payload.tool_calls[0].arguments: is not well-formed JSON: "{"`, err.Error())

	e := of(events.TypeReset, func(e *events.Event) { e.ID = "" })
	assert.Contains(t, e.Validate().Error(), "<no id>")

	err = events.ValidateTenant("a/b")
	assert.Equal(t, `events: invalid tenant "a/b": character '/' (U+002F) at byte 1 is not allowed (use A-Z, a-z, 0-9, '-' and '_')`, err.Error())
	err = events.ValidateThreadID("ab\xff")
	assert.Contains(t, err.Error(), "byte 0xff (not UTF-8) at byte 2")
}

// impostor is a payload type of another package that claims a registered
// type's name.
type impostor struct{ Reason string }

func (impostor) EventType() events.Type { return events.TypeReset }

// A payload is valid without rules of its own only when it is the
// registered payload type of its event type.
func TestAPayloadOfAnotherGoTypeIsNotTheRegisteredOne(t *testing.T) {
	require.NoError(t, withPayload(events.Reset{Reason: "r"}).Validate())
	var ve *events.ValidationError
	require.ErrorAs(t, withPayload(impostor{Reason: "r"}).Validate(), &ve)
	assert.Contains(t, ve.Reason, "unknown payload type events_test.impostor")
}

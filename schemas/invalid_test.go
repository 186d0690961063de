package schemas

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// obj is a decoded JSON object.
type obj = map[string]any

// jsonObject returns the JSON form of e as a mutable map.
func jsonObject(t *testing.T, e events.Event) obj {
	t.Helper()
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	var m obj
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m))
	return m
}

// at returns the object at a path of keys and array indexes inside m.
func at(m obj, path ...any) obj {
	var v any = m
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(obj)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v.(obj)
}

func TestSchemaRejectsInvalidEvents(t *testing.T) {
	g := goldenEvents()
	byType := map[events.Type]events.Event{}
	for _, x := range g {
		byType[x.Event.Type] = x.Event
	}
	cases := []struct {
		name   string
		base   events.Type
		mutate func(m obj)
		// where is the instance location (JSON pointer) the schema must
		// report among its errors.
		where string
		// goAccepts marks a case that events.UnmarshalJSON + Validate accept
		// (Go ignores unknown fields); the schema is stricter on purpose.
		goAccepts bool
	}{
		{"an event without an id is rejected", events.TypeUserMessage,
			func(m obj) { delete(m, "id") }, "", false},
		{"an id in upper case is rejected", events.TypeUserMessage,
			func(m obj) { m["id"] = strings.ToUpper(m["id"].(string)) }, "/id", false},
		{"an id that is not a UUID is rejected", events.TypeUserMessage,
			func(m obj) { m["id"] = "msg-42" }, "/id", false},
		{"a tenant with a dot is rejected", events.TypeUserMessage,
			func(m obj) { m["tenant"] = "acme.eu" }, "/tenant", false},
		{"a thread id with a space is rejected", events.TypeUserMessage,
			func(m obj) { m["thread"] = "support 4711" }, "/thread", false},
		{"a thread id of 129 characters is rejected", events.TypeUserMessage,
			func(m obj) { m["thread"] = strings.Repeat("t", 129) }, "/thread", false},
		{"an empty tenant is rejected", events.TypeUserMessage,
			func(m obj) { m["tenant"] = "" }, "/tenant", false},
		{"an unknown type is rejected", events.TypeUserMessage,
			func(m obj) { m["type"] = "message.system" }, "/type", false},
		{"a time without a zone is rejected", events.TypeUserMessage,
			func(m obj) { m["time"] = "2025-06-01T12:00:03.123456789" }, "/time", false},
		{"a time that is not a date is rejected", events.TypeUserMessage,
			func(m obj) { m["time"] = "yesterday" }, "/time", false},
		{"a missing time is rejected", events.TypeUserMessage,
			func(m obj) { delete(m, "time") }, "", false},
		{"schema version 2 is rejected", events.TypeUserMessage,
			func(m obj) { m["v"] = 2 }, "/v", false},
		{"schema version 0 is rejected", events.TypeUserMessage,
			func(m obj) { m["v"] = 0 }, "/v", false},
		{"a producer of 300 characters is rejected", events.TypeUserMessage,
			func(m obj) { m["producer"] = strings.Repeat("p", 300) }, "/producer", false},
		{"a missing payload is rejected", events.TypeReset,
			func(m obj) { delete(m, "payload") }, "", false},
		{"a null payload is rejected", events.TypeReset,
			func(m obj) { m["payload"] = nil }, "/payload", false},
		{"content as a number is rejected", events.TypeUserMessage,
			func(m obj) { at(m, "payload")["content"] = 42 }, "/payload/content", false},
		{"content as an object is rejected", events.TypeToolResult,
			func(m obj) { at(m, "payload")["content"] = obj{"text": "hi"} }, "/payload/content", false},
		{"a user message with null content is rejected", events.TypeUserMessage,
			func(m obj) { at(m, "payload")["content"] = nil }, "/payload/content", false},
		{"a user message without content is rejected", events.TypeUserMessage,
			func(m obj) { delete(at(m, "payload"), "content") }, "/payload", false},
		{"a part of unknown type is rejected", events.TypeUserMessage,
			func(m obj) { at(m, "payload", "content", 0)["type"] = "audio" }, "/payload/content/0/type", false},
		{"an image part with both url and data is rejected", events.TypeUserMessage,
			func(m obj) { at(m, "payload", "content", 1)["data"] = fxPNG }, "/payload/content/1", false},
		{"an image part with neither url nor data is rejected", events.TypeUserMessage,
			func(m obj) { delete(at(m, "payload", "content", 1), "url") }, "/payload/content/1", false},
		{"an image part with base64 data but no media type is rejected", events.TypeUserMessage,
			func(m obj) { delete(at(m, "payload", "content", 2), "media_type") }, "/payload/content/2", false},
		{"a file part without file_id, url or data is rejected", events.TypeUserMessage,
			func(m obj) { delete(at(m, "payload", "content", 3), "file_id") }, "/payload/content/3", false},
		{"a tool call without a name is rejected", events.TypeAssistantMessage,
			func(m obj) { delete(at(m, "payload", "tool_calls", 0), "name") }, "/payload/tool_calls/0", false},
		{"a tool call with an empty id is rejected", events.TypeAssistantMessage,
			func(m obj) { at(m, "payload", "tool_calls", 1)["id"] = "" }, "/payload/tool_calls/1/id", false},
		{"tool call arguments that are not JSON are rejected", events.TypeAssistantMessage,
			func(m obj) { at(m, "payload", "tool_calls", 0)["arguments"] = `{"order_id": 4711` }, "/payload/tool_calls/0/arguments", false},
		{"tool call arguments as a JSON object instead of a string are rejected", events.TypeAssistantMessage,
			func(m obj) { at(m, "payload", "tool_calls", 0)["arguments"] = obj{"order_id": "4711"} }, "/payload/tool_calls/0/arguments", false},
		{"an assistant turn with null content and nothing else is rejected", events.TypeAssistantMessage,
			func(m obj) { p := at(m, "payload"); delete(p, "reasoning"); delete(p, "tool_calls") }, "/payload", false},
		{"negative token usage is rejected", events.TypeAssistantMessage,
			func(m obj) { at(m, "payload", "usage")["output_tokens"] = -1 }, "/payload/usage/output_tokens", true},
		{"a misspelled payload field is rejected (Go would drop it silently)", events.TypeAssistantMessage,
			func(m obj) { p := at(m, "payload"); p["toolCalls"] = p["tool_calls"]; delete(p, "tool_calls") }, "/payload", true},
		{"a payload of another type is rejected (Go would drop its fields silently)", events.TypeReset,
			func(m obj) { m["payload"] = obj{"content": "hi"} }, "/payload", true},
		{"an unknown envelope field is rejected", events.TypeReset,
			func(m obj) { m["seq"] = 7 }, "", true},
		{"a tool result without tool_call_id is rejected", events.TypeToolResult,
			func(m obj) { delete(at(m, "payload"), "tool_call_id") }, "/payload", false},
		{"a tool message in a restore without tool_call_id is rejected", events.TypeRestore,
			func(m obj) { delete(at(m, "payload", "messages", 3), "tool_call_id") }, "/payload/messages/3", false},
		{"a message with role developer is rejected", events.TypeRestore,
			func(m obj) { at(m, "payload", "messages", 0)["role"] = "developer" }, "/payload/messages/0/role", false},
		{"a restore without messages is rejected", events.TypeRestore,
			func(m obj) { delete(at(m, "payload"), "messages") }, "/payload", true},
		{"a compaction up to sequence 0 is rejected", events.TypeCompaction,
			func(m obj) { at(m, "payload")["up_to_seq"] = 0 }, "/payload/up_to_seq", false},
		{"a compaction with a null summary is rejected", events.TypeCompaction,
			func(m obj) { at(m, "payload")["summary"] = nil }, "/payload/summary", false},
		{"a compaction in tool role is rejected", events.TypeCompaction,
			func(m obj) { at(m, "payload")["role"] = "tool" }, "/payload/role", false},
		{"a state.set without a value is rejected", events.TypeStateSet,
			func(m obj) { delete(at(m, "payload"), "value") }, "/payload", false},
		{"a state.set with an empty key is rejected", events.TypeStateSet,
			func(m obj) { at(m, "payload")["key"] = "" }, "/payload/key", false},
		{"thread metadata with an empty value is rejected", events.TypeThreadCreated,
			func(m obj) { at(m, "payload", "metadata")["plan"] = "" }, "/payload/metadata/plan", false},
		{"thread metadata with a non-string value is rejected", events.TypeThreadCreated,
			func(m obj) { at(m, "payload", "metadata")["plan"] = 3 }, "/payload/metadata/plan", false},
		{"an unknown reply mode is rejected", events.TypeThreadCreated,
			func(m obj) { at(m, "payload")["replies"] = "sometimes" }, "/payload/replies", false},
		{"an unknown pending policy is rejected", events.TypeThreadCreated,
			func(m obj) { at(m, "payload")["pending_policy"] = "ignore" }, "/payload/pending_policy", false},
		{"a fork from a tenant with a slash is rejected", events.TypeForked,
			func(m obj) { at(m, "payload")["source_tenant"] = "acme/eu" }, "/payload/source_tenant", false},
		{"a fork whose attributes have a bad reply mode is rejected", events.TypeForked,
			func(m obj) { at(m, "payload", "created")["replies"] = "never" }, "/payload/created/replies", false},
		{"an erasure without counts is rejected", events.TypeErased,
			func(m obj) { delete(at(m, "payload"), "removed_events") }, "/payload", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, ok := byType[c.base]
			require.True(t, ok)
			m := jsonObject(t, base)
			c.mutate(m)
			b, err := json.Marshal(m)
			require.NoError(t, err)

			err = validateJSON(t, b)
			require.Error(t, err, "the schema must reject %s", b)
			require.Contains(t, errorLocations(err), c.where, "the schema must point at %q: %v", c.where, err)

			var e events.Event
			goErr := e.UnmarshalJSON(b)
			if goErr == nil {
				goErr = e.Validate()
			}
			if c.goAccepts {
				require.NoError(t, goErr, "Go is expected to accept this (the schema is stricter)")
			} else {
				require.Error(t, goErr, "the schema and Go must agree that this is invalid")
			}
		})
	}
}

package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendBodyProblems pins the whole answer (status, type, field,
// detail) of an append body that is refused, for the ways an event object
// and a checkpoint payload can be wrong, and that opaque JSON values of a
// checkpoint are taken as they are.
func TestAppendBodyProblems(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	th := e.createThread(map[string]any{"replies": "off"})
	path := "/v1/threads/" + th + "/events"
	ok := func(payload string) string {
		return `{"events": [{"type": "checkpoint.saved", "payload": ` + payload + `}]}`
	}
	cases := []struct {
		name string
		body string
		want string // status type field: detail, or "201"
	}{
		{"trailing data after the body is malformed", `{"events": [{"type": "message.user", "payload": {"content": "a"}}]} x`,
			"400 urn:convlog:problem:malformed-json : the body holds more than one JSON value"},
		{"a body spaced out is read as any other", "\n{ \"events\" :\t[ {\"type\":\"message.user\",\"payload\":{\"content\":\"a\"}} ,\r\n{\"type\":\"message.user\" , \"payload\" : {\"content\": 5}} ] }\n",
			"422 urn:convlog:problem:invalid-request events[1].payload.content: events[1].payload.content: got number, want string or array"},
		{"events spelled in another case are the events", `{"Events": [{"type": "message.user", "payload": {"content": 5}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.content: events[0].payload.content: got number, want string or array"},
		{"the last of two event lists is the request's", `{"events": [5], "events": [{"type": "message.user", "payload": {"content": 5}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.content: events[0].payload.content: got number, want string or array"},
		{"null events are no events", `{"events": null}`,
			"422 urn:convlog:problem:invalid-request events: events must hold at least one event"},
		{"an unknown member beside the events is invalid", `{"events": [{"type": "message.user", "payload": {"content": "a"}}], "x": 1}`,
			"422 urn:convlog:problem:invalid-request x: unknown field \"x\""},
		{"an event that is not an object after one that is is invalid", `{"events": [{"type": "message.user", "payload": {"content": 5}}, []]}`,
			`422 urn:convlog:problem:invalid-request events[0].payload.content: events[0].payload.content: got number, want string or array`},
		{"an event that is not an object is invalid", `{"events": [5]}`,
			`422 urn:convlog:problem:invalid-request events[0]: events[0] must be an event object {"type": ..., "payload": {...}}`},
		{"an envelope field spelled in another case is unknown", `{"events": [{"Type": "message.user", "payload": {"content": "a"}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].Type: events[0].Type: unknown field"},
		{"a stored event's sequence is refused", `{"events": [{"type": "message.user", "seq": 3, "payload": {"content": "a"}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].seq: events[0].seq: unknown field (a stored event's; the log assigns it)"},
		{"the first unknown envelope field in the order written is named", `{"events": [{"zz": 1, "type": "message.user", "aa": 2, "payload": {"content": "a"}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].zz: events[0].zz: unknown field"},
		{"a null payload is invalid", `{"events": [{"type": "message.user", "payload": null}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload: events[0]: events: cannot decode event: event  has no payload"},
		{"a missing payload is invalid", `{"events": [{"type": "message.user"}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload: events[0]: events: cannot decode event: event  has no payload"},
		{"a type that is a number is invalid", `{"events": [{"type": 5, "payload": {"content": 5}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].type: events[0].type must be a string, got a JSON number"},
		{"the last of two types is the event's", `{"events": [{"type": "message.assistant", "type": "message.user", "payload": {"content": 5}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.content: events[0].payload.content: got number, want string or array"},
		{"a payload written before its type is checked", `{"events": [{"payload": {"content": 5}, "type": "message.user"}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.content: events[0].payload.content: got number, want string or array"},
		{"the last of two payloads is the event's", `{"events": [{"type": "message.user", "payload": {"content": 5}, "payload": {"content": "a"}}]}`,
			"201"},
		{"a type written again after the payload is the event's", `{"events": [{"type": "checkpoint.saved", "payload": {"content": 5}, "type": "message.user"}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.content: events[0].payload.content: got number, want string or array"},
		{"a null type written after the payload keeps the first", `{"events": [{"type": "message.user", "payload": {"content": 5}, "type": null}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.content: events[0].payload.content: got number, want string or array"},
		{"an unknown checkpoint field is invalid", ok(`{"id": "c1", "checkpoint": {"type": "json", "json": {}}, "extra": 1}`),
			"422 urn:convlog:problem:invalid-request events[0].payload.extra: events[0].payload.extra: unknown field"},
		{"a channel value without a type is invalid", ok(`{"id": "c1", "checkpoint": {"type": "json", "json": {}}, "channels": {"messages": {"json": [1, 2]}}}`),
			"422 urn:convlog:problem:invalid-request events[0].payload.channels.messages: events[0].payload.channels.messages: missing property 'type'"},
		{"a checkpoint that is no value object is invalid", ok(`{"id": "c1", "checkpoint": "x"}`),
			"422 urn:convlog:problem:invalid-request events[0].payload.checkpoint: events[0].payload.checkpoint: got string, want object"},
		{"a value's type of the wrong kind is invalid", ok(`{"id": "c1", "checkpoint": {"type": 1, "json": {"type": 1}}}`),
			"422 urn:convlog:problem:invalid-request events[0].payload.checkpoint.type: events[0].payload.checkpoint.type: got number, want string"},
		{"a blob size below zero is invalid", ok(`{"id": "c1", "checkpoint": {"type": "json", "json": null}, "metadata": {"type": "bytes", "blob": "b", "size": -1}}`),
			"422 urn:convlog:problem:invalid-request events[0].payload.metadata.size: events[0].payload.metadata.size: minimum: got -1, want 0"},
		{"a checkpoint without id is invalid", ok(`{"checkpoint": {"type": "json", "json": {"id": 5, "extra": [null]}}}`),
			"422 urn:convlog:problem:invalid-request events[0].payload: events[0].payload: missing property 'id'"},
		{"opaque JSON values are taken as they are", ok(`{"id": "c1", "checkpoint": {"type": "json", "json": {"type": 1, "json": "x", "blob": "", "size": -1}}, "metadata": {"type": "json", "json": null}, "channels": {"m": {"type": "json", "json": [{"extra": true, "size": -2}]}, "n": {"type": "json", "json": "s", "other": {"x": 1}}}}`),
			"201"},
		{"a write without idx is invalid", `{"events": [{"type": "checkpoint.writes", "payload": {"checkpoint": "c1", "task": "t", "writes": [{"channel": "a", "value": {"type": "json", "json": 1}}]}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.writes[0]: events[0].payload.writes[0]: missing property 'idx'"},
		{"a write whose value is no object is invalid", `{"events": [{"type": "checkpoint.writes", "payload": {"checkpoint": "c1", "task": "t", "writes": [{"idx": 0, "channel": "a", "value": [1]}]}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.writes[0].value: events[0].payload.writes[0].value: got array, want object"},
		{"opaque write values are taken as they are", `{"events": [{"type": "checkpoint.writes", "payload": {"checkpoint": "c1", "task": "t", "writes": [{"idx": 0, "channel": "a", "value": {"type": "json", "json": {"idx": "x", "value": 1}}}]}}]}`,
			"201"},
		{"writes that are not JSON of an array are invalid", `{"events": [{"type": "checkpoint.writes", "payload": {"checkpoint": "c1", "task": "t", "writes": {}}}]}`,
			"422 urn:convlog:problem:invalid-request events[0].payload.writes: events[0].payload.writes: got object, want array"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", path, keyAcme, c.body)
			if r.status == http.StatusCreated {
				require.Equal(t, c.want, "201", "%s", r.body)
				return
			}
			p := r.problem(t)
			got := fmt.Sprintf("%d %v %v: %v", r.status, p["type"], p["field"], p["detail"])
			if p["field"] == nil {
				got = fmt.Sprintf("%d %v : %v", r.status, p["type"], p["detail"])
			}
			require.Equal(t, c.want, got)
		})
	}
}

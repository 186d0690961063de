package httpapi_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// goNames matches what a Go type or decoder message looks like in a detail.
var goNames = regexp.MustCompile(`Go struct|Go value|map\[|\[\]|events\.|json: |of type |\(event \)|payload of event :`)

// Unknown fields are refused in an
// event's envelope and at every depth of its payload, type errors name the
// exact field, no detail shows Go type names or an empty event id, and a
// malformed query string is a 400 naming the parameter. Before, unknown
// payload and envelope fields were dropped (201), type errors named the
// parent ("events[0].payload", "metadata") with Go type names, and
// "?owner=%zz" was ignored (200).
func TestHTTPBoundaryValues(t *testing.T) {
	e := newEnv(t)
	id := e.createThread(map[string]any{"replies": "off"})
	events := "/v1/threads/" + id + "/events"
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"an unknown field in a payload", "POST", events, `{"events":[{"type":"message.user","payload":{"content":"x","foo":1}}]}`, 422, "events[0].payload.foo"},
		{"an unknown field in a content part", "POST", events, `{"events":[{"type":"message.user","payload":{"content":[{"type":"text","text":"a","zz":1}]}}]}`, 422, "events[0].payload.content[0].zz"},
		{"an unknown field in a tool call", "POST", events, `{"events":[{"type":"message.assistant","payload":{"tool_calls":[{"id":"c","name":"n","arguments":"{}","x":1}]}}]}`, 422, "events[0].payload.tool_calls[0].x"},
		{"an unknown envelope field", "POST", events, `{"events":[{"type":"message.user","seq":1,"payload":{"content":"x"}}]}`, 422, "events[0].seq"},
		{"an unknown envelope field after the payload", "POST", events, `{"events":[{"type":"message.user","payload":{"content":"x"}},{"type":"message.user","payload":{"content":"y"},"stored_at":"2025-01-01T00:00:00Z"}]}`, 422, "events[1].stored_at"},
		{"content of the wrong type", "POST", events, `{"events":[{"type":"message.user","payload":{"content":5}}]}`, 422, "events[0].payload.content"},
		{"a state key of the wrong type", "POST", events, `{"events":[{"type":"state.set","payload":{"key":5,"value":1}}]}`, 422, "events[0].payload.key"},
		{"an envelope field of the wrong type", "POST", events, `{"events":[{"id":5,"type":"message.user","payload":{"content":"x"}}]}`, 422, "events[0].id"},
		{"a metadata value of the wrong type", "POST", "/v1/threads", `{"metadata":{"a":1}}`, 422, "metadata.a"},
		{"an unknown field in a create", "POST", "/v1/threads", `{"title":"t","colour":"red"}`, 422, "colour"},
		{"a malformed list query", "GET", "/v1/threads?owner=%zz", "", 400, "owner"},
		{"a malformed read query", "GET", "/v1/threads/" + id + "?x=%zz", "", 400, "x"},
		{"a malformed events query", "GET", events + "?after=%zz&format=json", "", 400, "after"},
		{"after past the version on the JSON page", "GET", events + "?after=18446744073709551615&format=json", "", 400, "after"},
		{"Last-Event-ID past the version", "GET", events, "", 400, "Last-Event-ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.streamMsgs()
			var body any
			if tc.body != "" {
				body = []byte(tc.body)
			}
			var kv []string
			if tc.field == "Last-Event-ID" {
				kv = []string{"Last-Event-ID", "18446744073709551615"}
			}
			r := e.do(tc.method, tc.path, keyAcme, body, kv...)
			require.Equal(t, tc.status, r.status, "%s", r.body)
			p := r.problem(t)
			require.Equal(t, tc.field, p["field"], "%s", r.body)
			detail, _ := p["detail"].(string)
			require.NotEmpty(t, detail)
			require.False(t, goNames.MatchString(detail), "the detail shows Go internals: %q", detail)
			require.Equal(t, before, e.streamMsgs(), "nothing stored")
		})
	}
	// The same requests without the defect are accepted.
	require.Equal(t, http.StatusCreated, e.do("POST", events, keyAcme, []byte(`{"events":[{"type":"message.user","payload":{"content":[{"type":"text","text":"a"}]}}]}`)).status)
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/threads?owner=%7A", keyAcme, nil).status)
}

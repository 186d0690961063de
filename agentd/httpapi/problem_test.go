package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/natstest"
)

// Every bad request gets the right status and an RFC 9457 problem that
// names the field, and nothing stored changes.
func TestProblemBadRequestsChangeNothing(t *testing.T) {
	e := newEnv(t)
	th := e.createThread(map[string]any{"replies": "off"})
	version := e.appendUser(th, "hello")

	r := e.do("POST", "/v1/threads", keyGlobex, map[string]any{})
	require.Equal(t, http.StatusCreated, r.status)
	var gth threadOut
	r.json(t, &gth)
	other := gth.Thread

	// A conversation with one answered turn, for the chat cases.
	chat := func(msgs ...map[string]any) map[string]any {
		return map[string]any{"model": "demo", "messages": msgs}
	}
	user := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
	r = e.do("POST", "/v1/chat/completions", keyAcme, chat(user("first question")), "X-Conversation-Id", "table")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	events := "/v1/threads/" + th + "/events"
	big := strings.Repeat("x", httpapi.DefaultMaxBodyBytes+1)
	many := make([]any, 1001)
	for i := range many {
		many[i] = userEvent("m")
	}
	cases := []struct {
		name         string
		method, path string
		key          string
		body         any
		hdr          []string
		status       int
		code, field  string
	}{
		{"malformed JSON is a bad request", "POST", "/v1/threads", keyAcme, `{"title": `, nil, 400, "malformed-json", ""},
		{"malformed JSON of an append is a bad request", "POST", events, keyAcme, `{"events": [}`, nil, 400, "malformed-json", ""},
		{"two JSON values are a bad request", "POST", "/v1/threads", keyAcme, `{} {}`, nil, 400, "malformed-json", ""},
		{"an empty append body is a bad request", "POST", events, keyAcme, ``, nil, 400, "malformed-json", ""},
		{"a title that is a number is invalid", "POST", "/v1/threads", keyAcme, `{"title": 7}`, nil, 422, "invalid-request", "title"},
		{"events that are not an array are invalid", "POST", events, keyAcme, `{"events": {}}`, nil, 422, "invalid-request", "events"},
		{"an unknown field is invalid", "POST", "/v1/threads", keyAcme, `{"titel": "x"}`, nil, 422, "invalid-request", "titel"},
		{"no events is invalid", "POST", events, keyAcme, `{"events": []}`, nil, 422, "invalid-request", "events"},
		{"more events than commit atomically is invalid", "POST", events, keyAcme, map[string]any{"events": many}, nil, 422, "invalid-request", "events"},
		{"an unknown event type is invalid", "POST", events, keyAcme, `{"events": [{"type": "message.shout", "payload": {}}]}`, nil, 422, "invalid-request", "events[0].type"},
		{"content of the wrong type is invalid", "POST", events, keyAcme, `{"events": [{"type": "message.user", "payload": {"content": 5}}]}`, nil, 422, "invalid-request", "events[0].payload.content"},
		{"a user message without content is invalid", "POST", events, keyAcme, `{"events": [{"type": "message.user", "payload": {"content": null}}]}`, nil, 422, "invalid-event", "events[0].payload.content"},
		{"an event id that is not a UUID is invalid", "POST", events, keyAcme, `{"events": [{"id": "e1", "type": "message.user", "payload": {"content": "x"}}]}`, nil, 422, "invalid-event", "events[0].id"},
		{"the same event id twice is invalid", "POST", events, keyAcme, `{"events": [{"id": "0192f0c1-0000-7000-8000-000000000001", "type": "message.user", "payload": {"content": "x"}}, {"id": "0192f0c1-0000-7000-8000-000000000001", "type": "message.user", "payload": {"content": "y"}}]}`, nil, 422, "invalid-request", "events[1].id"},
		{"erasure through an append is invalid", "POST", events, keyAcme, `{"events": [{"type": "thread.erased", "payload": {"removed_events": 1, "last_seq": 1}}]}`, nil, 422, "invalid-request", "events[0].type"},
		{"a tool result for no pending call is rejected by the fold", "POST", events, keyAcme, `{"events": [{"type": "tool.result", "payload": {"tool_call_id": "call_9", "content": "x"}}]}`, nil, 422, "tool_call_not_pending", ""},
		{"an oversized body is too large", "POST", events, keyAcme, `{"events": [{"type": "message.user", "payload": {"content": "` + big + `"}}]}`, nil, 413, "too-large", ""},
		{"a thread id that is not UTF-8 is a bad id", "GET", "/v1/threads/bad%C0id", keyAcme, nil, nil, 400, "bad-id", "id"},
		{"a thread id that is not UTF-8 is a bad id (append)", "POST", "/v1/threads/bad%FFid/events", keyAcme, `{"events": []}`, nil, 400, "bad-id", "id"},
		{"an overlong thread id is a bad id", "GET", "/v1/threads/" + strings.Repeat("a", 1025), keyAcme, nil, nil, 400, "bad-id", "id"},
		{"an overlong id in a create body is a bad id", "POST", "/v1/threads", keyAcme, map[string]any{"id": strings.Repeat("é", 513)}, nil, 400, "bad-id", "id"},
		{"an existing id cannot be created again", "POST", "/v1/threads", keyAcme, map[string]any{"id": th}, nil, 409, "thread-exists", "id"},
		{"a stale If-Match is a failed precondition", "POST", events, keyAcme, map[string]any{"events": []any{userEvent("x")}}, []string{"If-Match", `"1"`}, 412, "version-conflict", ""},
		{"a malformed If-Match is a bad request", "POST", events, keyAcme, map[string]any{"events": []any{userEvent("x")}}, []string{"If-Match", "yesterday"}, 400, "bad-header", "If-Match"},
		{"an unknown thread is not found", "GET", "/v1/threads/nope", keyAcme, nil, nil, 404, "not-found", ""},
		{"appending to an unknown thread is not found", "POST", "/v1/threads/nope/events", keyAcme, map[string]any{"events": []any{userEvent("x")}}, nil, 404, "not-found", ""},
		{"streaming an unknown thread is not found", "GET", "/v1/threads/nope/events", keyAcme, nil, []string{"Accept", "text/event-stream"}, 404, "not-found", ""},
		{"another tenant's thread is not found", "GET", "/v1/threads/" + other, keyAcme, nil, nil, 404, "not-found", ""},
		{"appending to another tenant's thread is not found", "POST", "/v1/threads/" + other + "/events", keyAcme, map[string]any{"events": []any{userEvent("x")}}, nil, 404, "not-found", ""},
		{"deleting another tenant's thread is not found", "DELETE", "/v1/threads/" + other, keyAcme, nil, nil, 404, "not-found", ""},
		{"erasing another tenant's thread is not found", "POST", "/v1/threads/" + other + "/erase", keyAcme, `{"confirm": true}`, nil, 404, "not-found", ""},
		{"a missing API key is unauthorized", "GET", "/v1/threads/" + th, "", nil, nil, 401, "unauthorized", ""},
		{"an unknown API key is unauthorized", "GET", "/v1/threads/" + th, "sk-wrong", nil, nil, 401, "unauthorized", ""},
		{"a non-Bearer Authorization is unauthorized", "GET", "/v1/threads/" + th, "", nil, []string{"Authorization", "Basic YTpi"}, 401, "unauthorized", ""},
		{"a bad at_seq is a bad query", "GET", "/v1/threads/" + th + "?at_seq=abc", keyAcme, nil, nil, 400, "bad-query", "at_seq"},
		{"at_seq 0 is a bad query", "GET", "/v1/threads/" + th + "?at_seq=0", keyAcme, nil, nil, 400, "bad-query", "at_seq"},
		{"a bad as_of is a bad query", "GET", "/v1/threads/" + th + "?as_of=yesterday", keyAcme, nil, nil, 400, "bad-query", "as_of"},
		{"a bad boolean is a bad query", "GET", "/v1/threads/" + th + "?consistent=maybe", keyAcme, nil, nil, 400, "bad-query", "consistent"},
		{"a bad list limit is a bad query", "GET", "/v1/threads?limit=0", keyAcme, nil, nil, 400, "bad-query", "limit"},
		{"an unknown list filter is a bad query", "GET", "/v1/threads?ownr=me", keyAcme, nil, nil, 400, "bad-query", "ownr"},
		{"an unknown state parameter is a bad query", "GET", "/v1/threads/" + th + "/state?prefx=a", keyAcme, nil, nil, 400, "bad-query", "prefx"},
		{"an unknown checkpoints parameter is a bad query", "GET", "/v1/threads/" + th + "/checkpoints?nss=a&ns=b", keyAcme, nil, nil, 400, "bad-query", "nss"},
		{"a bad Last-Event-ID is a bad request", "GET", events, keyAcme, nil, []string{"Accept", "text/event-stream", "Last-Event-ID", "x"}, 400, "bad-header", "Last-Event-ID"},
		{"a fork past the thread's version is invalid", "POST", "/v1/threads/" + th + "/fork", keyAcme, map[string]any{"at_seq": version + 100}, nil, 422, "invalid-request", "at_seq"},
		{"a negative fork at_seq is invalid", "POST", "/v1/threads/" + th + "/fork", keyAcme, `{"at_seq": -1}`, nil, 422, "invalid-request", "at_seq"},
		{"erasure without confirmation is invalid", "POST", "/v1/threads/" + th + "/erase", keyAcme, `{}`, nil, 422, "invalid-request", "confirm"},
		{"an unknown export format is a bad query", "GET", "/v1/threads/" + th + "/export?format=csv", keyAcme, nil, nil, 400, "bad-query", "format"},
		{"a body that is not JSON is unsupported", "POST", "/v1/threads", keyAcme, nil, []string{"Content-Type", "text/plain"}, 415, "unsupported-media-type", "Content-Type"},
		{"a method a path does not take is not allowed", "PATCH", "/v1/threads/" + th, keyAcme, nil, nil, 405, "method-not-allowed", ""},
		{"an unknown path is not found", "GET", "/v2/nothing", keyAcme, nil, nil, 404, "no-route", ""},
		{"an unknown model is not found", "POST", "/v1/chat/completions", keyAcme, map[string]any{"model": "gpt-9", "messages": []any{user("x")}}, nil, 404, "model-not-found", "model"},
		{"a missing model is invalid", "POST", "/v1/chat/completions", keyAcme, map[string]any{"messages": []any{user("x")}}, nil, 422, "invalid-request", "model"},
		{"no chat messages is invalid", "POST", "/v1/chat/completions", keyAcme, chat(), nil, 422, "invalid-request", "messages"},
		{"a chat message with an unknown role is invalid", "POST", "/v1/chat/completions", keyAcme, chat(map[string]any{"role": "robot", "content": "x"}), nil, 422, "invalid-request", "messages[0].role"},
		{"a system message after the first is invalid", "POST", "/v1/chat/completions", keyAcme, chat(user("x"), map[string]any{"role": "system", "content": "y"}), nil, 422, "invalid-request", "messages[1].role"},
		{"n other than 1 is invalid", "POST", "/v1/chat/completions", keyAcme, map[string]any{"model": "demo", "n": 2, "messages": []any{user("x")}}, nil, 422, "invalid-request", "n"},
		{"an overlong conversation id is a bad header", "POST", "/v1/chat/completions", keyAcme, chat(user("x")), []string{"X-Conversation-Id", strings.Repeat("c", 300)}, 400, "bad-header", "X-Conversation-Id"},
		{"a history that diverges from the thread is a conflict", "POST", "/v1/chat/completions", keyAcme,
			chat(user("another first question"), map[string]any{"role": "assistant", "content": "an answer"}, user("next")), []string{"X-Conversation-Id", "table"}, 409, "history-diverged", "messages[0]"},
		{"a history that ends on an assistant message has nothing to answer", "POST", "/v1/chat/completions", keyAcme,
			chat(user("q"), map[string]any{"role": "assistant", "content": "made up"}), []string{"X-Conversation-Id", "fresh"}, 422, "invalid-request", "messages[1].role"},
	}
	require.GreaterOrEqual(t, len(cases), 25)
	start := e.streamMsgs()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.streamMsgs()
			r := e.do(tc.method, tc.path, tc.key, tc.body, tc.hdr...)
			require.Equal(t, tc.status, r.status, "%s", r.body)
			p := r.problem(t)
			require.Equal(t, tc.code, p["code"])
			if strings.Contains(tc.code, "_") {
				require.Equal(t, httpapi.ProblemTypePrefix+"rejected", p["type"], "the fold's codes are rejections")
			} else {
				require.Equal(t, httpapi.ProblemTypePrefix+tc.code, p["type"])
			}
			if tc.field != "" {
				require.Equal(t, tc.field, p["field"])
			}
			require.NotEmpty(t, p["detail"])
			require.Equal(t, before, e.streamMsgs(), "nothing stored changed")
			switch tc.status {
			case 401:
				require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
			case 405:
				require.NotEmpty(t, r.header.Get("Allow"))
			case 412:
				require.Equal(t, float64(version), p["current_version"], "the current version is in the problem")
				require.Equal(t, fmt.Sprintf("%q", fmt.Sprint(version)), r.header.Get("ETag"))
			}
			if strings.HasPrefix(tc.path, "/v1/chat/") {
				require.NotNil(t, p["error"], "OpenAI clients read the error member")
				require.Equal(t, "false", r.header.Get("X-Should-Retry"))
			}
		})
	}
	require.Equal(t, start, e.streamMsgs())
}

// An append the server refuses for load, on every attempt the client
// makes, is 503 overloaded with Retry-After (a client backs off and sends
// it again), not a 500, and stores nothing.
func TestProblemAnAppendRefusedForLoadIs503WithRetryAfter(t *testing.T) {
	e := newEnv(t, withoutWorkers(), withClientConfig(func(c *client.Config) {
		c.MaxRetries, c.RetryBackoff = 1, time.Millisecond
	}))
	th := e.createThread(map[string]any{"replies": "off"})
	holder, err := e.c.Subjects().Thread("acme", "holder")
	require.NoError(t, err)
	require.Positive(t, natstest.FillAtomicBatches(t, e.ns.NC, holder))
	before := e.streamMsgs()

	r := e.do("POST", "/v1/threads/"+th+"/events", keyAcme, map[string]any{"events": []any{userEvent("one"), userEvent("two")}})
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	p := r.problem(t)
	require.Equal(t, "overloaded", p["code"])
	require.Equal(t, httpapi.ProblemTypePrefix+"overloaded", p["type"])
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After is a number of seconds: %q", r.header.Get("Retry-After"))
	require.Positive(t, secs)
	require.Equal(t, before, e.streamMsgs(), "nothing was stored")
}

package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Finding 7 of the reliability issue: an Idempotency-Key or an event id
// reused with a different request is a 422 idempotency-mismatch problem
// (as the IETF Idempotency-Key draft answers), and nothing is stored; the
// same request again is still 201 duplicate. Before, the second body was
// answered 201 duplicate: true and dropped.
func TestHTTPIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	e := newEnv(t)
	id := e.createThread(map[string]any{"replies": "off"})
	path := "/v1/threads/" + id + "/events"
	first := map[string]any{"events": []any{userEvent("hello")}}
	r := e.do("POST", path, keyAcme, first, "Idempotency-Key", "k1")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	type want struct{ field, detail string }
	cases := []struct {
		name string
		body map[string]any
		kv   []string
		want want
	}{
		{"the same key with another payload", map[string]any{"events": []any{userEvent("HELLO")}}, []string{"Idempotency-Key", "k1"},
			want{"Idempotency-Key", `Idempotency-Key "k1" was first used with a different request`}},
		{"the same key with another event type", map[string]any{"events": []any{map[string]any{"type": "state.set", "payload": map[string]any{"key": "a", "value": 1}}}},
			[]string{"Idempotency-Key", "k1"}, want{"Idempotency-Key", "stored as a message.user event, this append sends a state.set event"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.streamMsgs()
			r := e.do("POST", path, keyAcme, tc.body, tc.kv...)
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
			p := r.problem(t)
			require.True(t, strings.HasSuffix(p["type"].(string), "idempotency-mismatch"), "%v", p["type"])
			require.Equal(t, tc.want.field, p["field"])
			require.Contains(t, p["detail"], tc.want.detail)
			require.Equal(t, before, e.streamMsgs(), "nothing stored")
		})
	}

	t.Run("an event id reused with another type", func(t *testing.T) {
		r := e.do("POST", path, keyAcme, map[string]any{"events": []any{map[string]any{"id": "0193f0c2-0000-7000-8000-000000000001", "type": "message.user", "payload": map[string]any{"content": "x"}}}})
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		r = e.do("POST", path, keyAcme, map[string]any{"events": []any{map[string]any{"id": "0193f0c2-0000-7000-8000-000000000001", "type": "state.set", "payload": map[string]any{"key": "a", "value": 1}}}})
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
		p := r.problem(t)
		require.Equal(t, "events[0].id", p["field"])
		require.Contains(t, p["detail"], "0193f0c2-0000-7000-8000-000000000001")
	})

	t.Run("the same request again is a duplicate", func(t *testing.T) {
		r := e.do("POST", path, keyAcme, first, "Idempotency-Key", "k1")
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		require.Contains(t, string(r.body), `"duplicate":true`)
	})

	t.Run("a create key reused with another title", func(t *testing.T) {
		r := e.do("POST", "/v1/threads", keyAcme, map[string]any{"title": "x"}, "Idempotency-Key", "create-k")
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		r = e.do("POST", "/v1/threads", keyAcme, map[string]any{"title": "y"}, "Idempotency-Key", "create-k")
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
		require.Equal(t, "Idempotency-Key", r.problem(t)["field"])
	})
}

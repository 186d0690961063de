package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// An Idempotency-Key or an event id
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

// An Idempotency-Key reused with another number of events is another
// request: 422 idempotency-mismatch naming the key and the first event the
// earlier request stored, and nothing is stored, with or without If-Match
// (the thread's version, or the version the first request was made at).
func TestHTTPIdempotencyKeyReusedWithAnotherNumberOfEvents(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	type ifMatch int
	const (
		none ifMatch = iota
		current
		first
	)
	cases := []struct {
		name        string
		first, then int
		ifMatch     ifMatch
	}{
		{"one event, then two", 1, 2, none},
		{"one event, then two at the thread's version", 1, 2, current},
		{"one event, then two at the first request's version", 1, 2, first},
		{"two events, then one", 2, 1, none},
		{"two events, then one at the first request's version", 2, 1, first},
		{"two events, then three", 2, 3, none},
	}
	events := func(n int) map[string]any {
		evs := make([]any, n)
		for i := range evs {
			evs[i] = userEvent("hello " + strconv.Itoa(i))
		}
		return map[string]any{"events": evs}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := e.createThread(map[string]any{"replies": "off"})
			path := "/v1/threads/" + id + "/events"
			v0 := e.do("GET", "/v1/threads/"+id, keyAcme, nil).header.Get("ETag")
			r := e.do("POST", path, keyAcme, events(tc.first), "Idempotency-Key", "k1")
			require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
			var out struct {
				Events []struct {
					ID  string `json:"id"`
					Seq uint64 `json:"seq"`
				} `json:"events"`
			}
			r.json(t, &out)
			kv := []string{"Idempotency-Key", "k1"}
			switch tc.ifMatch {
			case current:
				kv = append(kv, "If-Match", r.header.Get("ETag"))
			case first:
				kv = append(kv, "If-Match", v0)
			}
			before := e.streamMsgs()

			r = e.do("POST", path, keyAcme, events(tc.then), kv...)
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
			p := r.problem(t)
			require.True(t, strings.HasSuffix(p["type"].(string), "idempotency-mismatch"), "%v", p["type"])
			require.Equal(t, "Idempotency-Key", p["field"])
			require.Contains(t, p["detail"], `Idempotency-Key "k1" was first used with a different request`)
			require.Equal(t, float64(0), p["index"])
			require.Equal(t, out.Events[0].ID, p["event_id"])
			require.Equal(t, float64(out.Events[0].Seq), p["seq"])
			require.Equal(t, before, e.streamMsgs(), "nothing stored")
		})
	}
}

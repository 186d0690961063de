package httpapi_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// TestExternalThreadIDs: an id as AgentKit or LangGraph give it (any UTF-8
// string) is accepted in the path and in a create's body, maps to one
// subject-safe thread id, and both are reported.
func TestExternalThreadIDs(t *testing.T) {
	e := newEnv(t, withoutWorkers(), withProjector())
	ext := "user/42 · checkpoints:main 🧵 " + strings.Repeat("x", 200)
	want, mapped, err := events.ThreadIDFor(ext)
	require.NoError(t, err)
	require.True(t, mapped)
	require.Regexp(t, `^ext-[a-z2-7]{32}$`, want)
	path := "/v1/threads/" + url.PathEscape(ext)

	r := e.do("PUT", path, keyAcme, map[string]any{"title": "external"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "/v1/threads/"+want, r.header.Get("Location"))
	var th map[string]any
	r.json(t, &th)
	require.Equal(t, want, th["thread"])
	require.Equal(t, ext, th["external_id"])

	r = e.do("POST", path+"/events", keyAcme, map[string]any{"events": []any{userEvent("hello")}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	for _, p := range []string{path, "/v1/threads/" + want} {
		r = e.do("GET", p+"?consistent=true", keyAcme, nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", p, r.body)
		r.json(t, &th)
		require.Equal(t, want, th["thread"])
		require.Equal(t, ext, th["external_id"])
		require.Len(t, th["messages"], 1, "%s: %s", p, r.body)
	}
	// Listings name both ids.
	var page struct {
		Threads []map[string]any `json:"threads"`
	}
	require.Eventually(t, func() bool {
		e.do("GET", "/v1/threads", keyAcme, nil).json(t, &page)
		for _, s := range page.Threads {
			if s["thread"] == want {
				return s["external_id"] == ext
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the listing has the thread with its external id")

	// The same external id in a POST body is the same thread.
	r = e.do("POST", "/v1/threads", keyAcme, map[string]any{"id": ext})
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)

	// The mapped form is reserved: it cannot be chosen as a thread id.
	other, _, _ := events.ThreadIDFor("another external id")
	r = e.do("PUT", "/v1/threads/"+other, keyAcme, nil)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Contains(t, r.problem(t)["detail"], "reserved for external ids")
	r = e.do("POST", "/v1/threads", keyAcme, map[string]any{"id": other})
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)

	// Past the limit, or not UTF-8: 400 naming what is wrong.
	r = e.do("PUT", "/v1/threads/"+strings.Repeat("é", 513), keyAcme, nil)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Contains(t, r.problem(t)["detail"], "is 1026 bytes, the limit is 1024")
	r = e.do("PUT", "/v1/threads/ab%FFcd", keyAcme, nil)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Contains(t, r.problem(t)["detail"], "not valid UTF-8 at byte 2")
}

// TestDeleteThenReuseTheID: LangGraph's deleteThread, then the same id used
// again: a create on a soft-deleted thread starts a new lifetime with
// nothing of the old one, and the old lifetime stays auditable (its events
// in the log, its state at its sequences).
func TestDeleteThenReuseTheID(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	const path = "/v1/threads/lg-thread-1"
	r := e.do("PUT", path, keyAcme, map[string]any{"title": "first life"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = e.do("POST", path+"/events", keyAcme, map[string]any{"events": []any{userEvent("old question"),
		map[string]any{"type": "state.set", "payload": map[string]any{"key": "checkpoint", "value": map[string]any{"v": 1}}}}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = e.do("DELETE", path, keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var old map[string]any
	r = e.do("GET", path+"?include_deleted=true", keyAcme, nil)
	r.json(t, &old)
	oldVersion := old["version"].(float64)

	r = e.do("PUT", path, keyAcme, map[string]any{"title": "second life"})
	require.Equal(t, http.StatusCreated, r.status, "a soft-deleted id is free: body: %s", r.body)
	var th map[string]any
	r.json(t, &th)
	require.Equal(t, "second life", th["title"])
	require.Equal(t, float64(1), th["lifetime"])
	require.Equal(t, oldVersion+1, th["lifetime_seq"])
	require.Nil(t, th["deleted"])
	require.Empty(t, th["messages"])
	require.Nil(t, th["kv"], "nothing of the old lifetime's state")
	r = e.do("GET", path+"/state/checkpoint", keyAcme, nil)
	require.Equal(t, http.StatusNotFound, r.status, "body: %s", r.body)

	r = e.do("POST", path+"/events", keyAcme, map[string]any{"events": []any{userEvent("new question")}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = e.do("GET", path, keyAcme, nil)
	r.json(t, &th)
	require.Len(t, th["messages"], 1)
	require.Equal(t, "new question", th["messages"].([]any)[0].(map[string]any)["content"])

	// Audit: every event of both lifetimes is in the log, and the old
	// lifetime reads as it was at its last sequence.
	r = e.do("GET", path+"/events", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var page struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	r.json(t, &page)
	var types []string
	for _, ev := range page.Events {
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{"thread.created", "message.user", "state.set", "thread.deleted", "thread.created", "message.user"}, types)
	r = e.do("GET", path+"?include_deleted=true&at_seq="+strconv.Itoa(int(oldVersion)), keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	th = nil
	r.json(t, &th)
	require.Equal(t, "first life", th["title"])
	require.NotContains(t, th, "lifetime")
	require.Equal(t, true, th["deleted"])
	require.Equal(t, "old question", th["messages"].([]any)[0].(map[string]any)["content"])

	// The old lifetime cannot be undeleted over the new one.
	r = e.do("POST", path+"/undelete", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "undelete of a live thread is a no-op: %s", r.body)
	r = e.do("GET", path, keyAcme, nil)
	th = nil
	r.json(t, &th)
	require.Equal(t, "second life", th["title"])
	require.Len(t, th["messages"], 1)
}

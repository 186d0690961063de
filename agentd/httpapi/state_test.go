package httpapi_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The thread's key-value state is read by key or prefix without the whole
// thread, and written one key at a time: set-if-absent (If-None-Match: *),
// compare-and-set on the thread version (If-Match) and delete. Keys with
// a / travel URL-encoded.
func TestStateKeysOverHTTP(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	id := e.createThread(map[string]any{"replies": "off"})
	key := "/v1/threads/" + id + "/state/" + url.PathEscape("ckpt/1")

	r := e.do("GET", key, keyAcme, nil)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "state-key-not-found", r.problem(t)["code"])

	r = e.do("PUT", key, keyAcme, map[string]any{"value": map[string]any{"step": 1}}, "If-None-Match", "*")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var put struct {
		Key     string         `json:"key"`
		Value   map[string]any `json:"value"`
		Version uint64         `json:"version"`
	}
	r.json(t, &put)
	require.Equal(t, "ckpt/1", put.Key)
	require.Equal(t, `"`+strconv.FormatUint(put.Version, 10)+`"`, r.header.Get("ETag"))

	r = e.do("PUT", key, keyAcme, map[string]any{"value": 2}, "If-None-Match", "*")
	require.Equal(t, http.StatusPreconditionFailed, r.status, "set-if-absent of a key that is set")
	p := r.problem(t)
	require.Equal(t, "state-key-exists", p["code"])
	require.Equal(t, float64(put.Version), p["current_version"])

	r = e.do("PUT", key, keyAcme, map[string]any{"value": 3}, "If-Match", `"1"`)
	require.Equal(t, http.StatusPreconditionFailed, r.status, "compare-and-set at a stale version")
	require.Equal(t, "version-conflict", r.problem(t)["code"])
	r = e.do("PUT", key, keyAcme, map[string]any{"value": 3}, "If-Match", `"`+strconv.FormatUint(put.Version, 10)+`"`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	r = e.do("PUT", "/v1/threads/"+id+"/state/other", keyAcme, map[string]any{"value": "x"})
	require.Equal(t, http.StatusOK, r.status)

	r = e.do("GET", key, keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status)
	var got struct {
		Value float64 `json:"value"`
	}
	r.json(t, &got)
	require.Equal(t, float64(3), got.Value)

	r = e.do("GET", "/v1/threads/"+id+"/state?prefix=ckpt/", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status)
	var st struct {
		Version uint64         `json:"version"`
		KV      map[string]any `json:"kv"`
	}
	r.json(t, &st)
	require.Equal(t, map[string]any{"ckpt/1": float64(3)}, st.KV)

	r = e.do("DELETE", key, keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = e.do("GET", key, keyAcme, nil)
	require.Equal(t, http.StatusNotFound, r.status)

	r = e.do("PUT", key, keyAcme, map[string]any{"nope": 1})
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	r = e.do("GET", "/v1/threads/"+id+"/state/x", keyGlobex, nil)
	require.Equal(t, http.StatusNotFound, r.status, "another tenant's thread is not found")
	require.Equal(t, "not-found", r.problem(t)["code"])
}

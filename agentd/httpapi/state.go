package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// stateBody is GET /v1/threads/{id}/state: the key-value state at a
// version (openapi.json StateResponse).
type stateBody struct {
	Version uint64                     `json:"version"`
	KV      map[string]json.RawMessage `json:"kv"`
}

// stateKeyBody is one key of the state, or what a write of one stored
// (openapi.json StateKeyResponse; Value is left out after a delete).
type stateKeyBody struct {
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value,omitempty"`
	Version uint64          `json:"version"`
}

// threadAndKey returns the validated {id} and {key} of the path.
func threadAndKey(r *http.Request) (id, key string, p *Problem) {
	if id, p = threadID(r); p != nil {
		return "", "", p
	}
	key = r.PathValue("key")
	if key == "" || len(key) > events.DefaultLimits().MaxNameLen {
		return "", "", newProblem(http.StatusBadRequest, "bad-key", "Invalid state key",
			fmt.Sprintf("a state key is 1 to %d bytes (URL-encode it in the path, a / as %%2F)", events.DefaultLimits().MaxNameLen)).field("key")
	}
	return id, key, nil
}

// getState is GET /v1/threads/{id}/state?prefix=: the thread's key-value
// state at its current version, every key or those starting with prefix,
// read from the snapshot's head and the log's tail (not the history).
func (s *Server) getState(w http.ResponseWriter, r *http.Request) error {
	id, p := threadID(r)
	if p != nil {
		return p
	}
	q := r.URL.Query()
	if p := onlyParams(q, "prefix"); p != nil {
		return p
	}
	st, err := s.c.State(r.Context(), tenantOf(r.Context()), id, q.Get("prefix"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(st.Version))
	return writeJSON(w, http.StatusOK, stateBody{Version: st.Version, KV: st.KV})
}

// getStateKey is GET /v1/threads/{id}/state/{key}.
func (s *Server) getStateKey(w http.ResponseWriter, r *http.Request) error {
	id, key, p := threadAndKey(r)
	if p != nil {
		return p
	}
	st, err := s.c.State(r.Context(), tenantOf(r.Context()), id, key)
	if err != nil {
		return err
	}
	v, ok := st.KV[key]
	if !ok {
		return newProblem(http.StatusNotFound, "state-key-not-found", "State key not found",
			fmt.Sprintf("thread %s has no state key %q at version %d", id, key, st.Version)).field("key").thread(id)
	}
	w.Header().Set("ETag", etag(st.Version))
	return writeJSON(w, http.StatusOK, stateKeyBody{Key: key, Value: v, Version: st.Version})
}

// putStateKey is PUT /v1/threads/{id}/state/{key} with {"value": <JSON>}:
// a state.set event. If-None-Match: * sets the key only if it is absent
// (412 state-key-exists otherwise); If-Match: "<version>" only if the
// thread is at that version (412 version-conflict); neither sets it at
// any version.
func (s *Server) putStateKey(w http.ResponseWriter, r *http.Request) error {
	return s.writeStateKey(w, r, false)
}

// deleteStateKey is DELETE /v1/threads/{id}/state/{key}: a state.deleted
// event, conditional on If-Match when given.
func (s *Server) deleteStateKey(w http.ResponseWriter, r *http.Request) error {
	return s.writeStateKey(w, r, true)
}

func (s *Server) writeStateKey(w http.ResponseWriter, r *http.Request, del bool) error {
	tenant := tenantOf(r.Context())
	id, key, p := threadAndKey(r)
	if p != nil {
		return p
	}
	expect, anyVersion, hasIfMatch, p := parseIfMatch(r)
	if p != nil {
		return p
	}
	ifAbsent := false
	switch h := strings.TrimSpace(r.Header.Get("If-None-Match")); {
	case h == "" || del:
	case h == "*":
		ifAbsent = true
	default:
		return badRequest("bad-header", fmt.Sprintf("If-None-Match on a state key must be *, got %q", h)).field("If-None-Match")
	}
	if ifAbsent && hasIfMatch {
		return badRequest("bad-header", "send If-None-Match: * or If-Match, not both").field("If-None-Match")
	}
	var payload events.Payload = events.StateDeleted{Key: key}
	var value json.RawMessage
	if !del {
		var req struct {
			Value json.RawMessage `json:"value"`
		}
		if p := decodeJSON(r, &req, true, false); p != nil {
			return p
		}
		if len(req.Value) == 0 {
			return invalid("value", `the body must be {"value": <any JSON value>}`)
		}
		value = req.Value
		payload = events.StateSet{Key: key, Value: value}
	}
	var version uint64
	var err error
	switch {
	case ifAbsent:
		version, err = s.c.SetStateIfAbsent(r.Context(), tenant, id, key, value)
		if errors.Is(err, client.ErrStateKeyExists) {
			q := newProblem(http.StatusPreconditionFailed, "state-key-exists", "State key exists",
				fmt.Sprintf("thread %s has state key %q already (If-None-Match: *)", id, key)).field("key").thread(id)
			q.CurrentVersion = &version
			return q
		}
	default:
		opt := client.AnyVersion()
		if hasIfMatch && !anyVersion {
			opt = client.ExpectVersion(expect)
		}
		var res client.AppendResult
		res, err = s.c.Append(r.Context(), tenant, id, []events.Event{{Payload: payload, Producer: s.cfg.Producer}}, opt)
		version = res.Version
	}
	if err != nil {
		return problemFor(err, errCtx{thread: id, ifMatch: hasIfMatch})
	}
	w.Header().Set("ETag", etag(version))
	if del {
		value = nil
	}
	return writeJSON(w, http.StatusOK, stateKeyBody{Key: key, Value: value, Version: version})
}

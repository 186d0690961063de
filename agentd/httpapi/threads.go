package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// idemNamespace is the UUIDv5 namespace of ids derived from Idempotency-Key.
var idemNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/convlog/convlog/idempotency-key"))

// idemID derives a deterministic id from an Idempotency-Key: the UUIDv5 of
// tenant, thread, key and a purpose ("event:3", "thread"), so a retried
// request produces the same event ids and the client's idempotent append
// (docs/design.md invariant 4) stores nothing twice.
func idemID(tenant, thread, key, purpose string) string {
	return uuid.NewSHA1(idemNamespace, []byte(tenant+"\x00"+thread+"\x00"+key+"\x00"+purpose)).String()
}

// maxIdemKeyLen bounds the Idempotency-Key header.
const maxIdemKeyLen = 256

func idempotencyKey(r *http.Request) (string, *Problem) {
	k := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if len(k) > maxIdemKeyLen {
		return "", badRequest("bad-header", fmt.Sprintf("Idempotency-Key is %d bytes, the limit is %d", len(k), maxIdemKeyLen)).field("Idempotency-Key")
	}
	return k, nil
}

// threadID returns the thread id of the path's {id}: the id itself when it
// is a thread id, else the id an external id maps to
// (events.ThreadIDFor).
func threadID(r *http.Request) (string, *Problem) {
	id, _, p := resolveID(r.PathValue("id"), "id")
	return id, p
}

// resolveID maps an id as a client sent it (field names where) to the
// thread id and the external id ("" when raw is a thread id itself).
func resolveID(raw, field string) (id, external string, p *Problem) {
	id, mapped, err := events.ThreadIDFor(raw)
	if err != nil {
		return "", "", newProblem(http.StatusBadRequest, "bad-id", "Invalid id", err.Error()).field(field)
	}
	if mapped {
		external = raw
	}
	return id, external, nil
}

// etag is the strong ETag of a thread version.
func etag(v uint64) string { return `"` + strconv.FormatUint(v, 10) + `"` }

// parseIfMatch reads If-Match: a quoted version ("12"), also accepted bare
// or weak (W/"12"), or "*" (any version). ok is false when absent.
func parseIfMatch(r *http.Request) (v uint64, any, ok bool, p *Problem) {
	h := strings.TrimSpace(r.Header.Get("If-Match"))
	if h == "" {
		return 0, false, false, nil
	}
	if h == "*" {
		return 0, true, true, nil
	}
	s := strings.TrimPrefix(h, "W/")
	s = strings.Trim(s, `"`)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, false, badRequest("bad-header",
			fmt.Sprintf("If-Match must be the thread version as an ETag, e.g. \"12\", got %q", h)).field("If-Match")
	}
	return n, false, true, nil
}

// query helpers; each returns a 400 problem naming the parameter.
func queryBool(q url.Values, name string) (bool, *Problem) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("bad-query", fmt.Sprintf("%s must be true or false, got %q", name, v)).field(name)
	}
	return b, nil
}

func querySeq(q url.Values, name string) (uint64, *Problem) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, badRequest("bad-query", fmt.Sprintf("%s must be a stream sequence (an integer >= 1), got %q", name, v)).field(name)
	}
	return n, nil
}

func queryInt(q url.Values, name string, lo, hi int) (int, *Problem) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("bad-query", fmt.Sprintf("%s must be an integer in %d..%d, got %q", name, lo, hi, v)).field(name)
	}
	return n, nil
}

// storedJSON is the JSON form of a stored event: the event's JSON form
// with "seq" and "stored_at" added. An event that did not decode is
// {"seq", "stored_at", "id", "type", "error"}.
func storedJSON(st events.Stored, decodeErr error) []byte {
	head := fmt.Sprintf(`{"seq":%d,"stored_at":%q`, st.Seq, st.StoredAt.UTC().Format(time.RFC3339Nano))
	if decodeErr == nil && st.Payload != nil {
		if b, err := st.Event.MarshalJSON(); err == nil && len(b) > 2 {
			return append([]byte(head+","), b[1:]...)
		}
	}
	msg := "the event could not be decoded"
	if decodeErr != nil {
		msg = decodeErr.Error()
	}
	tail, _ := json.Marshal(struct {
		ID    string      `json:"id,omitempty"`
		Type  events.Type `json:"type,omitempty"`
		Error string      `json:"error"`
	}{st.ID, st.Type, msg})
	return append([]byte(head+","), tail[1:]...)
}

// threadBody is a thread as the API returns it (openapi.json's Thread):
// the client's read model, whose JSON field names are the API's, with the
// message count and, when asked, the raw events in place of the decoded
// ones (the shallower Events field hides the read model's).
type threadBody struct {
	*client.Thread
	MessageCount int               `json:"message_count"`
	Events       []json.RawMessage `json:"events,omitempty"`
}

func threadJSON(th *client.Thread) threadBody {
	b := threadBody{Thread: th, MessageCount: th.MessageCount()}
	if th.Events != nil {
		b.Events = make([]json.RawMessage, 0, len(th.Events))
		for _, st := range th.Events {
			b.Events = append(b.Events, storedJSON(st, nil))
		}
	}
	return b
}

// writeThread writes th with its ETag.
func writeThread(w http.ResponseWriter, r *http.Request, status int, th *client.Thread) error {
	if status == http.StatusOK && notModified(w, r, th.Version) {
		return nil
	}
	w.Header().Set("ETag", etag(th.Version))
	return writeJSON(w, status, threadJSON(th))
}

// notModified answers 304 Not Modified, with the ETag, when the request's
// If-None-Match is the ETag of version; it reports whether it did.
func notModified(w http.ResponseWriter, r *http.Request, version uint64) bool {
	tag := etag(version)
	if r.Header.Get("If-None-Match") != tag {
		return false
	}
	w.Header().Set("ETag", tag)
	w.WriteHeader(http.StatusNotModified)
	return true
}

// createRequest is the body of POST /v1/threads.
type createRequest struct {
	ID            string               `json:"id"`
	Owner         string               `json:"owner"`
	Agent         string               `json:"agent"`
	SystemPrompt  *string              `json:"system_prompt"`
	Title         string               `json:"title"`
	Metadata      map[string]string    `json:"metadata"`
	Replies       events.ReplyMode     `json:"replies"`
	PendingPolicy events.PendingPolicy `json:"pending_policy"`
}

func (s *Server) createThread(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	var req createRequest
	if p := createBodyProblem(r); p != nil {
		return p
	}
	if p := decodeJSON(r, &req, true, true); p != nil {
		return p
	}
	key, p := idempotencyKey(r)
	if p != nil {
		return p
	}
	var external string
	if req.ID != "" {
		if req.ID, external, p = resolveID(req.ID, "id"); p != nil {
			return p
		}
		if p := reservedID(req.ID, external, "id"); p != nil {
			return p
		}
	} else if key != "" {
		req.ID = "t-" + idemID(tenant, "", key, "thread")
	}
	if req.ID == "" {
		req.ID = events.NewID()
	}
	return s.create(w, r, tenant, req.ID, external, key, req, false)
}

// reservedID refuses a thread id of the mapped form (ext-...) given as a
// thread id itself, so that a mapped id only ever names its external id.
func reservedID(id, external, field string) *Problem {
	if external == "" && events.IsMappedThreadID(id) {
		return newProblem(http.StatusBadRequest, "bad-id", "Invalid id",
			fmt.Sprintf("thread id %q has the form reserved for external ids (%s + 32 base32 characters): choose another id", id, events.ExternalIDPrefix)).field(field)
	}
	return nil
}

// create creates tenant/id from req (its event id derived from the
// Idempotency-Key key when there is one) and answers 201 with the new
// thread. With ifAbsent, an id taken by a thread that can be read (also
// not soft-deleted) is answered 200 with that thread as it is instead of 409.
// A soft-deleted id is free: the create starts the thread's next lifetime.
func (s *Server) create(w http.ResponseWriter, r *http.Request, tenant, id, external, key string, req createRequest, ifAbsent bool) error {
	opts := client.CreateOptions{Tenant: tenant, ThreadID: id, ThreadCreated: events.ThreadCreated{
		Owner: req.Owner, Agent: req.Agent, SystemPrompt: req.SystemPrompt, Title: req.Title,
		Metadata: req.Metadata, Replies: req.Replies, PendingPolicy: req.PendingPolicy, ExternalID: external}}
	if key != "" {
		opts.EventID = idemID(tenant, id, key, "created")
	}
	_, _, version, err := s.c.CreateThread(r.Context(), opts)
	if ifAbsent && errors.Is(err, client.ErrThreadExists) {
		if th, gerr := s.c.Get(r.Context(), tenant, id, client.Consistent(), client.IncludeDeleted()); gerr == nil {
			return writeThread(w, r, http.StatusOK, th)
		}
	}
	if err != nil {
		q := problemFor(err, errCtx{thread: id, eventIndex: map[string]int{}, idemKey: key})
		if q.Field != "" && strings.HasPrefix(q.Field, "payload.") {
			q.Field = strings.TrimPrefix(q.Field, "payload.")
		}
		return q
	}
	th, err := s.c.Get(r.Context(), tenant, id, client.AtLeastVersion(version))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/threads/"+id)
	return writeThread(w, r, http.StatusCreated, th)
}

// putThread is create-if-absent: PUT /v1/threads/{id} creates the thread
// as POST /v1/threads would (201) or, when it exists already, answers 200
// with it as it is, whatever the body says: an adapter whose framework
// creates a thread on every run (AgentKit calls createThread with an id it
// already has) needs no 409 to swallow. A soft-deleted id is free: the PUT
// starts the thread's next lifetime (201; LangGraph's deleteThread, then
// the id used again). An erased id stays taken: 409 thread-exists. The
// path's {id} may be any UTF-8 string of up to 1,024 bytes (percent-
// encoded); one that is not a thread id is mapped (events.ThreadIDFor) and
// kept as the thread's external_id.
func (s *Server) putThread(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	raw := r.PathValue("id")
	id, external, p := resolveID(raw, "id")
	if p != nil {
		return p
	}
	if p := reservedID(id, external, "id"); p != nil {
		return p
	}
	var req createRequest
	if p := createBodyProblem(r); p != nil {
		return p
	}
	if p := decodeJSON(r, &req, true, true); p != nil {
		return p
	}
	if req.ID != "" && req.ID != raw {
		return invalid("id", fmt.Sprintf("the body's id %q differs from the path's %q: leave it out", req.ID, raw))
	}
	key, p := idempotencyKey(r)
	if p != nil {
		return p
	}
	return s.create(w, r, tenant, id, external, key, req, true)
}

// listParams are the query parameters GET /v1/threads accepts (plus
// metadata.<key>).
var listParams = map[string]bool{"owner": true, "agent": true, "limit": true, "cursor": true, "include_deleted": true}

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	q := r.URL.Query()
	opts := client.ListOptions{Owner: q.Get("owner"), Agent: q.Get("agent"), Cursor: q.Get("cursor")}
	for name, vs := range q {
		if k, ok := strings.CutPrefix(name, "metadata."); ok && k != "" {
			if opts.Metadata == nil {
				opts.Metadata = map[string]string{}
			}
			opts.Metadata[k] = vs[0]
			continue
		}
		if !listParams[name] {
			return badRequest("bad-query", fmt.Sprintf("unknown query parameter %q (use owner, agent, metadata.<key>, limit, cursor, include_deleted)", name)).field(name)
		}
	}
	var p *Problem
	if opts.Limit, p = queryInt(q, "limit", 1, 1000); p != nil {
		return p
	}
	if opts.IncludeDeleted, p = queryBool(q, "include_deleted"); p != nil {
		return p
	}
	page, err := s.c.List(r.Context(), tenant, opts)
	if err != nil {
		return err
	}
	if page.Threads == nil {
		page.Threads = []client.ThreadSummary{}
	}
	return writeJSON(w, http.StatusOK, page)
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	id, p := threadID(r)
	if p != nil {
		return p
	}
	q := r.URL.Query()
	var opts []client.GetOption
	for _, b := range []struct {
		name string
		opt  client.GetOption
	}{{"consistent", client.Consistent()}, {"events", client.WithEvents()}, {"include_deleted", client.IncludeDeleted()}} {
		on, p := queryBool(q, b.name)
		if p != nil {
			return p
		}
		if on {
			opts = append(opts, b.opt)
		}
	}
	atSeq, p := querySeq(q, "at_seq")
	if p != nil {
		return p
	}
	if atSeq != 0 {
		opts = append(opts, client.AtSeq(atSeq))
	}
	if v := q.Get("as_of"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return badRequest("bad-query", fmt.Sprintf("as_of must be an RFC 3339 time such as 2026-01-02T03:04:05Z, got %q", v)).field("as_of")
		}
		opts = append(opts, client.AsOf(t))
	}
	if len(opts) == 0 {
		return s.getThreadView(w, r, tenant, id)
	}
	th, err := s.c.Get(r.Context(), tenant, id, opts...)
	if err != nil {
		return err
	}
	return writeThread(w, r, http.StatusOK, th)
}

// getThreadView answers the default read of a thread from a view of its
// snapshot (client.GetView): with the client's TrackSnapshots (agentd
// serve) a thread read before costs no round trip while its head is
// unchanged, and a poll with the current ETag gets 304 Not Modified
// before any message is copied. Same body as a Get.
func (s *Server) getThreadView(w http.ResponseWriter, r *http.Request, tenant, id string) error {
	v, err := s.c.GetView(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	if notModified(w, r, v.Version) {
		return nil
	}
	th := v.Thread
	th.Messages = make([]events.Message, 0, v.Len())
	for _, m := range v.All() {
		th.Messages = append(th.Messages, *m)
	}
	th.Base = 0
	return writeThread(w, r, http.StatusOK, &th)
}

// appendRequest is the body of POST /v1/threads/{id}/events.
type appendRequest struct {
	Events []json.RawMessage `json:"events"`
}

// appendedEvent is one event of an append's answer.
type appendedEvent struct {
	ID   string      `json:"id"`
	Type events.Type `json:"type"`
	Seq  uint64      `json:"seq"`
}

// appendResponse answers POST /v1/threads/{id}/events.
type appendResponse struct {
	Tenant    string          `json:"tenant"`
	Thread    string          `json:"thread"`
	Version   uint64          `json:"version"`
	Duplicate bool            `json:"duplicate"`
	Events    []appendedEvent `json:"events"`
}

// appendEvents serves POST /v1/threads/{id}/events: the request's events
// appended atomically, under If-Match's version when given, with ids
// derived from the Idempotency-Key when it is set.
func (s *Server) appendEvents(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	id, p := threadID(r)
	if p != nil {
		return p
	}
	expect, anyVersion, hasIfMatch, p := parseIfMatch(r)
	if p != nil {
		return p
	}
	key, p := idempotencyKey(r)
	if p != nil {
		return p
	}
	evs, index, p := s.requestEvents(r, tenant, id, key)
	if p != nil {
		return p
	}
	opt := client.AnyVersion()
	if hasIfMatch && !anyVersion {
		opt = client.ExpectVersion(expect)
	}
	res, err := s.c.Append(r.Context(), tenant, id, evs, opt)
	if err != nil {
		return problemFor(err, errCtx{thread: id, ifMatch: hasIfMatch && !anyVersion, eventIndex: index, idemKey: key,
			fieldPrefix: func(i int) string { return fmt.Sprintf("events[%d].", i) }})
	}
	out := appendResponse{Tenant: tenant, Thread: id, Version: res.Version, Duplicate: res.Duplicate}
	for _, st := range res.Events {
		out.Events = append(out.Events, appendedEvent{ID: st.ID, Type: st.Type, Seq: st.Seq})
	}
	w.Header().Set("ETag", etag(res.Version))
	return writeJSON(w, http.StatusCreated, out)
}

// requestEvents reads the events of an append request to thread id of
// tenant: each decoded and checked (decodeAppendEvent), with its id (from
// the Idempotency-Key key when given, else a new one) and producer filled
// in, and the index of each event id in the request. It returns the
// problem naming the first thing wrong: the body, the number of events,
// an event, an id given twice.
func (s *Server) requestEvents(r *http.Request, tenant, id, key string) ([]events.Event, map[string]int, *Problem) {
	body, p := readJSON(r, false)
	if p != nil {
		return nil, nil, p
	}
	var req appendRequest
	raws, members, ok := readAppendBody(body)
	if ok {
		req.Events = raws
	} else if p := decodeBody(body, &req, true); p != nil {
		return nil, nil, p
	}
	if len(req.Events) == 0 {
		return nil, nil, invalid("events", "events must hold at least one event")
	}
	if len(req.Events) > client.MaxTurnEvents {
		q := invalid("events", fmt.Sprintf("%d events: at most %d commit atomically", len(req.Events), client.MaxTurnEvents))
		q.Limit = client.MaxTurnEvents
		return nil, nil, q
	}
	evs := make([]events.Event, len(req.Events))
	index := make(map[string]int, len(evs))
	for i, raw := range req.Events {
		var m *eventMembers
		if members != nil {
			m = &members[i]
		}
		e, p := decodeAppendEvent(raw, m, i, id)
		if p != nil {
			return nil, nil, p
		}
		if e.ID == "" {
			if key != "" {
				e.ID = idemID(tenant, id, key, "event:"+strconv.Itoa(i))
			} else {
				e.ID = events.NewID()
			}
		}
		if e.Producer == "" {
			e.Producer = s.cfg.Producer
		}
		if _, dup := index[e.ID]; dup {
			return nil, nil, invalid(fmt.Sprintf("events[%d].id", i), fmt.Sprintf("event id %s appears twice in the request", e.ID)).index(i).thread(id)
		}
		index[e.ID] = i
		evs[i] = e
	}
	return evs, index, nil
}

// decodeAppendEvent decodes event i of an append to thread id, or returns
// the problem naming the exact field: an unknown envelope field, a payload
// its schema refuses, a type or schema version this server does not know,
// or thread.erased (which only the erase route writes). m is the event's
// members when readAppendBody read them, else nil.
func decodeAppendEvent(raw json.RawMessage, m *eventMembers, i int, id string) (events.Event, *Problem) {
	f := fmt.Sprintf("events[%d]", i)
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return events.Event{}, invalid(f, f+" must be an event object {\"type\": ..., \"payload\": {...}}").index(i)
	}
	var err error
	if m == nil {
		var read eventMembers
		read, err = readEventMembers(raw)
		m = &read
	}
	members := *m
	if name := unknownEnvelopeField(members.keys); name != "" {
		// Refused as an unknown field at any depth of the payload is.
		field := f + "." + name
		detail := field + ": unknown field"
		if name == "seq" || name == "stored_at" {
			detail += " (a stored event's; the log assigns it)"
		}
		return events.Event{}, invalid(field, detail).index(i).thread(id)
	}
	if err == nil && members.typeOK && len(members.payload) > 0 {
		// The payload's schema (schemas/) is strict at every depth and
		// names the exact field.
		if path, msg := members.payloadProblem(); msg != "" {
			field := joinPath(f+".payload", path)
			return events.Event{}, invalid(field, field+": "+msg).index(i).thread(id)
		}
	}
	e, ok := members.decode(raw)
	if !ok {
		if err := json.Unmarshal(raw, &e); err != nil {
			return events.Event{}, decodeProblem(err, f).index(i).thread(id)
		}
	}
	if e.Type == events.TypeErased {
		return events.Event{}, invalid(f+".type", "thread.erased is written by POST /v1/threads/{id}/erase only").index(i).thread(id)
	}
	return e, nil
}

// decodeProblem is the problem of err, the error of decoding event f
// ("events[1]") of an append.
func decodeProblem(err error, f string) *Problem {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		// The envelope decodes through an embedded struct, whose
		// name is no field of the request.
		typ.Field = strings.TrimPrefix(typ.Field, "wire.")
		return jsonProblem(typ, f+".")
	}
	field := f + ".payload"
	switch {
	case errors.Is(err, events.ErrUnknownType):
		field = f + ".type"
	case errors.Is(err, events.ErrNewerSchema):
		field = f + ".v"
	case strings.Contains(err.Error(), "cannot unmarshal") && !strings.Contains(err.Error(), "payload"):
		field = f
	}
	return invalid(field, fmt.Sprintf("%s: %v", f, err))
}

// forkRequest is the body of POST /v1/threads/{id}/fork.
type forkRequest struct {
	AtSeq uint64 `json:"at_seq"`
	ID    string `json:"id"`
}

func (s *Server) forkThread(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	id, p := threadID(r)
	if p != nil {
		return p
	}
	var req forkRequest
	if p := decodeJSON(r, &req, true, true); p != nil {
		return p
	}
	key, p := idempotencyKey(r)
	if p != nil {
		return p
	}
	switch {
	case req.ID != "":
		if err := events.ValidateThreadID(req.ID); err != nil {
			return newProblem(http.StatusBadRequest, "bad-id", "Invalid id", err.Error()).field("id")
		}
	case key != "":
		req.ID = "t-" + idemID(tenant, id, key, "fork")
	default:
		req.ID = events.NewID()
	}
	src, err := s.c.Get(r.Context(), tenant, id, client.Consistent())
	if err != nil {
		return err
	}
	if req.AtSeq > src.Version {
		return invalid("at_seq", fmt.Sprintf("at_seq %d is past the thread's version %d", req.AtSeq, src.Version)).thread(id).seq(req.AtSeq)
	}
	_, nthread, version, err := s.c.Fork(r.Context(), tenant, id, client.ForkOptions{AtSeq: req.AtSeq, Tenant: tenant, ThreadID: req.ID})
	switch {
	case errors.Is(err, client.ErrThreadExists):
		// (client.Fork answers a retry of the same fork with that fork.)
		return newProblem(http.StatusConflict, "thread-exists", "Thread exists",
			fmt.Sprintf("thread %q already exists: choose another id for the fork", req.ID)).field("id").thread(req.ID)
	case errors.Is(err, client.ErrThreadNotFound) && req.AtSeq != 0:
		return invalid("at_seq", fmt.Sprintf("the thread has no events at or before seq %d", req.AtSeq)).thread(id).seq(req.AtSeq)
	case err != nil:
		return err
	}
	th, err := s.c.Get(r.Context(), tenant, nthread, client.AtLeastVersion(version))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/threads/"+nthread)
	return writeThread(w, r, http.StatusCreated, th)
}

// reasonRequest is the optional body of DELETE and undelete.
type reasonRequest struct {
	Reason string `json:"reason"`
}

// lifecycleResponse answers delete and undelete.
type lifecycleResponse struct {
	Tenant  string `json:"tenant"`
	Thread  string `json:"thread"`
	Version uint64 `json:"version"`
	Deleted bool   `json:"deleted"`
}

func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request) error {
	return s.setDeleted(w, r, true)
}

func (s *Server) undeleteThread(w http.ResponseWriter, r *http.Request) error {
	return s.setDeleted(w, r, false)
}

// setDeleted soft-deletes or undeletes; both are idempotent: a thread
// already in the wanted state answers 200 with its version.
func (s *Server) setDeleted(w http.ResponseWriter, r *http.Request, del bool) error {
	tenant := tenantOf(r.Context())
	id, p := threadID(r)
	if p != nil {
		return p
	}
	var req reasonRequest
	if p := decodeJSON(r, &req, true, true); p != nil {
		return p
	}
	// Both are idempotent in client: a thread already in the wanted state
	// is left as it is.
	var version uint64
	var err error
	if del {
		version, err = s.c.Delete(r.Context(), tenant, id, req.Reason)
	} else {
		version, err = s.c.Undelete(r.Context(), tenant, id, req.Reason)
	}
	if err != nil {
		return problemFor(err, errCtx{thread: id})
	}
	w.Header().Set("ETag", etag(version))
	return writeJSON(w, http.StatusOK, lifecycleResponse{Tenant: tenant, Thread: id, Version: version, Deleted: del})
}

// eraseRequest is the body of POST /v1/threads/{id}/erase.
type eraseRequest struct {
	Confirm bool   `json:"confirm"`
	Reason  string `json:"reason"`
}

// redactRequest is the body of POST /v1/threads/{id}/redact.
type redactRequest struct {
	Confirm bool     `json:"confirm"`
	Seq     uint64   `json:"seq"`
	Fields  []string `json:"fields"`
	Reason  string   `json:"reason"`
}

// redactResponse is client.RedactionReport as JSON.
type redactResponse struct {
	Tenant       string   `json:"tenant"`
	Thread       string   `json:"thread"`
	Seq          uint64   `json:"seq"`
	EventID      string   `json:"event_id"`
	Type         string   `json:"type"`
	Fields       []string `json:"fields"`
	Version      uint64   `json:"version"`
	SnapshotKeys []string `json:"snapshot_keys"`
}

// redactEvent makes the content of one event unreadable (client.Redact).
func (s *Server) redactEvent(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	id, p := threadID(r)
	if p != nil {
		return p
	}
	var req redactRequest
	if p := decodeJSON(r, &req, true, false); p != nil {
		return p
	}
	if !req.Confirm {
		return invalid("confirm", `redaction destroys the event's key irreversibly: send {"confirm": true}`).thread(id)
	}
	if req.Seq == 0 {
		return invalid("seq", "the stream sequence of the event to redact is required").thread(id)
	}
	for i, f := range req.Fields {
		if !slices.Contains(events.RedactableFields, f) {
			return invalid(fmt.Sprintf("fields[%d]", i), fmt.Sprintf("%q is not a redactable field (%s)", f, strings.Join(events.RedactableFields, ", "))).thread(id)
		}
	}
	rep, err := s.c.Redact(r.Context(), tenant, id, req.Seq, req.Fields, req.Reason)
	if err != nil {
		return err
	}
	out := redactResponse{Tenant: rep.Tenant, Thread: rep.Thread, Seq: rep.Seq, EventID: rep.EventID, Type: string(rep.Type),
		Fields: rep.Fields, Version: rep.Version, SnapshotKeys: rep.SnapshotKeys}
	if out.SnapshotKeys == nil {
		out.SnapshotKeys = []string{}
	}
	return writeJSON(w, http.StatusOK, out)
}

// eraseResponse is client.ErasureReport as JSON.
type eraseResponse struct {
	Tenant        string   `json:"tenant"`
	Thread        string   `json:"thread"`
	RemovedEvents uint64   `json:"removed_events"`
	LastSeq       uint64   `json:"last_seq"`
	SnapshotKeys  []string `json:"snapshot_keys"`
	IndexKeys     []string `json:"index_keys"`
	Blobs         []string `json:"blobs"`
	KeyDestroyed  bool     `json:"key_destroyed"`
}

func (s *Server) eraseThread(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	id, p := threadID(r)
	if p != nil {
		return p
	}
	var req eraseRequest
	if p := decodeJSON(r, &req, true, false); p != nil {
		return p
	}
	if !req.Confirm {
		return invalid("confirm", `erasure purges the thread's events irreversibly: send {"confirm": true}`).thread(id)
	}
	rep, err := s.c.Erase(r.Context(), tenant, id, req.Reason)
	if err != nil {
		return err
	}
	out := eraseResponse{Tenant: rep.Tenant, Thread: rep.Thread, RemovedEvents: rep.RemovedEvents, LastSeq: rep.LastSeq,
		SnapshotKeys: rep.SnapshotKeys, IndexKeys: rep.IndexKeys, Blobs: rep.Blobs,
		KeyDestroyed: rep.KeyDestroyed}
	if out.Blobs == nil {
		out.Blobs = []string{}
	}
	if out.SnapshotKeys == nil {
		out.SnapshotKeys = []string{}
	}
	if out.IndexKeys == nil {
		out.IndexKeys = []string{}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) exportThread(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	id, p := threadID(r)
	if p != nil {
		return p
	}
	format := r.URL.Query().Get("format")
	switch format {
	case "":
		format = string(client.ExportEvents)
	case string(client.ExportEvents), string(client.ExportOpenAI):
	default:
		return badRequest("bad-query", fmt.Sprintf("format must be %q or %q, got %q", client.ExportOpenAI, client.ExportEvents, format)).field("format")
	}
	lw := &lazyWriter{w: w, start: func(h http.Header) {
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s.jsonl"`, id, format))
		h.Set("X-Accel-Buffering", "no")
	}}
	err := s.c.ExportThread(r.Context(), tenant, id, client.ExportFormat(format), lw)
	if err != nil {
		return err
	}
	if !lw.started {
		return notFound(id)
	}
	return nil
}

// lazyWriter sets the response headers on the first write, so an export
// that fails before writing anything can still answer with a problem.
type lazyWriter struct {
	w       http.ResponseWriter
	start   func(http.Header)
	started bool
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	if !l.started {
		l.started = true
		l.start(l.w.Header())
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(b)
}

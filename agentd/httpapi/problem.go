package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// ProblemTypePrefix prefixes the type URI of every problem this API
// returns: "urn:convlog:problem:" + the problem's slug, e.g.
// "urn:convlog:problem:version-conflict".
const ProblemTypePrefix = "urn:convlog:problem:"

// Problem is an RFC 9457 problem details object, served as
// application/problem+json. Type, Title and Status are always set; the
// extension members name the field, thread, sequence and versions involved
// where they are known.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`

	// Code is a stable machine-readable code: the slug of Type, or for
	// events the fold rejected, the fold's rejection code
	// (e.g. "tool_call_not_pending").
	Code string `json:"code,omitempty"`
	// Field is the request field at fault, as a path ("events[1].payload.content",
	// "at_seq", "If-Match").
	Field string `json:"field,omitempty"`
	// Thread is the thread id involved.
	Thread string `json:"thread,omitempty"`
	// Seq is the stream sequence involved (a rejected event's would-be
	// sequence, the message a chat history diverged at).
	Seq uint64 `json:"seq,omitempty"`
	// EventID is the id of the event involved.
	EventID string `json:"event_id,omitempty"`
	// Index is the position of the offending item in the request (an event
	// of an append, a message of a chat request).
	Index *int `json:"index,omitempty"`
	// ExpectedVersion and CurrentVersion accompany version conflicts: the
	// current version is the one to retry with.
	ExpectedVersion *uint64 `json:"expected_version,omitempty"`
	CurrentVersion  *uint64 `json:"current_version,omitempty"`
	// Limit is the limit exceeded (bytes, events).
	Limit int64 `json:"limit,omitempty"`
	// OpenAI is the OpenAI error object ("error"), set on the OpenAI-compatible routes
	// so that OpenAI SDKs read the message.
	OpenAI *OpenAIError `json:"error,omitempty"`

	headers http.Header
	// cause is the error behind a 500: logged with the problem's
	// reference, never sent (it may name NATS subjects and servers).
	cause error
}

// OpenAIError is the "error" member OpenAI clients look for.
type OpenAIError struct {
	// Message is the problem's detail (or title).
	Message string `json:"message"`
	// Type is OpenAI's error class: "invalid_request_error",
	// "authentication_error", "not_found_error", "conflict_error" or
	// "server_error".
	Type string `json:"type"`
	// Param is the problem's field, Code its code.
	Param *string `json:"param"`
	Code  *string `json:"code"`
}

// Error implements error.
func (p *Problem) Error() string {
	s := fmt.Sprintf("%d %s", p.Status, p.Title)
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	return s
}

func newProblem(status int, slug, title, detail string) *Problem {
	return &Problem{Type: ProblemTypePrefix + slug, Title: title, Status: status, Detail: detail, Code: slug}
}

func (p *Problem) header(k, v string) *Problem {
	if p.headers == nil {
		p.headers = http.Header{}
	}
	p.headers.Set(k, v)
	return p
}

func (p *Problem) field(f string) *Problem    { p.Field = f; return p }
func (p *Problem) thread(t string) *Problem   { p.Thread = t; return p }
func (p *Problem) index(i int) *Problem       { p.Index = &i; return p }
func (p *Problem) seq(s uint64) *Problem      { p.Seq = s; return p }
func (p *Problem) eventID(id string) *Problem { p.EventID = id; return p }

// Problem constructors for the common cases.
func badRequest(slug, detail string) *Problem {
	return newProblem(http.StatusBadRequest, slug, "Bad request", detail)
}

func invalid(field, detail string) *Problem {
	return newProblem(http.StatusUnprocessableEntity, "invalid-request", "Invalid request", detail).field(field)
}

func notFound(thread string) *Problem {
	return newProblem(http.StatusNotFound, "not-found", "Thread not found",
		fmt.Sprintf("thread %q does not exist for this tenant", thread)).thread(thread)
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *Problem) {
	for k, vs := range p.headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if p.Status >= 400 && p.Status < 500 && p.Status != http.StatusRequestTimeout && p.Status != http.StatusTooManyRequests {
		// OpenAI SDKs retry 409 by default; a conflict here needs a new
		// decision, not the same request again.
		w.Header().Set("X-Should-Retry", "false")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	b, _ := json.Marshal(p)
	_, _ = w.Write(append(b, '\n'))
}

// errCtx is what a handler knows about an error's circumstances.
type errCtx struct {
	thread  string
	ifMatch bool
	// eventIndex maps event ids of an append to their request positions.
	eventIndex map[string]int
	// fieldPrefix prefixes event field paths ("events[1].").
	fieldPrefix func(i int) string
	// idemKey is the request's Idempotency-Key ("" without one).
	idemKey string
}

// problemFor maps an error from client/, events/ or projector/ to a
// problem (see doc.go for the table): the first of problemRules that
// matches, else 500 internal with the cause logged under a reference.
func problemFor(err error, ec errCtx) *Problem {
	for _, rule := range problemRules {
		if p := rule(err, ec); p != nil {
			return p
		}
	}
	q := newProblem(http.StatusInternalServerError, "internal", "Internal error",
		"the request failed inside the server; the cause is logged under reference "+newRef())
	q.cause = err
	return q.thread(ec.thread)
}

// problemRule maps err to a problem, or returns nil when err is not its kind.
type problemRule func(err error, ec errCtx) *Problem

// problemRules are tried in order; the order settles errors of several
// kinds (a *client.NotFoundError before the bare ErrThreadNotFound, an
// overload before the deadline it ended with).
var problemRules = []problemRule{
	typed(func(p *Problem, _ errCtx) *Problem { return p }),
	typed(func(e *http.MaxBytesError, _ errCtx) *Problem { return tooLargeBody(e.Limit) }),
	typed(func(e *client.ConvKeyError, _ errCtx) *Problem { return invalid(e.Source, e.Error()) }),
	typed(idProblem),
	typed(validationProblem),
	typed(rejectionProblem),
	typed(idempotencyProblem),
	is(client.ErrNotRedactable, func(err error, ec errCtx) *Problem {
		return newProblem(http.StatusUnprocessableEntity, "not-redactable", "Event cannot be redacted",
			strings.TrimPrefix(err.Error(), "client: ")).thread(ec.thread).field("seq")
	}),
	is(client.ErrThreadExists, func(_ error, ec errCtx) *Problem {
		return newProblem(http.StatusConflict, "thread-exists", "Thread exists",
			fmt.Sprintf("thread %q already exists: choose another id or omit it", ec.thread)).thread(ec.thread).field("id")
	}),
	typed(conflictProblem),
	typed(func(e *client.NotFoundError, ec errCtx) *Problem {
		q := notFound(ec.thread)
		if e.Reason != "" && !errors.Is(e, client.ErrThreadDeleted) {
			q.Detail += " (" + e.Reason + ")"
		}
		return q
	}),
	is(client.ErrThreadNotFound, func(_ error, ec errCtx) *Problem { return notFound(ec.thread) }),
	typed(tooLargeProblem),
	typed(quotaProblem),
	is(client.ErrStorageFull, func(err error, ec errCtx) *Problem {
		return storageFullProblem(strings.TrimPrefix(err.Error(), "client: ") + "; nothing was stored").thread(ec.thread)
	}),
	is(client.ErrOverloaded, func(err error, ec errCtx) *Problem {
		return overloadedProblem(strings.TrimPrefix(err.Error(), "client: ")).thread(ec.thread)
	}),
	is(client.ErrBadCursor, func(err error, _ errCtx) *Problem { return badRequest("bad-cursor", err.Error()).field("cursor") }),
	is(client.ErrClosed, func(error, errCtx) *Problem {
		return newProblem(http.StatusServiceUnavailable, "unavailable", "Service unavailable", "the server is shutting down")
	}),
	is(context.DeadlineExceeded, func(err error, ec errCtx) *Problem {
		return newProblem(http.StatusGatewayTimeout, "timeout", "Timeout", err.Error()).thread(ec.thread)
	}),
	is(context.Canceled, func(err error, ec errCtx) *Problem {
		return newProblem(499, "canceled", "Request canceled", err.Error()).thread(ec.thread)
	}),
}

// typed is the rule for errors of type T (errors.As).
func typed[T error](f func(T, errCtx) *Problem) problemRule {
	return func(err error, ec errCtx) *Problem {
		var e T
		if !errors.As(err, &e) {
			return nil
		}
		return f(e, ec)
	}
}

// is is the rule for errors that wrap target (errors.Is).
func is(target error, f func(error, errCtx) *Problem) problemRule {
	return func(err error, ec errCtx) *Problem {
		if !errors.Is(err, target) {
			return nil
		}
		return f(err, ec)
	}
}

// position is the request position of the event with id, if the request
// has one.
func (ec errCtx) position(id string) (int, bool) {
	i, ok := ec.eventIndex[id]
	return i, ok
}

// pathOf is the field path prefix of the event with id ("events[1]."),
// or "" when it is not in the request.
func (ec errCtx) pathOf(id string) string {
	if i, ok := ec.position(id); ok && ec.fieldPrefix != nil {
		return ec.fieldPrefix(i)
	}
	return ""
}

// at sets q's index to the request position of the event with id, if any.
func (ec errCtx) at(q *Problem, id string) *Problem {
	if i, ok := ec.position(id); ok {
		q.index(i)
	}
	return q
}

func idProblem(e *events.IDError, ec errCtx) *Problem {
	f := "id"
	if e.Kind == "tenant" {
		f = "tenant"
	}
	return newProblem(http.StatusBadRequest, "bad-id", "Invalid id", e.Error()).field(f).thread(ec.thread)
}

func validationProblem(e *events.ValidationError, ec errCtx) *Problem {
	q := newProblem(http.StatusUnprocessableEntity, "invalid-event", "Invalid event", e.Error()).
		field(ec.pathOf(e.EventID) + e.Field).thread(ec.thread).eventID(e.EventID)
	return ec.at(q, e.EventID)
}

func rejectionProblem(e *fold.RejectionError, ec errCtx) *Problem {
	var q *Problem
	switch e.Code {
	case fold.CodeNoThread, fold.CodeErased:
		q = notFound(ec.thread)
		q.Detail += " (" + e.Reason + ")"
	default:
		q = newProblem(http.StatusUnprocessableEntity, "rejected", "Event rejected", e.Error())
		q.Code = string(e.Code)
	}
	q.thread(ec.thread).seq(e.Seq).eventID(e.EventID)
	return ec.at(q, e.EventID)
}

// idempotencyProblem is 422 as the IETF Idempotency-Key draft answers a
// key reused with another payload (draft-ietf-httpapi-idempotency-key-header, 2.7).
func idempotencyProblem(e *client.IdempotencyMismatchError, ec errCtx) *Problem {
	detail := strings.TrimPrefix(e.Error(), "client: ")
	field := ec.pathOf(e.EventID) + "id"
	if ec.idemKey != "" {
		detail = fmt.Sprintf("Idempotency-Key %q was first used with a different request (%s); use a new key for a new request", ec.idemKey, detail)
		field = "Idempotency-Key"
	}
	q := newProblem(http.StatusUnprocessableEntity, "idempotency-mismatch", "Idempotency key reused", detail).
		field(field).thread(ec.thread).seq(e.Seq).eventID(e.EventID)
	return ec.at(q, e.EventID)
}

func conflictProblem(e *client.ConflictError, ec errCtx) *Problem {
	exp, cur := e.Expected, e.Actual
	var q *Problem
	if ec.ifMatch {
		q = newProblem(http.StatusPreconditionFailed, "version-conflict", "Version conflict",
			fmt.Sprintf("If-Match named version %d but thread %q is at version %d: reload it and retry with If-Match: \"%d\"", exp, ec.thread, cur, cur))
	} else {
		q = newProblem(http.StatusConflict, "conflict", "Conflict", e.Error())
	}
	q.ExpectedVersion, q.CurrentVersion = &exp, &cur
	if cur != 0 {
		q.header("ETag", etag(cur))
	}
	return q.thread(ec.thread)
}

func tooLargeProblem(e *client.TooLargeError, ec errCtx) *Problem {
	q := newProblem(http.StatusRequestEntityTooLarge, "too-large", "Event too large", e.Error()).
		thread(ec.thread).eventID(e.EventID)
	q.Limit = int64(e.Limit)
	return ec.at(q, e.EventID)
}

// quotaProblem is 429 as for any quota (RFC 6585, 4): the tenant may
// write again when it frees space (storage) or after Retry-After (rate).
func quotaProblem(e *client.QuotaError, ec errCtx) *Problem {
	q := newProblem(http.StatusTooManyRequests, "quota-exceeded", "Quota exceeded", e.Error()+"; nothing was stored").thread(ec.thread)
	q.Code, q.Limit = e.Kind, e.Limit
	if e.Kind == "rate" {
		return q.header("Retry-After", strconv.Itoa(max(1, int(math.Ceil(e.RetryAfter.Seconds())))))
	}
	// The same request fails until space is freed: SDKs that retry 429
	// (openai) should not.
	return q.header("X-Should-Retry", "false")
}

// newRef is a short random reference that ties an answer to its log line.
func newRef() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storageFullProblem is 507 Insufficient Storage (RFC 4918, 11.5): the
// data store has no space for the write.
func storageFullProblem(detail string) *Problem {
	return newProblem(http.StatusInsufficientStorage, "storage-full", "Storage full", detail).header("Retry-After", "10")
}

// overloadedRetryAfter is the Retry-After (seconds) of an append the
// NATS server refused as busy: the client retried within the request
// already, so the caller waits a little before sending it again.
const overloadedRetryAfter = "1"

// overloadedProblem is 503 overloaded with Retry-After: the NATS server
// refused the write for load, or had no stream leader, on every attempt
// (client.ErrOverloaded). The request may be sent again as is.
func overloadedProblem(detail string) *Problem {
	return newProblem(http.StatusServiceUnavailable, "overloaded", "Overloaded", detail).header("Retry-After", overloadedRetryAfter)
}

func tooLargeBody(limit int64) *Problem {
	q := newProblem(http.StatusRequestEntityTooLarge, "too-large", "Request body too large",
		fmt.Sprintf("the request body exceeds %d bytes", limit))
	q.Limit = limit
	return q
}

// decodeJSON decodes the request body into v. An empty body is allowed
// when allowEmpty (v is left as is); it needs no Content-Type. Unknown
// fields are rejected when strict. Errors are problems: malformed JSON
// 400, wrong types and unknown fields 422, too large 413, a Content-Type
// other than application/json (charset=utf-8 or none), or none for a body,
// and a Content-Encoding other than identity 415 (mediatype.go).
func decodeJSON(r *http.Request, v any, strict, allowEmpty bool) *Problem {
	body, p := readJSON(r, allowEmpty)
	if p != nil || body == nil {
		return p
	}
	return decodeBody(body, v, strict)
}

// readJSON reads the request body as decodeJSON does: its problems, or nil
// and a nil body for an empty one when allowEmpty.
func readJSON(r *http.Request, allowEmpty bool) ([]byte, *Problem) {
	if p := codingProblem(r); p != nil {
		return nil, p
	}
	ct, hasCT := r.Header["Content-Type"]
	if hasCT || !allowEmpty {
		if p := mediaTypeProblem(strings.Join(ct, ", ")); p != nil {
			return nil, p
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, tooLargeBody(mb.Limit)
		}
		return nil, badRequest("malformed-json", "reading the body: "+err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return nil, nil
		}
		return nil, badRequest("malformed-json", "the request body is empty; send a JSON object")
	}
	if !hasCT {
		return nil, mediaTypeProblem("")
	}
	return body, nil
}

// decodeBody decodes body, a request body readJSON read, into v as
// decodeJSON does.
func decodeBody(body []byte, v any, strict bool) *Problem {
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err, "")
	}
	if dec.More() {
		return badRequest("malformed-json", "the body holds more than one JSON value")
	}
	return nil
}

// jsonProblem maps a json decoding error; prefix is prepended to field paths.
func jsonProblem(err error, prefix string) *Problem {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return badRequest("malformed-json", fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("malformed-json", "malformed JSON: the body ends early")
	case errors.As(err, &typ):
		f := prefix + typ.Field
		if typ.Field == "" {
			f = strings.TrimSuffix(prefix, ".")
		}
		return invalid(f, fmt.Sprintf("%s must be %s, got a JSON %s", orBody(f), jsonTypeName(typ.Type), typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return invalid(prefix+name, fmt.Sprintf("unknown field %q", name))
	}
	return invalid(strings.TrimSuffix(prefix, "."), err.Error())
}

func orBody(f string) string {
	if f == "" {
		return "the body"
	}
	return f
}

func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "of type " + t.String()
}

// onlyParams is a 400 bad-query naming the first (in sorted order) query
// parameter of q that is not one of allowed, with the parameters the route
// takes; nil when every one is allowed.
func onlyParams(q url.Values, allowed ...string) *Problem {
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(allowed, name) {
			return badRequest("bad-query", fmt.Sprintf("unknown query parameter %q (use %s)", name, strings.Join(allowed, ", "))).field(name)
		}
	}
	return nil
}

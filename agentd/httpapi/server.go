package httpapi

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/convlog/convlog/agentd/chat"
	"github.com/convlog/convlog/client"
	"github.com/rs/cors"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the embedded OpenAPI 3.1 document served at
// GET /openapi.json.
func OpenAPI() []byte { return slices.Clone(openAPIDoc) }

// Route is one endpoint the server registers.
type Route struct {
	// Method is the HTTP method (GET routes also answer HEAD).
	Method string
	// Path is the path pattern, with {name} wildcards as in OpenAPI.
	Path string
	// Public routes need no API key.
	Public bool
}

// Server serves the HTTP API. Create it with [New], mount [Server.Handler]
// on an http.Server, and call [Server.Shutdown] before http.Server.Shutdown.
type Server struct {
	cfg     Config
	c       *client.Client
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler
	routes  []Route
	agents  map[string]bool
	chat    *chat.Service
	started time.Time

	// base is canceled by Shutdown: long-lived handlers (SSE, chat
	// completions waiting for an answer) derive from it and end.
	base     context.Context
	stopBase context.CancelFunc
	// long counts long-lived handlers in flight, for Shutdown.
	long sync.WaitGroup
	// streams is the StreamTotalBytes budget shared by every event stream
	// and events page.
	streams *byteBudget
	// audits holds a token per verification in flight (Config.MaxAudits).
	audits chan struct{}
}

// New returns a server for cfg. It validates cfg (every problem at once).
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, c: cfg.Client, log: cfg.Logger, mux: http.NewServeMux(),
		agents: map[string]bool{}, started: time.Now(), streams: newByteBudget(cfg.StreamTotalBytes),
		audits: make(chan struct{}, cmp.Or(cfg.MaxAudits, DefaultMaxAudits))}
	for _, a := range cfg.Agents {
		s.agents[a] = true
	}
	s.chat = chat.New(cfg.Client, chat.Config{Producer: cfg.Producer, Logger: cfg.Logger})
	s.base, s.stopBase = context.WithCancel(context.Background())

	s.route("GET /openapi.json", true, false, s.getOpenAPI)
	s.route("GET /healthz", true, false, s.getHealth)
	s.route("GET /v1/models", false, false, s.listModels)
	s.route("GET /v1/models/{model}", false, false, s.getModel)
	s.route("POST /v1/chat/completions", false, true, s.chatCompletions)
	s.route("POST /v1/threads", false, false, s.createThread)
	s.route("GET /v1/threads", false, false, s.listThreads)
	s.route("GET /v1/threads/{id}", false, false, s.getThread)
	s.route("PUT /v1/threads/{id}", false, false, s.putThread)
	s.route("DELETE /v1/threads/{id}", false, false, s.deleteThread)
	s.route("POST /v1/threads/{id}/events", false, false, s.appendEvents)
	s.route("GET /v1/threads/{id}/events", false, true, s.getEvents)
	s.route("POST /v1/threads/{id}/fork", false, false, s.forkThread)
	s.route("POST /v1/threads/{id}/undelete", false, false, s.undeleteThread)
	s.route("POST /v1/threads/{id}/erase", false, false, s.eraseThread)
	s.route("POST /v1/threads/{id}/redact", false, false, s.redactEvent)
	s.route("GET /v1/threads/{id}/export", false, true, s.exportThread)
	s.route("GET /v1/threads/{id}/state", false, false, s.getState)
	s.route("GET /v1/threads/{id}/state/{key}", false, false, s.getStateKey)
	s.route("PUT /v1/threads/{id}/state/{key}", false, false, s.putStateKey)
	s.route("DELETE /v1/threads/{id}/state/{key}", false, false, s.deleteStateKey)
	s.route("GET /v1/threads/{id}/checkpoints", false, false, s.getCheckpoints)
	s.routeLimit("PUT /v1/threads/{id}/blobs/{name...}", false, true, cfg.MaxBlobBytes, s.putBlob)
	s.route("GET /v1/threads/{id}/blobs/{name...}", false, true, s.getBlob)
	s.route("DELETE /v1/threads/{id}/blobs/{name...}", false, false, s.deleteBlob)
	s.route("GET /v1/audit/key", true, false, s.getAuditKey)
	s.route("GET /v1/audit/verify", false, true, s.verifyTenant)
	s.route("GET /v1/threads/{id}/audit", false, true, s.verifyThread)
	s.mux.HandleFunc("/", s.unmatched)
	s.handler = s.mux
	if len(cfg.CORSOrigins) > 0 {
		s.handler = cors.New(cors.Options{
			AllowedOrigins: cfg.CORSOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete},
			AllowedHeaders: []string{"Authorization", "Content-Type", "Accept", "Idempotency-Key", "If-Match", "If-None-Match",
				"Last-Event-ID", "X-Conversation-Id", "X-LibreChat-Conversation-Id", "X-OpenWebUI-Chat-Id"},
			ExposedHeaders: []string{"ETag", "Location", "Retry-After", "X-Convlog-Thread", "X-Conversation-Id",
				"X-Convlog-Conversation-Tier", "X-Convlog-Stateless"},
			MaxAge: 600,
		}).Handler(s.mux)
	}
	return s, nil
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.handler }

// Routes returns the registered endpoints (the OpenAPI document lists
// exactly these; a test checks it).
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// AuthEnabled reports whether requests need an API key. agentd serve
// refuses to listen on a non-loopback address when it is false, unless
// forced.
func (s *Server) AuthEnabled() bool { return s.cfg.Auth.Enabled() }

// Shutdown ends the long-lived requests: it
//
//  1. cancels every SSE stream (after a final "event: shutdown" frame) and
//     every chat completion still waiting for its answer (503; the answer
//     still lands in the thread), so their handlers return;
//  2. waits for those handlers until ctx ends.
//
// Call it before (or register it with http.Server.RegisterOnShutdown
// through a goroutine) http.Server.Shutdown, which waits for handlers to
// return and would otherwise wait for every open stream. Requests that
// arrive later are served normally except that streams end at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopBase()
	done := make(chan struct{})
	go func() { s.long.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("httpapi: shutdown: %w (streams still open)", ctx.Err())
	}
}

// handlerFunc serves one route; a returned error becomes a problem
// response unless the handler already wrote a response.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route registers pattern. long marks handlers that may run for long
// (streams, waits): they are tracked for Shutdown.
func (s *Server) route(pattern string, public, long bool, h handlerFunc) {
	s.routeLimit(pattern, public, long, s.cfg.MaxBodyBytes, h)
}

// routeLimit is route with its own request body limit (bytes; 0 = none).
func (s *Server) routeLimit(pattern string, public, long bool, maxBody int64, h handlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	// Routes name a rest-of-path wildcard as OpenAPI does: {name}.
	s.routes = append(s.routes, Route{Method: method, Path: strings.ReplaceAll(path, "...}", "}"), Public: public})
	openai := strings.HasPrefix(path, "/v1/chat/") || strings.HasPrefix(path, "/v1/models")
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		rc := http.NewResponseController(w)
		if long {
			// Exempt from ResponseTimeout: every write gets its own
			// WriteTimeout deadline instead.
			rec.rc, rec.perWrite = rc, s.cfg.WriteTimeout
		}
		tenant := ""
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panicked", "route", pattern, "panic", v)
				if !rec.wrote {
					writeProblem(rec, newProblem(http.StatusInternalServerError, "internal", "Internal error", "the request failed inside the server; the cause is logged"))
				}
			}
			took := time.Since(start)
			s.log.Debug("request", "route", pattern, "tenant", tenant, "status", rec.status(), "took", took)
			if s.cfg.Hooks.Request != nil {
				s.cfg.Hooks.Request(RequestInfo{Route: pattern, Tenant: tenant, Status: rec.status(), Took: took})
			}
		}()
		if long {
			s.long.Add(1)
			defer s.long.Done()
		}
		if !public {
			t, p := s.authenticate(r)
			if p != nil {
				s.fail(rec, r, p, openai)
				return
			}
			tenant = t
			r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, t))
		}
		if p := queryProblem(r.URL.RawQuery); p != nil {
			s.fail(rec, r, p, openai)
			return
		}
		if maxBody > 0 && r.ContentLength > maxBody {
			// Answered before reading anything: no "100 Continue" goes
			// out for a body that would be refused, and the connection
			// closes after the answer.
			s.fail(rec, r, tooLargeBody(maxBody).header("Connection", "close"), openai)
			return
		}
		if r.Body != nil && maxBody > 0 {
			r.Body = http.MaxBytesReader(rec, r.Body, maxBody)
		}
		s.watchBody(rec, rc, r)
		if err := h(rec, r); err != nil {
			if rec.wrote {
				s.log.Warn("request failed after the response started", "route", pattern, "tenant", tenant, "err", err)
				return
			}
			s.fail(rec, r, problemFor(err, errCtx{thread: r.PathValue("id")}), openai)
		}
	})
}

// storageProblem turns p, the answer to a write, into 507 storage-full
// while Config.Storage reports a full store and p says the server did not
// answer in time (503, 504): the cause is the disk, not the network.
func (s *Server) storageProblem(r *http.Request, p *Problem) *Problem {
	if s.cfg.Storage == nil || r.Method == http.MethodGet || r.Method == http.MethodHead ||
		p.Status != http.StatusServiceUnavailable && p.Status != http.StatusGatewayTimeout {
		return p
	}
	serr := s.cfg.Storage()
	if serr == nil {
		return p
	}
	q := storageFullProblem(serr.Error() + "; retry the same request (same event ids or Idempotency-Key) once space is freed: it is stored at most once")
	q.Thread, q.cause = p.Thread, p.cause
	return q
}

// queryProblem is a 400 bad-query naming the first parameter of rawQuery
// that is not valid URL encoding (a handler would otherwise see it as
// absent), or nil.
func queryProblem(rawQuery string) *Problem {
	if _, err := url.ParseQuery(rawQuery); err == nil {
		return nil
	}
	for pair := range strings.SplitSeq(rawQuery, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, kerr := url.QueryUnescape(k)
		if kerr != nil {
			return badRequest("bad-query", fmt.Sprintf("query parameter name %q is not valid URL encoding: %v", k, kerr)).field(k)
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return badRequest("bad-query", fmt.Sprintf("query parameter %s: %q is not valid URL encoding (%v)", name, v, err)).field(name)
		}
		if strings.Contains(k, ";") || strings.Contains(v, ";") {
			return badRequest("bad-query", fmt.Sprintf("query parameter %s: a semicolon is not a separator; encode it as %%3B", name)).field(name)
		}
	}
	return badRequest("bad-query", "the query string is not valid URL encoding")
}

// fail writes p; on OpenAI routes it also carries the OpenAI error object.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, p *Problem, openai bool) {
	p = s.storageProblem(r, p)
	if p.Instance == "" {
		p.Instance = r.URL.Path
	}
	if openai && p.OpenAI == nil {
		p.OpenAI = openAIErrorOf(p)
	}
	if p.Status >= 500 {
		s.log.Error("request failed", "path", r.URL.Path, "status", p.Status, "detail", p.Detail, "err", p.cause)
	}
	writeProblem(w, p)
}

func openAIErrorOf(p *Problem) *OpenAIError {
	typ := "invalid_request_error"
	switch {
	case p.Status == http.StatusUnauthorized:
		typ = "authentication_error"
	case p.Status == http.StatusNotFound:
		typ = "not_found_error"
	case p.Status == http.StatusConflict:
		typ = "conflict_error"
	case p.Status >= 500:
		typ = "server_error"
	}
	msg := p.Title
	if p.Detail != "" {
		msg = p.Detail
	}
	e := &OpenAIError{Message: msg, Type: typ}
	if p.Field != "" {
		f := p.Field
		e.Param = &f
	}
	if p.Code != "" {
		c := p.Code
		e.Code = &c
	}
	return e
}

// unmatched answers paths no route matches: 405 with Allow when the path
// exists for other methods, else 404. Both are problems.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, rt := range s.routes {
		if pathMatches(rt.Path, r.URL.Path) {
			allow = append(allow, rt.Method)
			if rt.Method == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	if len(allow) > 0 {
		p := newProblem(http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed",
			fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		p.header("Allow", strings.Join(allow, ", "))
		s.fail(w, r, p, false)
		return
	}
	s.fail(w, r, newProblem(http.StatusNotFound, "no-route", "Not found",
		fmt.Sprintf("no endpoint at %s; see /openapi.json", r.URL.Path)), false)
}

func pathMatches(pattern, path string) bool {
	ps, qs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(qs) {
		return false
	}
	for i := range ps {
		if strings.HasPrefix(ps[i], "{") {
			if qs[i] == "" {
				return false
			}
			continue
		}
		if ps[i] != qs[i] {
			return false
		}
	}
	return true
}

func (s *Server) getOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, err := w.Write(openAPIDoc)
	return err
}

func (s *Server) getHealth(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.NC != nil && !s.cfg.NC.IsConnected() {
		return newProblem(http.StatusServiceUnavailable, "unavailable", "Service unavailable",
			"not connected to NATS (status "+s.cfg.NC.Status().String()+")")
	}
	if s.cfg.Storage != nil {
		if err := s.cfg.Storage(); err != nil {
			return newProblem(http.StatusServiceUnavailable, "storage-full", "Storage full", err.Error())
		}
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

// recorder remembers whether and with which status a response started.
// On long routes (rc set) every write first sets a write deadline of
// perWrite. Once sealed (a 408 was sent for a body that did not arrive)
// it ignores what the handler still writes.
type recorder struct {
	http.ResponseWriter
	code     int
	wrote    bool
	sealed   bool
	rc       *http.ResponseController
	perWrite time.Duration
}

// errSealed is what writes to a sealed recorder return.
var errSealed = errors.New("httpapi: the response was already sent (request timeout)")

func (r *recorder) deadline() {
	if r.rc != nil {
		_ = r.rc.SetWriteDeadline(time.Now().Add(r.perWrite))
	}
}

func (r *recorder) WriteHeader(code int) {
	if r.sealed {
		return
	}
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.deadline()
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.sealed {
		return 0, errSealed
	}
	if !r.wrote {
		r.code, r.wrote = http.StatusOK, true
	}
	r.deadline()
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flush, write
// deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.code
}

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/internal/agenttest"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/projector"
)

// API keys of the test tenants.
const (
	keyAcme   = "sk-acme-0123456789"
	keyGlobex = "sk-globex-0123456789"
)

// env is a running API: embedded JetStream, agent workers (offline model,
// agent "demo"), the HTTP server, and two tenants with API keys.
type env struct {
	t   testing.TB
	ns  *natstest.Server
	c   *client.Client
	api *httpapi.Server
	srv *httptest.Server

	mu      sync.Mutex
	dropped []httpapi.StreamDrop
	chats   []httpapi.ChatInfo
}

// envSettings are what envOptions change.
type envSettings struct {
	cfg       httpapi.Config
	noWorkers bool
	projector bool
	client    []func(*client.Config)
}

type envOption func(*envSettings)

// withConfig changes the API's configuration.
func withConfig(f func(*httpapi.Config)) envOption { return func(s *envSettings) { f(&s.cfg) } }

// withProjector also runs a projector (snapshots and the thread index that
// List reads).
func withProjector() envOption { return func(s *envSettings) { s.projector = true } }

// withClientConfig changes the configuration of the client the API uses.
func withClientConfig(f func(*client.Config)) envOption {
	return func(s *envSettings) { s.client = append(s.client, f) }
}

// withoutWorkers runs no agent workers.
func withoutWorkers() envOption { return func(s *envSettings) { s.noWorkers = true } }

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	var set envSettings
	for _, o := range opts {
		o(&set)
	}
	var copts []clienttest.Option
	if set.projector {
		copts = append(copts, clienttest.WithProjector(projector.Config{}))
	}
	for _, f := range set.client {
		copts = append(copts, clienttest.WithConfig(f))
	}
	ce := clienttest.New(t, copts...)
	ns, c := ce.Server, ce.Client
	if !set.noWorkers {
		agenttest.RunWorkers(t, c, ns.NC, worker.Config{Agents: agenttest.Demo(t, time.Millisecond), Concurrency: 4})
	}
	e := &env{t: t, ns: ns, c: c}
	cfg := set.cfg
	base := httpapi.Config{Client: c, NC: ns.NC, Agents: []string{"demo"},
		Auth:          httpapi.Auth{Keys: map[string]string{httpapi.HashKey(keyAcme): "acme", httpapi.HashKey(keyGlobex): "globex"}},
		AnswerTimeout: 30 * time.Second,
		Hooks: httpapi.Hooks{
			StreamDropped: func(d httpapi.StreamDrop) { e.mu.Lock(); e.dropped = append(e.dropped, d); e.mu.Unlock() },
			Chat:          func(ci httpapi.ChatInfo) { e.mu.Lock(); e.chats = append(e.chats, ci); e.mu.Unlock() },
		}}
	base.Hooks.ConnRefused = cfg.Hooks.ConnRefused
	cfg.Client, cfg.NC, cfg.Agents, cfg.Hooks = base.Client, base.NC, base.Agents, base.Hooks
	if !cfg.Auth.Disabled && cfg.Auth.Keys == nil {
		cfg.Auth = base.Auth
	}
	if cfg.AnswerTimeout == 0 {
		cfg.AnswerTimeout = base.AnswerTimeout
	}
	api, err := httpapi.New(cfg)
	require.NoError(t, err)
	e.api = api
	e.srv = httptest.NewServer(e.api.Handler())
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.api.Shutdown(sctx))
		e.srv.Close()
	})
	return e
}

// resp is an HTTP answer read whole.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

// problem decodes a problem+json answer and checks its media type.
func (r resp) problem(t testing.TB) map[string]any {
	t.Helper()
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "body: %s", r.body)
	var p map[string]any
	r.json(t, &p)
	require.Equal(t, float64(r.status), p["status"])
	require.NotEmpty(t, p["type"])
	require.NotEmpty(t, p["title"])
	return p
}

// do sends a request as key (""= no Authorization) with headers kv.
func (e *env) do(method, path, key string, body any, kv ...string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(e.t, err)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	return e.send(req, path)
}

// send sends req (to path) and reads its answer, which must conform to
// the API's documented shapes (checkConformance).
func (e *env) send(req *http.Request, path string) resp {
	e.t.Helper()
	res, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	r := resp{status: res.StatusCode, header: res.Header, body: b}
	checkConformance(e.t, req.Method, path, r)
	return r
}

// streamMsgs is the number of messages in the event stream.
func (e *env) streamMsgs() uint64 {
	e.t.Helper()
	st, err := e.ns.JS.Stream(context.Background(), e.c.Config().Resources.Stream)
	require.NoError(e.t, err)
	info, err := st.Info(context.Background())
	require.NoError(e.t, err)
	return info.State.Msgs
}

// createThread creates a thread for tenant acme over HTTP and returns its id.
func (e *env) createThread(body map[string]any) string {
	e.t.Helper()
	r := e.do("POST", "/v1/threads", keyAcme, body)
	require.Equal(e.t, http.StatusCreated, r.status, "%s", r.body)
	var th struct {
		Thread string `json:"thread"`
	}
	r.json(e.t, &th)
	return th.Thread
}

// appendUser appends a user message of text to thread of tenant acme over
// HTTP, requires 201 Created, and returns the thread's new version.
func (e *env) appendUser(thread, text string) uint64 {
	e.t.Helper()
	r := e.do("POST", "/v1/threads/"+thread+"/events", keyAcme, map[string]any{"events": []any{userEvent(text)}})
	require.Equal(e.t, http.StatusCreated, r.status, "%s", r.body)
	var ap appendOut
	r.json(e.t, &ap)
	return ap.Version
}

// userEvent is the JSON of a user message event.
func userEvent(text string) map[string]any {
	return map[string]any{"type": "message.user", "payload": map[string]any{"content": text}}
}

// waitAnswered polls until every user message of tenant/thread has a final
// answer, and returns the thread.
func (e *env) waitAnswered(tenant, thread string) *client.Thread {
	e.t.Helper()
	var th *client.Thread
	require.Eventually(e.t, func() bool {
		got, err := e.c.Get(context.Background(), tenant, thread, client.Consistent())
		if err != nil {
			return false
		}
		th = got
		n := len(got.Messages)
		return n > 0 && got.Messages[n-1].Role == events.RoleAssistant && len(got.Messages[n-1].ToolCalls) == 0
	}, 20*time.Second, 5*time.Millisecond)
	return th
}

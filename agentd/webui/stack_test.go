package webui_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/internal/agenttest"
	"github.com/convlog/convlog/agentd/webui"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/projector"
)

// stack is everything `agentd serve` runs, in process: an embedded
// JetStream, the projector, a worker pool with the offline agent "demo"
// (built-in tools), the HTTP API and the page, mounted as agentd mounts
// them.
type stack struct {
	ns  *natstest.Server
	c   *client.Client
	api *httpapi.Server
	srv *httptest.Server
}

// stackConfig changes what newStack starts.
type stackConfig struct {
	// keys maps API keys to tenants; nil runs with auth disabled.
	keys map[string]string
	// tokenDelay paces the offline model's streamed tokens.
	tokenDelay time.Duration
	// corsOrigins are the origins allowed to call the API (httpapi.Config).
	corsOrigins []string
}

// mount builds agentd's mux: the API keeps /v1/, /openapi.json and
// /healthz; the page gets everything else.
func mount(api http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/openapi.json", api)
	mux.Handle("/healthz", api)
	mux.Handle("/", webui.Handler())
	return mux
}

func newStack(t *testing.T, cfg stackConfig) *stack {
	t.Helper()
	ce := clienttest.New(t, clienttest.WithProjector(projector.Config{}))
	ns, c := ce.Server, ce.Client
	ctx, cancel := context.WithCancel(context.Background())

	off, err := model.NewOffline(model.OfflineConfig{TokenDelay: cfg.tokenDelay})
	require.NoError(t, err)
	reg, err := tools.NewRegistry(tools.Config{})
	require.NoError(t, err)
	require.NoError(t, reg.Register(tools.Builtins(nil)...))
	agenttest.RunWorkers(t, c, ns.NC, worker.Config{Concurrency: 4, Agents: map[string]*worker.Agent{
		"demo": {Name: "demo", Provider: off, Tools: toolSet{reg}, SystemPrompt: "You are convlog's offline demo agent."}}})

	// The audit checkpointer, as agentd serve runs it.
	_, auditKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	cp, err := audit.NewCheckpointer(ns.JS, audit.Config{Key: auditKey, Interval: 50 * time.Millisecond})
	require.NoError(t, err)
	cpDone := make(chan struct{})
	go func() { defer close(cpDone); _ = cp.Run(ctx) }()

	auth := httpapi.Auth{Disabled: cfg.keys == nil}
	if cfg.keys != nil {
		auth.Keys = map[string]string{}
		for k, tenant := range cfg.keys {
			auth.Keys[httpapi.HashKey(k)] = tenant
		}
	}
	api, err := httpapi.New(httpapi.Config{Client: c, NC: ns.NC, Agents: []string{"demo"}, Auth: auth, CORSOrigins: cfg.corsOrigins,
		AuditKey: cp.PublicKey()})
	require.NoError(t, err)
	srv := httptest.NewServer(mount(api.Handler()))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = api.Shutdown(sctx)
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		<-cpDone
	})
	return &stack{ns: ns, c: c, api: api, srv: srv}
}

// toolSet adapts the built-in tools registry to worker.Tools, as agentd
// does.
type toolSet struct{ reg *tools.Registry }

func (t toolSet) Specs() []model.Tool {
	var out []model.Tool
	for _, s := range t.reg.Specs() {
		out = append(out, model.Tool(s))
	}
	return out
}

func (t toolSet) Run(ctx context.Context, call events.ToolCall, env worker.Env) events.ToolResult {
	return t.reg.Run(ctx, call, tools.Env{Tenant: env.Tenant(), Thread: env.Thread(), State: envState{env}})
}

type envState struct{ env worker.Env }

func (s envState) Get(key string) (json.RawMessage, bool) { return s.env.Get(key) }
func (s envState) Set(key string, value json.RawMessage) error {
	s.env.Set(key, value)
	return nil
}

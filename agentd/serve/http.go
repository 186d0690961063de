package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/webui"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/internal/embedded"
)

// startHTTP starts the HTTP server when cfg.HTTP.Addr is set: the API
// (REST, SSE, OpenAI-compatible chat) under /v1/, /openapi.json and
// /healthz, the metrics at /metrics and the web page at /. It writes
// the addresses to cfg.Out and returns the server and its API (nil, nil
// without an address).
func (s *server) startHTTP(ctx context.Context) (*http.Server, *httpapi.Server, error) {
	h := &s.cfg.HTTP
	if h.Addr == "" {
		return nil, nil, nil
	}
	api, err := s.newAPI()
	if err != nil {
		return nil, nil, err
	}
	ah := api.Handler()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.Handle("/v1/", ah)
	mux.Handle("/openapi.json", ah)
	mux.Handle("/healthz", ah)
	mux.Handle("/", webui.Handler())
	// a listener that caps connections, and the API's timeouts
	ln, err := api.Listen("tcp", h.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("http: %w", err)
	}
	srv := api.HTTPServer(mux)
	scheme := "http"
	if h.TLSCert != "" {
		scheme = "https"
	}
	s.parts.Add(1)
	go func() {
		defer s.parts.Done()
		var err error
		if h.TLSCert != "" {
			srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			err = srv.ServeTLS(ln, h.TLSCert, h.TLSKey)
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("http: %w", err)
		}
	}()
	s.printBanner(scheme + "://" + ln.Addr().String())
	return srv, api, nil
}

// newAPI builds the HTTP API with auth from cfg.HTTP.APIKeysFile or the
// APIKeysEnv variable (off when neither is set: the loopback demo).
func (s *server) newAPI() (*httpapi.Server, error) {
	h := &s.cfg.HTTP
	auth := httpapi.Auth{Disabled: true}
	if h.APIKeysFile != "" {
		keys, err := httpapi.LoadKeys(h.APIKeysFile)
		if err != nil {
			return nil, err
		}
		auth = httpapi.Auth{Keys: keys}
	} else if h.APIKeysEnv != "" {
		keys, ok, err := httpapi.KeysFromEnv(h.APIKeysEnv)
		if err != nil {
			return nil, err
		}
		if ok {
			auth = httpapi.Auth{Keys: keys}
		}
	}
	cfg := h.Limits
	cfg.Client, cfg.NC, cfg.Logger, cfg.Agents, cfg.Auth, cfg.AuditKey = s.cl, s.cn.NC, s.log.With("component", "http"), s.agentNames, auth, s.auditPub
	cfg.Hooks = s.m.HTTPHooks()
	if srv := s.cn.Server; srv != nil {
		dir := s.cfg.NATS.DataDir
		cfg.Storage = func() error {
			if full, since := srv.StorageFull(); full {
				return fmt.Errorf("the disk of data directory %s is full since %s (no space left on device); appends that do not fit answer 507; erase a thread to free space (delete and erase work on a full disk); normal limits come back once %d MiB are free again",
					dir, since.UTC().Format(time.RFC3339), embedded.DefaultStorageReserve>>20)
			}
			return nil
		}
	}
	return httpapi.New(cfg)
}

// printBanner writes to cfg.Out where convlog answers at base, the
// embedded server's NKey seed, the audit key and a first request.
func (s *server) printBanner(base string) {
	out := s.out
	fmt.Fprintf(out, "convlog is running\n  HTTP API:   %s/v1/threads\n  web page:   %s/\n  OpenAI API: %s/v1/chat/completions\n  NATS:       %s\n", base, base, base, s.cn.URL)
	if s.cn.Seed != "" {
		fmt.Fprintf(out, "  NATS NKey:  %s (nats --nkey %s; operator commands given --data-dir use it)\n", s.cn.Seed, s.cn.Seed)
	}
	if s.auditPub != nil {
		fmt.Fprintf(out, "  audit key:  %s (Ed25519; GET /v1/audit/key; agentd audit verify)\n", audit.PublicKeyString(s.auditPub))
	}
	if len(s.agentNames) > 0 { // the next step: a chat with an agent
		name, auth := slices.Min(s.agentNames), ""
		if s.cfg.HTTP.AuthConfigured() {
			auth = " -H 'Authorization: Bearer <API key>'"
		}
		fmt.Fprintf(out, "Try it: the agent %q answers (README.md, Quickstart, has more):\n  curl -s %s/v1/chat/completions -H 'Content-Type: application/json'%s -d '{\"model\": %q, \"messages\": [{\"role\": \"user\", \"content\": \"What is 6*7?\"}]}'\n", name, base, auth, name)
	}
}

package serve

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/memtune"
)

// Run validates cfg, runs convlog until ctx ends or a part fails, then
// shuts down within cfg.Grace. It returns the validation's error, the
// error of a part that failed to start, or that of the part whose failure
// ended the run (nil when ctx ended it).
//
// Before it starts anything, Run sets the process's soft memory limit
// (Config.MemoryLimit) and the collector's target percentage
// (Config.GCPercent), and puts the previous ones back when it returns.
//
// Start order: NATS, provisioning, the projectors, the audit
// checkpointers, the retention enforcer, the tenant service, the leader
// rebalancer, the usage meters, the workers, the HTTP server.
//
// Shutdown order (reverse):
//  1. the HTTP server stops accepting and drains requests (SSE streams end);
//  2. workers stop taking work and finish or abandon in-flight turns
//     (an abandoned turn is redelivered; its appends are atomic);
//  3. the projector stops after its current thread (it resumes from the
//     snapshots' versions on restart), and the audit checkpointer stops
//     (events not yet checkpointed are by the next start);
//  4. the NATS connection drains;
//  5. the embedded server shuts down (JetStream flushes to disk).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s := newServer(cfg)
	restore, err := memtune.Set(cfg.MemoryLimit, cfg.GCPercent, s.log)
	if err != nil {
		return err
	}
	defer restore()
	// 1. NATS
	s.cfg.NATS.OnStorage = s.onStorage
	cn, err := s.cfg.NATS.Open(s.log, "agentd", natsconn.RoleServe)
	if err != nil {
		return err
	}
	defer cn.Close()
	s.cn = cn
	if cn.Server != nil {
		s.log.Info("embedded NATS JetStream started", "url", cn.URL, "data_dir", s.cfg.NATS.DataDir)
	} else {
		s.log.Info("connected to NATS", "url", cn.NC.ConnectedUrl())
	}
	// 2. provisioning
	if s.cl, err = s.cfg.NATS.Client(ctx, cn, true, true, "agentd", s.log); err != nil {
		return err
	}
	defer s.cl.Close()
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	s.runCtx = runCtx
	// 3. the projectors, audit, retention, tenants, rebalancing, quotas
	projStop, err := s.startProjectors()
	if err != nil {
		return err
	}
	if err := s.startAudit(); err != nil {
		return err
	}
	if err := s.startRetention(); err != nil {
		return err
	}
	if s.tn, err = startTenancy(ctx, s.cl, cn, s.cfg.NATS.DataDir, s.cl.Config().Resources, s.log, s.start); err != nil {
		return err
	}
	defer func() { _ = s.tn.svc.Stop() }()
	s.startRebalance()
	if err := s.startQuotas(ctx); err != nil {
		return err
	}
	// 4. workers
	if err := s.startWorkers(); err != nil {
		return err
	}
	// 5. HTTP
	srv, api, err := s.startHTTP(ctx)
	if err != nil {
		return err
	}
	s.log.Info("agentd ready")
	return s.wait(ctx, srv, api, cancelRun, projStop)
}

// server is one Run: its configuration and the parts it started.
type server struct {
	cfg Config
	log *slog.Logger
	out io.Writer
	reg *prometheus.Registry
	m   *Metrics
	cn  *natsconn.Conn
	cl  *client.Client
	tn  *tenants
	// runCtx ends the parts started with start, which parts counts;
	// errc receives the error of a part that failed.
	runCtx context.Context
	parts  sync.WaitGroup
	errc   chan error
	// auditPub is the checkpoint signing key's public half once loaded
	// (nil: audit off); the HTTP API publishes it.
	auditPub ed25519.PublicKey
	// agentNames are the agents this deployment answers as.
	agentNames []string
}

func newServer(cfg Config) *server {
	s := &server{cfg: cfg, log: cfg.Logger, out: cfg.Out, reg: prometheus.NewRegistry(), errc: make(chan error, 8)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.out == nil {
		s.out = io.Discard
	}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.m = NewMetrics(s.reg)
	return s
}

// start runs a part on runCtx; its error, unless runCtx ended, ends the
// run.
func (s *server) start(name string, run func(context.Context) error) {
	s.parts.Add(1)
	go func() {
		defer s.parts.Done()
		if err := run(s.runCtx); err != nil && s.runCtx.Err() == nil {
			s.errc <- fmt.Errorf("%s: %w", name, err)
		}
	}()
}

// onStorage logs and counts the data directory's disk filling up and
// having space again (natsconn.Config.OnStorage).
func (s *server) onStorage(full bool) {
	if full {
		s.m.storageFull.Set(1)
		s.m.storageFulls.Inc()
		s.log.Error("the data directory's disk is full: writes answer 507 and /healthz 503 until space is freed", "data_dir", s.cfg.NATS.DataDir)
		return
	}
	s.m.storageFull.Set(0)
	s.log.Warn("the data directory's disk has space again: JetStream restarted", "data_dir", s.cfg.NATS.DataDir)
}

// wait waits for ctx to end or a part to fail, then stops the HTTP
// server (api's streams first), the parts and the projectors within the
// grace period, in the order Run's doc gives.
func (s *server) wait(ctx context.Context, srv *http.Server, api *httpapi.Server, cancelRun context.CancelFunc, projStop func(context.Context)) error {
	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "grace", s.cfg.Grace)
	case runErr = <-s.errc:
		s.log.Error("component failed; shutting down", "err", runErr)
	}
	sctx, scancel := context.WithTimeout(context.Background(), s.cfg.Grace)
	defer scancel()
	if srv != nil {
		if api != nil {
			_ = api.Shutdown(sctx) // ends SSE streams so Shutdown does not wait for them
		}
		_ = srv.Shutdown(sctx)
	}
	cancelRun()
	waitCtx(sctx, &s.parts)
	if projStop != nil {
		projStop(sctx)
	}
	s.log.Info("stopped")
	return runErr
}

func waitCtx(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

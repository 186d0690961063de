package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
)

// runner is a long-lived part with Run(ctx).
type runner interface {
	Run(ctx context.Context) error
}

func newProjector(cl *client.Client, cn *conn, f *serveFlags, logger *slog.Logger, m *metrics, partition int) (runner, error) {
	rc := cl.Config().Resources
	cfg := projector.Config{Stream: rc.Stream, SubjectPrefix: rc.SubjectPrefix, SnapshotBucket: rc.SnapshotBucket,
		IndexBucket: rc.IndexBucket, KeyBucket: rc.KeyBucket, Partition: partition, Logger: logger.With("component", "projector", "partition", partition)}
	if len(cl.Partitions()) > 1 {
		// one instance per partition at a time: several agentd spread the
		// partitions between them (docs/partitions-design.md)
		cfg.PinnedTTL = 10 * time.Second
	}
	if m != nil {
		cfg.OnApply = func(a projector.Applied) {
			m.projected.Inc()
			m.projectionLag.Observe(a.Lag.Seconds())
			if a.Code != "" {
				m.rejections.WithLabelValues(string(a.Code)).Inc()
			}
		}
		cfg.OnFailure = func(f projector.Failure) { m.projectorError.WithLabelValues(f.Reason).Inc() }
	}
	p, err := projector.New(cl.JetStream(), cfg)
	if err != nil || m == nil {
		return p, err
	}
	part := prometheus.Labels{"partition": strconv.Itoa(partition)}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "convlog_projector_held_triggers", ConstLabels: part,
			Help: "Triggers the projector holds, delivered and not yet folded and acked (projector.Held)."},
			func() float64 { return float64(p.Held().Triggers) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "convlog_projector_held_bytes", ConstLabels: part,
			Help: "Heap the projector's held triggers keep, in bytes, bounded by its MaxTriggerBytes (96 MiB) plus one trigger."},
			func() float64 { return float64(p.Held().Bytes) }))
	return p, nil
}

// newHTTPHandler builds the HTTP API (REST, SSE, OpenAI-compatible chat)
// with auth from --api-keys-file or CONVLOG_API_KEYS (off when neither is
// set: the loopback demo).
func newHTTPHandler(ctx context.Context, cl *client.Client, cn *conn, f *serveFlags, logger *slog.Logger, agents []string, m *metrics) (*httpapi.Server, error) {
	auth := httpapi.Auth{Disabled: true}
	if f.APIKeysFile != "" {
		keys, err := httpapi.LoadKeys(f.APIKeysFile)
		if err != nil {
			return nil, err
		}
		auth = httpapi.Auth{Keys: keys}
	} else if keys, ok, err := httpapi.KeysFromEnv("CONVLOG_API_KEYS"); err != nil {
		return nil, err
	} else if ok {
		auth = httpapi.Auth{Keys: keys}
	}
	cfg := httpapi.Config{Client: cl, NC: cn.NC, Logger: logger.With("component", "http"), Agents: agents, Auth: auth, AuditKey: f.auditPub}
	f.HTTPLimits.apply(&cfg)
	if m != nil {
		cfg.Hooks = m.httpHooks()
	}
	if cn.Server != nil {
		cfg.Storage = func() error {
			if full, since := cn.Server.StorageFull(); full {
				return fmt.Errorf("the disk of data directory %s is full since %s (no space left on device); appends that do not fit answer 507; erase a thread to free space (delete and erase work on a full disk); normal limits come back once %d MiB are free again",
					f.conn.DataDir, since.UTC().Format(time.RFC3339), embedded.DefaultStorageReserve>>20)
			}
			return nil
		}
	}
	return httpapi.New(cfg)
}

func buildOpenAI(s agentSpec) (model.Provider, error) {
	key, err := apiKey(s)
	if err != nil {
		return nil, err
	}
	cfg := model.DefaultOpenAIConfig()
	cfg.APIKey, cfg.Model = key, s.Model
	if s.BaseURL != "" {
		cfg.BaseURL = s.BaseURL
	}
	return model.NewOpenAI(cfg)
}

// buildTools returns the built-in tools named (all of them when names is
// empty) as a worker tool set.
func buildTools(names []string) (worker.Tools, error) {
	reg, err := tools.NewRegistry(tools.Config{})
	if err != nil {
		return nil, err
	}
	all := tools.Builtins(nil)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, t := range all {
		if len(names) == 0 || want[t.Name] {
			if err := reg.Register(t); err != nil {
				return nil, err
			}
			delete(want, t.Name)
		}
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		return nil, fmt.Errorf("unknown tool(s) %v (built-in: clock, calculator, kv_get, kv_set)", unknown)
	}
	return worker.RegistryTools(reg), nil
}

// startLocalProjector runs the projector in this process (import with
// --data-dir) and returns a function that waits until it has caught up
// with the stream, then stops it.
func startLocalProjector(ctx context.Context, e *cliEnv) (func() error, error) {
	rc := e.c.Config().Resources
	cfg := projector.Config{Stream: rc.Stream, SubjectPrefix: rc.SubjectPrefix, SnapshotBucket: rc.SnapshotBucket,
		IndexBucket: rc.IndexBucket, Logger: e.logger.With("component", "projector")}
	p, err := projector.New(e.c.JetStream(), cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("projector: %w", err)
	}
	return func() error {
		defer func() { cancel(); <-done }()
		// The projector's consumer has delivered and acknowledged every
		// message of the stream, or 5 minutes have passed.
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
		defer wcancel()
		if err := provision.WaitConsumerDrained(wctx, e.c.JetStream(), rc.Stream, projector.DefaultConfig().Durable); err != nil {
			return fmt.Errorf("projector did not catch up: %w", err)
		}
		return nil
	}, nil
}

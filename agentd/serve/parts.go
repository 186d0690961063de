package serve

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/retention"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/quota"
	"github.com/convlog/convlog/projector"
)

// startProjectors starts a projector per partition when cfg.Projector is
// set, and returns the function that stops them and waits for them
// within its ctx (nil when none runs). They run on a context of their
// own: they stop after the other parts.
func (s *server) startProjectors() (func(context.Context), error) {
	if !s.cfg.Projector {
		return nil, nil
	}
	k := len(s.cl.Partitions())
	pctx, pcancel := context.WithCancel(context.Background())
	var pw sync.WaitGroup
	for part := range k {
		p, err := s.newProjector(part)
		if err != nil {
			pcancel()
			return nil, err
		}
		pw.Add(1)
		go func() {
			defer pw.Done()
			if err := p.Run(pctx); err != nil && pctx.Err() == nil {
				s.errc <- fmt.Errorf("projector of partition %d: %w", part, err)
			}
		}()
	}
	s.log.Info("projector started", "partitions", k)
	return func(ctx context.Context) { pcancel(); waitCtx(ctx, &pw) }, nil
}

// newProjector makes the projector of partition with its metrics.
func (s *server) newProjector(partition int) (*projector.Projector, error) {
	rc := s.cl.Config().Resources
	cfg := projector.Config{Stream: rc.Stream, SubjectPrefix: rc.SubjectPrefix, SnapshotBucket: rc.SnapshotBucket,
		IndexBucket: rc.IndexBucket, KeyBucket: rc.KeyBucket, Partition: partition, Logger: s.log.With("component", "projector", "partition", partition)}
	if len(s.cl.Partitions()) > 1 {
		// one instance per partition at a time: several agentd spread the
		// partitions between them (docs/partitions-design.md)
		cfg.PinnedTTL = 10 * time.Second
	}
	m := s.m
	cfg.OnApply = func(a projector.Applied) {
		m.projected.Inc()
		m.projectionLag.Observe(a.Lag.Seconds())
		if a.Code != "" {
			m.rejections.WithLabelValues(string(a.Code)).Inc()
		}
	}
	cfg.OnFailure = func(f projector.Failure) { m.projectorError.WithLabelValues(f.Reason).Inc() }
	p, err := projector.New(s.cl.JetStream(), cfg)
	if err != nil {
		return nil, err
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

// startAudit loads (or creates) the signing key and starts a checkpointer
// per partition, unless audit is off.
func (s *server) startAudit() error {
	if !s.cfg.Audit.Enabled {
		s.log.Warn("audit checkpoints are off (--audit=false): nothing signs the threads' hash chains")
		return nil
	}
	path := s.cfg.Audit.KeyPath(s.cfg.NATS)
	if path == "" {
		s.log.Warn("audit checkpoints are off: with --nats-url give --audit-key (or CONVLOG_AUDIT_KEY) to sign them")
		return nil
	}
	key, created, err := audit.LoadOrCreateKey(path)
	if err != nil {
		return err
	}
	if created {
		s.log.Info("audit signing key created", "path", path)
	}
	var cps []*audit.Checkpointer
	for part, pa := range httpapi.AuditPartitions(s.cl, audit.Scope{}) {
		cp, err := audit.NewCheckpointer(s.cl.JetStream(), audit.Config{Key: key, Stream: pa.Stream, SubjectPrefix: pa.SubjectPrefix, HeadsBucket: pa.HeadsBucket,
			Logger: s.log.With("component", "audit", "partition", part), OnCheckpoint: s.m.onCheckpoint, OnRestart: func(error) { s.m.auditRestarts.Inc() }})
		if err != nil {
			return err
		}
		cps = append(cps, cp)
	}
	for part, cp := range cps {
		s.auditPub = cp.PublicKey()
		s.start(fmt.Sprintf("audit of partition %d", part), cp.Run)
	}
	if s.auditPub != nil {
		s.log.Info("audit checkpointer started", "public_key", audit.PublicKeyString(s.auditPub), "partitions", len(s.cl.Partitions()))
	}
	return nil
}

// startRetention starts the retention enforcer of cfg.RetentionFile.
func (s *server) startRetention() error {
	if s.cfg.RetentionFile == "" {
		return nil
	}
	rc, err := retention.LoadFile(s.cfg.RetentionFile)
	if err != nil {
		return err
	}
	rc.Logger = s.log.With("component", "retention")
	enf, err := retention.New(s.cl, rc)
	if err != nil {
		return err
	}
	s.start("retention", enf.Run)
	s.log.Info("retention enforcer started", "file", s.cfg.RetentionFile, "tenants", len(rc.Tenants))
	return nil
}

// startRebalance moves the partitions' leaders back to one node each
// after a failure, with partitions on a cluster.
func (s *server) startRebalance() {
	if len(s.cl.Partitions()) > 1 && s.cfg.Rebalance > 0 && s.cfg.NATS.Replicas > 1 {
		s.start("rebalance", func(ctx context.Context) error {
			return rebalance(ctx, s.cl, s.cfg.NATS.Resources(), s.cfg.Rebalance, s.log.With("component", "rebalance"))
		})
	}
}

// startQuotas starts a usage meter per partition with the limits of
// cfg.QuotaFile; a tenant over its storage quota gets read-only users.
func (s *server) startQuotas(ctx context.Context) error {
	if s.cfg.QuotaFile == "" {
		return nil
	}
	qc, err := quota.LoadFile(s.cfg.QuotaFile)
	if err != nil {
		return err
	}
	for part, pc := range s.cl.Partitions() {
		meter, err := quota.NewMeter(ctx, s.cl.JetStream(), quota.MeterConfig{Resources: pc.Config().Resources, Limits: qc,
			Logger: s.log.With("component", "quota", "partition", part), OnUsage: func(tenant string, u quota.Usage) {
				s.m.onUsage(tenant, u)
				s.tn.setOverQuota(tenant, u.OverStorage())
			}})
		if err != nil {
			return err
		}
		s.start(fmt.Sprintf("quota of partition %d", part), meter.Run)
	}
	s.log.Info("usage meter started", "file", s.cfg.QuotaFile, "tenants", len(qc.Tenants), "partitions", len(s.cl.Partitions()))
	return nil
}

// startWorkers starts a worker pool per partition, sharing cfg.Workers
// between them, and records the agents' names (read from the agents file
// when no worker runs here: the HTTP API serves them all the same).
func (s *server) startWorkers() error {
	if s.cfg.Workers <= 0 {
		s.agentNames, _ = agentNames(s.cfg.AgentsFile)
		return nil
	}
	agents, err := buildAgents(s.cfg.AgentsFile, s.cfg.TokenDelay)
	if err != nil {
		return err
	}
	for n := range agents {
		s.agentNames = append(s.agentNames, n)
	}
	// a pool per partition, the concurrency shared between them
	k := len(s.cl.Partitions())
	for part, pc := range s.cl.Partitions() {
		pool, err := worker.New(pc, s.cn.NC, worker.Config{Agents: agents, Consumer: s.cfg.Consumer, Concurrency: (s.cfg.Workers + k - 1) / k, AckWait: s.cfg.AckWait,
			Logger: s.log.With("component", "worker", "partition", part), OnTurn: s.m.onTurn})
		if err != nil {
			return err
		}
		s.start(fmt.Sprintf("workers of partition %d", part), pool.Run)
	}
	s.log.Info("agent workers started", "concurrency", s.cfg.Workers, "agents", s.agentNames)
	return nil
}

// rebalance calls provision.SpreadLeaders every interval until ctx ends,
// logging the leaders it moved and the moves that failed (it never fails:
// the partitions work wherever their leaders are).
func rebalance(ctx context.Context, cl *client.Client, res provision.Config, interval time.Duration, log *slog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		moved, err := provision.SpreadLeaders(mctx, cl.JetStream(), res)
		cancel()
		if moved > 0 || err != nil {
			log.Info("partition leaders moved back to one node each", "moved", moved, "err", err)
		}
	}
}

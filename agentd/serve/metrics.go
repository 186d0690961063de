package serve

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/internal/quota"
)

// Metrics are agentd serve's Prometheus metrics (libraries expose hooks;
// agentd turns them into metrics). Names carry units. Run makes its own
// on the registry it serves at /metrics.
type Metrics struct {
	reg            prometheus.Registerer // for the metrics of parts made later (projectors)
	turns          *prometheus.CounterVec
	turnSeconds    *prometheus.HistogramVec
	turnConflicts  prometheus.Counter
	projectionLag  prometheus.Histogram
	projected      prometheus.Counter
	rejections     *prometheus.CounterVec
	projectorError *prometheus.CounterVec
	storageFull    prometheus.Gauge
	storageFulls   prometheus.Counter
	httpRequests   *prometheus.HistogramVec
	httpDropped    *prometheus.CounterVec
	httpRefused    *prometheus.CounterVec
	httpEvicted    prometheus.Counter
	chats          *prometheus.CounterVec
	auditCps       prometheus.Counter
	auditEvents    prometheus.Counter
	auditCovered   prometheus.Gauge
	auditRestarts  prometheus.Counter
	tenantBytes    *prometheus.GaugeVec
	tenantEvents   *prometheus.GaugeVec
	tenantOver     *prometheus.GaugeVec
}

// NewMetrics makes the metrics and registers them on reg (it panics
// when reg holds metrics of the same names, as
// prometheus.Registerer.MustRegister does).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{reg: reg,
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convlog_agent_turns_total",
			Help: "Work items handled by agent workers, by agent and outcome (answered, step, superseded, not_waiting, skipped, error)."},
			[]string{"agent", "outcome"}),
		turnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "convlog_agent_turn_seconds",
			Help: "Time to handle one work item (model calls, tools, appends).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)},
			[]string{"agent"}),
		turnConflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "convlog_agent_conflicts_total",
			Help: "Optimistic-concurrency conflicts agent workers resolved by reloading the thread."}),
		projectionLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "convlog_projection_lag_seconds",
			Help: "Time from an event's store time to its snapshot being written.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		projected: prometheus.NewCounter(prometheus.CounterOpts{Name: "convlog_projected_events_total",
			Help: "Events folded into snapshots."}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convlog_rejections_total",
			Help: "Events the projection rejected, by code."}, []string{"code"}),
		projectorError: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convlog_projector_errors_total",
			Help: "Projector failures by reason: step_failed (retried), snapshot_rebuilt and index_rebuilt (an unreadable head, chunk or index entry rebuilt from the log)."},
			[]string{"reason"}),
		storageFull: prometheus.NewGauge(prometheus.GaugeOpts{Name: "convlog_storage_full",
			Help: "1 while the data directory's disk is full (writes answer 507), else 0."}),
		storageFulls: prometheus.NewCounter(prometheus.CounterOpts{Name: "convlog_storage_full_total",
			Help: "Times the data directory's disk filled up (no space left on device)."}),
	}
	m.httpRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "convlog_http_request_seconds",
		Help: "HTTP API request duration by route and status (streams: their lifetime).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)},
		[]string{"route", "status"})
	m.httpDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convlog_http_stream_dropped_total",
		Help: "Streaming clients dropped because they were too slow, by route and reason (write_timeout: a write missed its deadline; memory_budget: no room in --http-stream-total-bytes)."}, []string{"route", "reason"})
	m.httpRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convlog_http_connections_refused_total",
		Help: "HTTP connections refused (503 and closed), by reason (max_conns: --http-max-conns connections were open, none idle; max_conns_per_addr: the client's address held --http-max-conns-per-addr)."}, []string{"reason"})
	m.httpRefused.WithLabelValues("max_conns")
	m.httpRefused.WithLabelValues("max_conns_per_addr")
	m.httpEvicted = prometheus.NewCounter(prometheus.CounterOpts{Name: "convlog_http_connections_evicted_total",
		Help: "Idle keep-alive HTTP connections closed to give their slot to a new connection because --http-max-conns connections were open."})
	m.chats = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convlog_chat_completions_total",
		Help: "OpenAI-compatible chat completions by agent, conversation key tier and outcome."}, []string{"agent", "tier", "outcome"})
	reg.MustRegister(m.httpRequests, m.httpDropped, m.httpRefused, m.httpEvicted, m.chats)
	m.auditCps = prometheus.NewCounter(prometheus.CounterOpts{Name: "convlog_audit_checkpoints_total",
		Help: "Signed audit checkpoints this agentd stored."})
	m.auditEvents = prometheus.NewCounter(prometheus.CounterOpts{Name: "convlog_audit_checkpointed_events_total",
		Help: "Events covered by the audit checkpoints this agentd stored."})
	m.auditCovered = prometheus.NewGauge(prometheus.GaugeOpts{Name: "convlog_audit_covered_seq",
		Help: "The last stream sequence covered by a checkpoint this agentd stored (compare with the stream's last sequence: the unsigned window)."})
	m.auditRestarts = prometheus.NewCounter(prometheus.CounterOpts{Name: "convlog_audit_restarts_total",
		Help: "Times the audit checkpointer reloaded after a failed publish or read (another checkpointer won, NATS errors)."})
	m.tenantBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "convlog_tenant_storage_bytes",
		Help: "Bytes of a tenant's stored events, as metered (--quota-file; erased threads given back)."}, []string{"tenant"})
	m.tenantEvents = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "convlog_tenant_events",
		Help: "Events of a tenant metered since metering began (--quota-file)."}, []string{"tenant"})
	m.tenantOver = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "convlog_tenant_quota_exceeded",
		Help: "1 while a tenant's appends are refused for a quota, by kind (storage, rate), else 0."}, []string{"tenant", "kind"})
	reg.MustRegister(m.tenantBytes, m.tenantEvents, m.tenantOver)
	reg.MustRegister(m.turns, m.turnSeconds, m.turnConflicts, m.projectionLag, m.projected, m.rejections, m.projectorError, m.storageFull, m.storageFulls,
		m.auditCps, m.auditEvents, m.auditCovered, m.auditRestarts)
	return m
}

func (m *Metrics) onTurn(r worker.TurnResult) {
	m.turns.WithLabelValues(r.Agent, r.Outcome).Inc()
	m.turnSeconds.WithLabelValues(r.Agent).Observe(r.Took.Seconds())
	m.turnConflicts.Add(float64(r.Conflicts))
}

// HTTPHooks are the HTTP API's hooks (httpapi.Config.Hooks) that feed
// the metrics: request durations, dropped streams, refused and evicted
// connections, chat completions.
func (m *Metrics) HTTPHooks() httpapi.Hooks {
	return httpapi.Hooks{
		Request: func(r httpapi.RequestInfo) {
			m.httpRequests.WithLabelValues(r.Route, strconv.Itoa(r.Status)).Observe(r.Took.Seconds())
		},
		StreamDropped: func(d httpapi.StreamDrop) { m.httpDropped.WithLabelValues(d.Route, d.Reason).Inc() },
		ConnRefused:   func(r httpapi.ConnRefusal) { m.httpRefused.WithLabelValues(r.Reason).Inc() },
		ConnEvicted:   func(httpapi.ConnEviction) { m.httpEvicted.Inc() },
		Chat: func(c httpapi.ChatInfo) {
			m.chats.WithLabelValues(c.Agent, strconv.Itoa(int(c.Tier)), c.Outcome).Inc()
		},
	}
}

// onCheckpoint counts one stored audit checkpoint (audit.Config.OnCheckpoint).
func (m *Metrics) onCheckpoint(c audit.Checkpoint, _ uint64) {
	m.auditCps.Inc()
	n := 0
	for _, th := range c.Threads {
		n += len(th.Leaves)
	}
	m.auditEvents.Add(float64(n))
	m.auditCovered.Set(float64(c.Seq))
}

// onUsage sets a tenant's usage gauges from its metered record.
func (m *Metrics) onUsage(tenant string, u quota.Usage) {
	m.tenantBytes.WithLabelValues(tenant).Set(float64(u.Bytes))
	m.tenantEvents.WithLabelValues(tenant).Set(float64(u.Events))
	for _, kind := range []string{quota.KindStorage, quota.KindRate} {
		v := 0.0
		var qe *quota.Error
		if err := u.Check(tenant, time.Now()); errors.As(err, &qe) && qe.Kind == kind {
			v = 1
		}
		m.tenantOver.WithLabelValues(tenant, kind).Set(v)
	}
}

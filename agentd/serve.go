package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/retention"
	"github.com/convlog/convlog/agentd/webui"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/quota"
	"github.com/convlog/convlog/internal/tenancy"
)

// serveFlags configure `agentd serve`.
type serveFlags struct {
	conn        connFlags
	HTTPAddr    string
	Projector   bool
	Workers     int
	AgentsFile  string
	Consumer    string
	Grace       time.Duration
	Check       bool
	APIKeysFile string
	AllowOpen   bool
	TokenDelay  time.Duration
	AckWait     time.Duration
	// Rebalance is how often serve moves partition leaders back to one
	// node each (provision.SpreadLeaders); 0: never.
	Rebalance  time.Duration
	HTTPLimits httpLimitFlags
	Audit      auditFlags
	// RetentionFile is the retention policy file (agentd/retention); ""
	// runs no enforcer.
	RetentionFile string
	// QuotaFile is the per-tenant limits file (internal/quota); "" runs
	// no usage meter and sets no limits.
	QuotaFile string
	// HTTPTLSCert and HTTPTLSKey (PEM files): the HTTP API serves HTTPS
	// (TLS 1.2 or newer, HTTP/2 offered) with them.
	HTTPTLSCert, HTTPTLSKey string
	// auditPub is the checkpoint signing key's public half once loaded
	// (nil: audit off); the HTTP API publishes it.
	auditPub ed25519.PublicKey
}

func newServeCmd(lf *logFlags) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run convlog: NATS (embedded by default), projector, agent workers and the HTTP API",
		Long: `serve starts, in this order: NATS (an embedded JetStream in --data-dir, or a
connection to --nats-url), stream and KV provisioning, the projector, the agent
workers, and the HTTP server. On SIGINT/SIGTERM it stops them in reverse order
within --grace; a second signal exits at once.

Each part can be switched off (--projector=false, --workers=0, --http-addr="")
so the parts can run as separate deployments sharing one NATS.

Environment: CONVLOG_DATA_DIR, CONVLOG_NATS_URL, CONVLOG_HTTP_ADDR,
CONVLOG_NATS_PASSWORD, CONVLOG_NATS_TOKEN, CONVLOG_API_KEYS (tenant:key,...),
CONVLOG_OPENAI_API_KEY, CONVLOG_LOG_FORMAT, CONVLOG_LOG_LEVEL.`,
		Example: `  agentd serve                                  # embedded JetStream in ./convlog-data, offline model
  agentd serve --http-addr 127.0.0.1:8080 --agents-file agents.json
  agentd serve --nats-url nats://n1:4222,nats://n2:4222 --replicas 3 --workers 0
  agentd serve --check                          # validate the configuration and exit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := lf.logger(os.Stderr)
			if err != nil {
				return err
			}
			return runServe(cmd.Context(), cmd, &f, logger)
		},
	}
	fs := cmd.Flags()
	f.conn.register(fs)
	f.conn.CreateDataDir = true
	fs.StringVar(&f.HTTPAddr, "http-addr", envOr("CONVLOG_HTTP_ADDR", "127.0.0.1:8080"), "HTTP API address (env CONVLOG_HTTP_ADDR); empty = no HTTP server")
	fs.BoolVar(&f.Projector, "projector", true, "run the projector")
	fs.IntVar(&f.Workers, "workers", 4, "concurrent agent turns in this process (0 = no workers)")
	fs.StringVar(&f.AgentsFile, "agents-file", "", "JSON file of agents (default: the built-in offline agent \"demo\")")
	fs.StringVar(&f.Consumer, "worker-consumer", "convlog-agents", "durable consumer shared by this deployment's workers")
	fs.DurationVar(&f.Grace, "grace", 10*time.Second, "shutdown grace period")
	fs.BoolVar(&f.Check, "check", false, "validate the configuration and exit")
	fs.StringVar(&f.APIKeysFile, "api-keys-file", "", "file of tenant:key lines enabling bearer auth (or env CONVLOG_API_KEYS)")
	fs.BoolVar(&f.AllowOpen, "insecure-no-auth", false, "allow a non-loopback --http-addr without API keys")
	fs.StringVar(&f.HTTPTLSCert, "http-tls-cert", envOr("CONVLOG_HTTP_TLS_CERT", ""), "certificate file (PEM, with its chain): the HTTP API serves HTTPS only (env CONVLOG_HTTP_TLS_CERT)")
	fs.StringVar(&f.HTTPTLSKey, "http-tls-key", envOr("CONVLOG_HTTP_TLS_KEY", ""), "key file of --http-tls-cert (PEM; env CONVLOG_HTTP_TLS_KEY)")
	fs.DurationVar(&f.TokenDelay, "token-delay", 0, "offline model: pause between streamed tokens (demo pacing)")
	fs.DurationVar(&f.AckWait, "worker-ack-wait", 30*time.Second, "time before work held by a crashed worker is redelivered")
	fs.DurationVar(&f.Rebalance, "rebalance-interval", time.Minute, "with partitions on a cluster: how often the partitions' leaders are moved back to one node each after a node failure moved them (a leader step-down per move); 0 = never")
	f.HTTPLimits.register(fs)
	f.Audit.register(fs)
	fs.StringVar(&f.QuotaFile, "quota-file", envOr("CONVLOG_QUOTA_FILE", ""), `per-tenant limits (JSON {"default":{"storage_bytes":1073741824},"tenants":{"acme":{"storage_bytes":10485760,"events_per_second":200}}}; env CONVLOG_QUOTA_FILE): meters every tenant's stored bytes and events per second and refuses appends over a limit (HTTP 429)`)
	fs.StringVar(&f.RetentionFile, "retention-file", "", `retention policies (JSON {"interval":"1m","tenants":{"acme":{"erase_idle":"720h","keep_events":"168h"}}}): erase threads idle longer than erase_idle, compact and redact messages older than keep_events; "agentd retention plan" shows what it would do`)
	return cmd
}

func (f *serveFlags) validate() error {
	var errs []error
	if err := f.conn.validate(); err != nil {
		errs = append(errs, err)
	}
	if f.Workers < 0 {
		errs = append(errs, fmt.Errorf("--workers must be >= 0, got %d", f.Workers))
	}
	if f.Grace <= 0 {
		errs = append(errs, fmt.Errorf("--grace must be > 0"))
	}
	if err := f.HTTPLimits.validate(); err != nil {
		errs = append(errs, err)
	}
	if (f.HTTPTLSCert == "") != (f.HTTPTLSKey == "") {
		errs = append(errs, errors.New("--http-tls-cert and --http-tls-key go together"))
	} else if f.HTTPTLSCert != "" {
		if _, err := tls.LoadX509KeyPair(f.HTTPTLSCert, f.HTTPTLSKey); err != nil {
			errs = append(errs, fmt.Errorf("--http-tls-cert %s / --http-tls-key %s: %w", f.HTTPTLSCert, f.HTTPTLSKey, err))
		}
	}
	if f.HTTPAddr != "" {
		host, _, err := net.SplitHostPort(f.HTTPAddr)
		if err != nil {
			errs = append(errs, fmt.Errorf("--http-addr %q: %w", f.HTTPAddr, err))
		} else if !isLoopback(host) && !f.authConfigured() && !f.AllowOpen {
			errs = append(errs, fmt.Errorf("--http-addr %q is not a loopback address and no API keys are set: set --api-keys-file or CONVLOG_API_KEYS, or pass --insecure-no-auth", f.HTTPAddr))
		}
	}
	if f.AgentsFile != "" {
		if _, err := loadAgentSpecs(f.AgentsFile); err != nil {
			errs = append(errs, err)
		}
	}
	if f.RetentionFile != "" {
		if _, err := retention.LoadFile(f.RetentionFile); err != nil {
			errs = append(errs, err)
		}
	}
	if f.QuotaFile != "" {
		if _, err := quota.LoadFile(f.QuotaFile); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (f *serveFlags) authConfigured() bool {
	return f.APIKeysFile != "" || os.Getenv("CONVLOG_API_KEYS") != ""
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runServe is the serve command. Start order: NATS, provisioning,
// projector, audit checkpointer, retention enforcer, workers, HTTP. Shutdown order (reverse):
//  1. the HTTP server stops accepting and drains requests (SSE streams end);
//  2. workers stop taking work and finish or abandon in-flight turns
//     (an abandoned turn is redelivered; its appends are atomic);
//  3. the projector stops after its current thread (it resumes from the
//     snapshots' versions on restart), and the audit checkpointer stops
//     (events not yet checkpointed are by the next start);
//  4. the NATS connection drains;
//  5. the embedded server shuts down (JetStream flushes to disk).
func runServe(parent context.Context, cmd *cobra.Command, f *serveFlags, logger *slog.Logger) error {
	if err := f.validate(); err != nil {
		return usageError{err}
	}
	if f.Check {
		fmt.Fprintln(cmd.OutOrStdout(), "configuration OK")
		return nil
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		if parent.Err() != nil {
			return
		}
		// A second signal exits at once.
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt, syscall.SIGTERM)
		<-c
		logger.Error("second signal: exiting now")
		os.Exit(1)
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg)

	// 1. NATS
	f.conn.OnStorage = func(full bool) {
		if full {
			m.storageFull.Set(1)
			m.storageFulls.Inc()
			logger.Error("the data directory's disk is full: writes answer 507 and /healthz 503 until space is freed", "data_dir", f.conn.DataDir)
			return
		}
		m.storageFull.Set(0)
		logger.Warn("the data directory's disk has space again: JetStream restarted", "data_dir", f.conn.DataDir)
	}
	cn, err := f.conn.open(logger, "agentd", roleServe)
	if err != nil {
		return err
	}
	defer cn.Close()
	if cn.Server != nil {
		logger.Info("embedded NATS JetStream started", "url", cn.URL, "data_dir", f.conn.DataDir)
	} else {
		logger.Info("connected to NATS", "url", cn.NC.ConnectedUrl())
	}
	// 2. provisioning
	cl, err := f.conn.client(ctx, cn, true, true, "agentd", logger)
	if err != nil {
		return err
	}
	defer cl.Close()

	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	var parts sync.WaitGroup
	errc := make(chan error, 8)
	start := func(name string, run func(context.Context) error) {
		parts.Add(1)
		go func() {
			defer parts.Done()
			if err := run(runCtx); err != nil && runCtx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	// 3. projector: one per partition
	k := len(cl.Partitions())
	var projStop func(context.Context)
	if f.Projector {
		pctx, pcancel := context.WithCancel(context.Background())
		var pw sync.WaitGroup
		for part := range k {
			p, err := newProjector(cl, cn, f, logger, m, part)
			if err != nil {
				pcancel()
				return err
			}
			pw.Add(1)
			go func() {
				defer pw.Done()
				if err := p.Run(pctx); err != nil && pctx.Err() == nil {
					errc <- fmt.Errorf("projector of partition %d: %w", part, err)
				}
			}()
		}
		projStop = func(ctx context.Context) { pcancel(); waitCtx(ctx, &pw) }
		logger.Info("projector started", "partitions", k)
	}
	// 3b. audit checkpoints: one checkpointer per partition
	cps, err := startAudit(f, cl, logger, m)
	if err != nil {
		return err
	}
	for part, cp := range cps {
		f.auditPub = cp.PublicKey()
		start(fmt.Sprintf("audit of partition %d", part), cp.Run)
	}
	if f.auditPub != nil {
		logger.Info("audit checkpointer started", "public_key", audit.PublicKeyString(f.auditPub), "partitions", k)
	}
	// 3c. retention
	if f.RetentionFile != "" {
		rc, err := retention.LoadFile(f.RetentionFile)
		if err != nil {
			return err
		}
		rc.Logger = logger.With("component", "retention")
		enf, err := retention.New(cl, rc)
		if err != nil {
			return err
		}
		start("retention", enf.Run)
		logger.Info("retention enforcer started", "file", f.RetentionFile, "tenants", len(rc.Tenants))
	}
	// 3d. tenants: the tenant service, and the embedded server's
	// tenant-scoped users from the registry
	tn, err := startTenancy(ctx, cl, cn, f.conn.DataDir, cl.Config().Resources, logger, start)
	if err != nil {
		return err
	}
	defer func() { _ = tn.svc.Stop() }()
	// 3d'. partition leaders back on one node each after a failure
	if k > 1 && f.Rebalance > 0 && f.conn.Replicas > 1 {
		start("rebalance", func(ctx context.Context) error {
			return rebalance(ctx, cl, f.conn.resources(), f.Rebalance, logger.With("component", "rebalance"))
		})
	}
	// 3e. quotas: a meter per partition
	if f.QuotaFile != "" {
		qc, err := quota.LoadFile(f.QuotaFile)
		if err != nil {
			return err
		}
		for part, pc := range cl.Partitions() {
			meter, err := quota.NewMeter(ctx, cl.JetStream(), quota.MeterConfig{Resources: pc.Config().Resources, Limits: qc,
				Logger: logger.With("component", "quota", "partition", part), OnUsage: func(tenant string, u quota.Usage) {
					m.onUsage(tenant, u)
					tn.setOverQuota(tenant, u.Limits.StorageBytes > 0 && u.Bytes >= u.Limits.StorageBytes)
				}})
			if err != nil {
				return err
			}
			start(fmt.Sprintf("quota of partition %d", part), meter.Run)
		}
		logger.Info("usage meter started", "file", f.QuotaFile, "tenants", len(qc.Tenants), "partitions", k)
	}
	// 4. workers
	var agentNames []string
	if f.Workers > 0 {
		agents, err := buildAgents(f, logger)
		if err != nil {
			return err
		}
		for n := range agents {
			agentNames = append(agentNames, n)
		}
		// a pool per partition, the concurrency shared between them
		for part, pc := range cl.Partitions() {
			pool, err := worker.New(pc, cn.NC, worker.Config{Agents: agents, Consumer: f.Consumer, Concurrency: (f.Workers + k - 1) / k, AckWait: f.AckWait,
				Logger: logger.With("component", "worker", "partition", part), OnTurn: m.onTurn})
			if err != nil {
				return err
			}
			start(fmt.Sprintf("workers of partition %d", part), pool.Run)
		}
		logger.Info("agent workers started", "concurrency", f.Workers, "agents", agentNames)
	} else {
		agentNames, _ = agentNamesFor(f)
	}
	// 5. HTTP
	var srv *http.Server
	var apiSrv interface{ Shutdown(context.Context) error }
	if f.HTTPAddr != "" {
		api, err := newHTTPHandler(ctx, cl, cn, f, logger, agentNames, m)
		if err != nil {
			return err
		}
		apiSrv = api
		h := api.Handler()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.Handle("/v1/", h)
		mux.Handle("/openapi.json", h)
		mux.Handle("/healthz", h)
		mux.Handle("/", webui.Handler())
		var ln net.Listener
		if srv, ln, err = newHTTPServer(api, mux, f.HTTPAddr); err != nil {
			return err
		}
		scheme := "http"
		if f.HTTPTLSCert != "" {
			scheme = "https"
		}
		parts.Add(1)
		go func() {
			defer parts.Done()
			var err error
			if f.HTTPTLSCert != "" {
				srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
				err = srv.ServeTLS(ln, f.HTTPTLSCert, f.HTTPTLSKey)
			} else {
				err = srv.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
		base := scheme + "://" + ln.Addr().String()
		fmt.Fprintf(cmd.OutOrStdout(), "convlog is running\n  HTTP API:   %s/v1/threads\n  web page:   %s/\n  OpenAI API: %s/v1/chat/completions\n  NATS:       %s\n", base, base, base, cn.URL)
		if cn.Seed != "" {
			fmt.Fprintf(cmd.OutOrStdout(), "  NATS NKey:  %s (nats --nkey %s; operator commands given --data-dir use it)\n", cn.Seed, cn.Seed)
		}
		if f.auditPub != nil {
			fmt.Fprintf(cmd.OutOrStdout(), "  audit key:  %s (Ed25519; GET /v1/audit/key; agentd audit verify)\n", audit.PublicKeyString(f.auditPub))
		}
		if len(agentNames) > 0 { // the next step: a chat with an agent
			name, auth := slices.Min(agentNames), ""
			if f.authConfigured() {
				auth = " -H 'Authorization: Bearer <API key>'"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Try it: the agent %q answers (README.md, Quickstart, has more):\n  curl -s %s/v1/chat/completions -H 'Content-Type: application/json'%s -d '{\"model\": %q, \"messages\": [{\"role\": \"user\", \"content\": \"What is 6*7?\"}]}'\n", name, base, auth, name)
		}
	}
	logger.Info("agentd ready")

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "grace", f.Grace)
	case runErr = <-errc:
		logger.Error("component failed; shutting down", "err", runErr)
	}
	sctx, scancel := context.WithTimeout(context.Background(), f.Grace)
	defer scancel()
	if srv != nil {
		if apiSrv != nil {
			_ = apiSrv.Shutdown(sctx) // ends SSE streams so Shutdown does not wait for them
		}
		_ = srv.Shutdown(sctx)
	}
	cancelRun()
	waitCtx(sctx, &parts)
	if projStop != nil {
		projStop(sctx)
	}
	logger.Info("stopped")
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

// tenants is the tenant service and, with the embedded server, the
// scoped users it gives the server: the registry's users, read-only while
// their tenant is over its storage quota.
type tenants struct {
	svc *tenancy.Service
	// apply gives the server the users again (nil: no embedded server).
	apply func()
	mu    sync.Mutex
	users []tenancy.User
	over  map[string]bool
}

// setOverQuota records whether tenant is over its storage quota and, on a
// change, gives the server the users again.
func (tn *tenants) setOverQuota(tenant string, over bool) {
	tn.mu.Lock()
	changed := tn.over[tenant] != over
	if over {
		tn.over[tenant] = true
	} else {
		delete(tn.over, tenant)
	}
	tn.mu.Unlock()
	if changed && tn.apply != nil {
		tn.apply()
	}
}

// startTenancy starts the tenant service (package tenancy) on cn and, when
// this process runs the embedded NATS server, keeps the server's tenant
// accounts equal to the registry's users: each tenant an account of its
// own holding its users, with the permissions and imports tenancy.For
// gives it (tenancy.ForReadOnly while the tenant is over its storage
// quota; tenancy.AccountsConf), and keeps the users it applied in the data
// directory dataDir for the next start (loadTenantUsers). A registry the
// server refuses is logged and the previous users stay.
func startTenancy(ctx context.Context, cl *client.Client, cn *conn, dataDir string, res provision.Config, logger *slog.Logger,
	start func(string, func(context.Context) error)) (*tenants, error) {
	log := logger.With("component", "tenancy")
	svc, err := tenancy.StartService(ctx, cn.NC, cl.JetStream(), tenancy.ServiceConfig{Resources: res, Logger: log})
	if err != nil {
		return nil, err
	}
	tn := &tenants{svc: svc, over: map[string]bool{}}
	if cn.Server == nil {
		return tn, nil
	}
	res = res.WithDefaults()
	kv, err := cl.JetStream().KeyValue(ctx, res.TenantBucket)
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("KV bucket %s: %w", res.TenantBucket, err)
	}
	var applyMu sync.Mutex // one application at a time, in order
	tn.apply = func() {
		applyMu.Lock()
		defer applyMu.Unlock()
		tn.mu.Lock()
		users, over := slices.Clone(tn.users), maps.Clone(tn.over)
		tn.mu.Unlock()
		conf, err := tenantAccounts(users, res, over)
		if err == nil {
			err = cn.Server.SetAccounts(conf)
		}
		if err == nil {
			err = saveTenantUsers(dataDir, max(res.Partitions, 1), users)
		}
		if err != nil {
			log.Error("tenant accounts not applied", "err", err)
			return
		}
		log.Info("tenant accounts applied", "users", len(users), "read_only_tenants", len(over))
	}
	start("tenants", func(ctx context.Context) error {
		return tenancy.NewRegistry(kv).Watch(ctx, func(users []tenancy.User) {
			tn.mu.Lock()
			tn.users = users
			tn.mu.Unlock()
			tn.apply()
		})
	})
	return tn, nil
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

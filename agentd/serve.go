package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/convlog/convlog/agentd/serve"
)

// serveFlags configure `agentd serve`: cfg binds most flags directly;
// the HTTP limits and the audit flags have types of their own that
// config copies into it.
type serveFlags struct {
	cfg   serve.Config
	Check bool
	// MemoryLimitMiB is --memory-limit-mib (serve.Config.MemoryLimit in MiB).
	MemoryLimitMiB int64
	HTTPLimits     httpLimitFlags
	Audit          auditFlags
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
			return runServe(cmd.Context(), cmd, f.config(logger, cmd.OutOrStdout()), f.Check, logger)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register binds f to serve's flags in fs; their defaults are
// serve.DefaultConfig's, or the environment's where a flag names a
// variable.
func (f *serveFlags) register(fs *pflag.FlagSet) {
	c, d := &f.cfg, serve.DefaultConfig()
	registerConnFlags(&c.NATS, fs)
	c.NATS.CreateDataDir = true
	fs.StringVar(&c.HTTP.Addr, "http-addr", envOr("CONVLOG_HTTP_ADDR", d.HTTP.Addr), "HTTP API address (env CONVLOG_HTTP_ADDR); empty = no HTTP server")
	fs.BoolVar(&c.Projector, "projector", d.Projector, "run the projector")
	fs.IntVar(&c.Workers, "workers", d.Workers, "concurrent agent turns in this process (0 = no workers)")
	fs.StringVar(&c.AgentsFile, "agents-file", "", "JSON file of agents (default: the built-in offline agent \"demo\")")
	fs.StringVar(&c.Consumer, "worker-consumer", d.Consumer, "durable consumer shared by this deployment's workers")
	fs.DurationVar(&c.Grace, "grace", d.Grace, "shutdown grace period")
	fs.BoolVar(&f.Check, "check", false, "validate the configuration and exit")
	fs.StringVar(&c.HTTP.APIKeysFile, "api-keys-file", "", "file of tenant:key lines enabling bearer auth (or env CONVLOG_API_KEYS)")
	fs.BoolVar(&c.HTTP.AllowOpen, "insecure-no-auth", false, "allow a non-loopback --http-addr without API keys")
	fs.StringVar(&c.HTTP.TLSCert, "http-tls-cert", envOr("CONVLOG_HTTP_TLS_CERT", ""), "certificate file (PEM, with its chain): the HTTP API serves HTTPS only (env CONVLOG_HTTP_TLS_CERT)")
	fs.StringVar(&c.HTTP.TLSKey, "http-tls-key", envOr("CONVLOG_HTTP_TLS_KEY", ""), "key file of --http-tls-cert (PEM; env CONVLOG_HTTP_TLS_KEY)")
	fs.DurationVar(&c.TokenDelay, "token-delay", 0, "offline model: pause between streamed tokens (demo pacing)")
	fs.DurationVar(&c.AckWait, "worker-ack-wait", d.AckWait, "time before work held by a crashed worker is redelivered")
	fs.Int64Var(&f.MemoryLimitMiB, "memory-limit-mib", 0, "soft memory limit of this process in MiB (runtime/debug.SetMemoryLimit); 0 = GOMEMLIMIT if set, else 90% of the cgroup's memory.max, else half the machine's memory; -1 = none")
	fs.IntVar(&c.GCPercent, "gc-percent", 0, "the collector's target percentage (runtime/debug.SetGCPercent, GOGC); 0 = GOGC if set, else 400 under a soft memory limit; -1 = collect only near the soft memory limit")
	fs.DurationVar(&c.Rebalance, "rebalance-interval", d.Rebalance, "with partitions on a cluster: how often the partitions' leaders are moved back to one node each after a node failure moved them (a leader step-down per move); 0 = never")
	f.HTTPLimits.register(fs)
	f.Audit.register(fs)
	fs.StringVar(&c.QuotaFile, "quota-file", envOr("CONVLOG_QUOTA_FILE", ""), `per-tenant limits (JSON {"default":{"storage_bytes":1073741824},"tenants":{"acme":{"storage_bytes":10485760,"events_per_second":200}}}; env CONVLOG_QUOTA_FILE): meters every tenant's stored bytes and events per second and refuses appends over a limit (HTTP 429)`)
	fs.StringVar(&c.RetentionFile, "retention-file", "", `retention policies (JSON {"interval":"1m","tenants":{"acme":{"erase_idle":"720h","keep_events":"168h"}}}): erase threads idle longer than erase_idle, compact and redact messages older than keep_events; "agentd retention plan" shows what it would do`)
}

// config is the serve.Config of the flags, logging to logger and writing
// its banner to out.
func (f *serveFlags) config(logger *slog.Logger, out io.Writer) serve.Config {
	c := f.cfg
	c.Logger, c.Out = logger, out
	c.MemoryLimit = f.MemoryLimitMiB << 20
	if f.MemoryLimitMiB < 0 {
		c.MemoryLimit = -1
	}
	c.HTTP.APIKeysEnv = "CONVLOG_API_KEYS"
	f.HTTPLimits.apply(&c.HTTP.Limits)
	c.Audit = serve.AuditConfig{Enabled: f.Audit.Enabled, KeyFile: f.Audit.KeyFile}
	return c
}

// runServe is the serve command: it checks cfg (a usage error when
// invalid), stops there with --check, and otherwise runs serve.Run until
// SIGINT or SIGTERM; a second signal exits at once.
func runServe(parent context.Context, cmd *cobra.Command, cfg serve.Config, check bool, logger *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	if check {
		fmt.Fprintln(cmd.OutOrStdout(), "configuration OK")
		return nil
	}
	ctx, stop := signalContext(parent)
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
	return serve.Run(ctx, cfg)
}

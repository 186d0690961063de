// Package serve runs convlog in one process, as agentd serve does: NATS
// (the embedded JetStream of a data directory, or a connection to an
// existing deployment), stream and bucket provisioning, a projector per
// partition, the audit checkpointer, the retention enforcer, the tenant
// service, the usage meter, the agent workers and the HTTP API with its
// web page and Prometheus metrics. Each part can be switched off, so the
// parts can run as separate deployments sharing one NATS.
//
// [Run] starts the parts in that order and stops them in reverse order
// when its context ends or a part fails.
package serve

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/agentd/retention"
	"github.com/convlog/convlog/internal/quota"
)

// Config configures [Run]. DefaultConfig holds agentd serve's defaults.
// The zero value is not valid (NATS needs a data directory or a URL, and
// Grace must be positive); its other zero fields switch their part off or
// take the part's default, as each field says. Validate's messages name
// the agentd serve flag of each field.
type Config struct {
	// NATS is where NATS is: the embedded JetStream in NATS.DataDir, which
	// Run owns for its life, or NATS.NATSURL. Run sets NATS.OnStorage.
	NATS natsconn.Config
	// Logger receives the log (nil: discard).
	Logger *slog.Logger
	// Out receives, once the HTTP server listens, the lines a person
	// starting agentd reads: the addresses, the embedded server's NKey
	// seed, the audit key and a first request (nil: discard).
	Out io.Writer
	// Projector runs a projector per partition in this process.
	Projector bool
	// Workers is the number of concurrent agent turns in this process,
	// shared between the partitions' worker pools (0: no workers).
	Workers int
	// AgentsFile is the JSON file of agents ([AgentSpec]; "": the
	// built-in offline agent "demo").
	AgentsFile string
	// Consumer is the durable consumer the workers of a deployment share.
	Consumer string
	// AckWait is the time before work held by a crashed worker is
	// redelivered (0: the worker's default).
	AckWait time.Duration
	// TokenDelay is the offline model's pause between streamed tokens.
	TokenDelay time.Duration
	// Grace bounds the shutdown (> 0).
	Grace time.Duration
	// Rebalance is how often the partitions' leaders are moved back to one
	// node each (provision.SpreadLeaders) with partitions on a cluster
	// (NATS.Replicas > 1); 0: never.
	Rebalance time.Duration
	// RetentionFile is the retention policy file (agentd/retention); ""
	// runs no enforcer.
	RetentionFile string
	// QuotaFile is the per-tenant limits file (internal/quota); "" runs
	// no usage meter and sets no limits.
	QuotaFile string
	// Audit is the checkpointer's signing key.
	Audit AuditConfig
	// HTTP is the HTTP API's server.
	HTTP HTTPConfig
	// MemoryLimit is the process's soft memory limit in bytes
	// (runtime/debug.SetMemoryLimit), which Run sets for its life: 0
	// chooses one (memtune.MemoryLimit: none when GOMEMLIMIT is set, else from
	// the cgroup's limit or the machine's memory), negative sets none.
	MemoryLimit int64
	// GCPercent is the collector's target percentage
	// (runtime/debug.SetGCPercent, GOGC), which Run sets for its life: 0
	// chooses one (memtune.GCPercent: none when GOGC is set, else 400 under a
	// soft memory limit), negative turns the collector off until the soft
	// memory limit (Run fails when there is none).
	GCPercent int
}

// HTTPConfig is the HTTP server of [Config].
type HTTPConfig struct {
	// Addr is the listen address (host:port); "" runs no HTTP server. A
	// non-loopback address needs API keys or AllowOpen.
	Addr string
	// APIKeysFile is a file of tenant:key lines enabling bearer auth; ""
	// reads them from the environment variable APIKeysEnv, and with
	// neither set the API runs without auth.
	APIKeysFile string
	// APIKeysEnv names the environment variable of the keys
	// (tenant:key,...; DefaultConfig: CONVLOG_API_KEYS).
	APIKeysEnv string
	// AllowOpen allows a non-loopback Addr without API keys.
	AllowOpen bool
	// TLSCert and TLSKey (PEM files, given together): the server speaks
	// HTTPS only (TLS 1.2 or newer, HTTP/2 offered).
	TLSCert, TLSKey string
	// Limits holds the server's limits: its stream memory budgets,
	// timeouts, connection caps, CORS origins and audit concurrency
	// (the fields httpapi.Config.ValidateLimits checks; zero: httpapi's
	// defaults). Its other fields are ignored: Run sets them.
	Limits httpapi.Config
}

// AuditConfig is the audit checkpointer of [Config].
type AuditConfig struct {
	// Enabled signs checkpoints of every thread's hash chain (package
	// audit).
	Enabled bool
	// KeyFile is the Ed25519 signing key (PEM PKCS#8), created when
	// missing; "" is AuditKeyFile in the data directory, and with
	// NATS.NATSURL no checkpointer runs.
	KeyFile string
}

// AuditKeyFile is the audit signing key's place in a data directory.
const AuditKeyFile = "credentials/audit-ed25519.pem"

// KeyPath is the signing key file: KeyFile, else the data directory's,
// else "" (an external NATS without a key file: no checkpoints).
func (a AuditConfig) KeyPath(nc natsconn.Config) string {
	if a.KeyFile != "" {
		return a.KeyFile
	}
	if nc.NATSURL == "" && nc.DataDir != "" {
		return filepath.Join(nc.DataDir, AuditKeyFile)
	}
	return ""
}

// DefaultConfig is agentd serve's configuration without flags: the
// embedded JetStream in ./convlog-data, the projector, 4 workers of the
// offline demo agent, audit checkpoints and the HTTP API on
// 127.0.0.1:8080.
func DefaultConfig() Config {
	return Config{
		NATS: natsconn.Config{DataDir: "./convlog-data", Replicas: 1, Stream: "CONVLOG", Prefix: "conv",
			Listen: "127.0.0.1:-1", CreateDataDir: true},
		Projector: true, Workers: 4, Consumer: "convlog-agents", AckWait: 30 * time.Second,
		Grace: 10 * time.Second, Rebalance: time.Minute, Audit: AuditConfig{Enabled: true},
		HTTP: HTTPConfig{Addr: "127.0.0.1:8080", APIKeysEnv: "CONVLOG_API_KEYS", Limits: httpapi.Config{
			StreamBufferBytes: httpapi.DefaultStreamBufferBytes, StreamTotalBytes: httpapi.DefaultStreamTotalBytes,
			ReadHeaderTimeout: httpapi.DefaultReadHeaderTimeout, ReadTimeout: httpapi.DefaultReadTimeout,
			ResponseTimeout: httpapi.DefaultResponseTimeout, IdleTimeout: httpapi.DefaultIdleTimeout,
			WriteTimeout: httpapi.DefaultWriteTimeout, MaxAudits: httpapi.DefaultMaxAudits}},
	}
}

// Validate reports every problem with c at once (errors.Join): the NATS
// settings, the counts and durations, the HTTP limits, TLS files that do
// not load, a non-loopback HTTP address without auth, and agents,
// retention and quota files that do not load.
func (c *Config) Validate() error {
	var errs []error
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("--workers must be >= 0, got %d", c.Workers))
	}
	if c.Grace <= 0 {
		errs = append(errs, fmt.Errorf("--grace must be > 0"))
	}
	if c.GCPercent < 0 && c.MemoryLimit < 0 {
		errs = append(errs, fmt.Errorf("--gc-percent %d turns the collector off until the soft memory limit, and --memory-limit-mib -1 sets none", c.GCPercent))
	}
	if err := ValidateHTTPLimits(c.HTTP.Limits); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.HTTP.validate()...)
	if c.AgentsFile != "" {
		if _, err := loadAgentSpecs(c.AgentsFile); err != nil {
			errs = append(errs, err)
		}
	}
	if c.RetentionFile != "" {
		if _, err := retention.LoadFile(c.RetentionFile); err != nil {
			errs = append(errs, err)
		}
	}
	if c.QuotaFile != "" {
		if _, err := quota.LoadFile(c.QuotaFile); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validate returns the problems of the TLS files and the address.
func (h *HTTPConfig) validate() []error {
	var errs []error
	if (h.TLSCert == "") != (h.TLSKey == "") {
		errs = append(errs, errors.New("--http-tls-cert and --http-tls-key go together"))
	} else if h.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(h.TLSCert, h.TLSKey); err != nil {
			errs = append(errs, fmt.Errorf("--http-tls-cert %s / --http-tls-key %s: %w", h.TLSCert, h.TLSKey, err))
		}
	}
	if h.Addr != "" {
		host, _, err := net.SplitHostPort(h.Addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("--http-addr %q: %w", h.Addr, err))
		} else if !natsconn.IsLoopback(host) && !h.AuthConfigured() && !h.AllowOpen {
			errs = append(errs, fmt.Errorf("--http-addr %q is not a loopback address and no API keys are set: set --api-keys-file or CONVLOG_API_KEYS, or pass --insecure-no-auth", h.Addr))
		}
	}
	return errs
}

// AuthConfigured reports whether API keys are set: APIKeysFile, or a
// non-empty APIKeysEnv variable.
func (h *HTTPConfig) AuthConfigured() bool {
	return h.APIKeysFile != "" || (h.APIKeysEnv != "" && os.Getenv(h.APIKeysEnv) != "")
}

// ValidateHTTPLimits reports every problem with the HTTP server's limits
// l (httpapi.Config.ValidateLimits, and a negative WriteTimeout), naming
// the --http-* flags.
func ValidateHTTPLimits(l httpapi.Config) error {
	err := l.ValidateLimits()
	if err != nil {
		err = fmt.Errorf("--http-* flags: %w", err)
	}
	if l.WriteTimeout < 0 {
		err = errors.Join(err, fmt.Errorf("--http-stream-write-timeout must be >= 0, got %s", l.WriteTimeout))
	}
	return err
}

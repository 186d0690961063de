package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/datadir"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/provision"
)

// connFlags are the NATS connection settings every subcommand shares.
// Either --nats-url (an existing server or cluster) or the embedded
// JetStream in --data-dir.
type connFlags struct {
	DataDir      string
	NATSURL      string
	CredsFile    string
	NKeyFile     string
	User         string
	PasswordFile string
	TokenFile    string
	TLSCert      string
	TLSKey       string
	TLSCA        string
	Replicas     int
	// Partitions is K for a new deployment (0 = the deployment's).
	Partitions int
	Stream     string
	Prefix     string
	MaxPayload int32
	Listen     string // embedded server client address (host:port), "" = loopback random
	// NATSTLSCert and NATSTLSKey: the embedded server's client listener
	// uses TLS with them.
	NATSTLSCert, NATSTLSKey string
	// InsecureListen allows a non-loopback --nats-listen without TLS.
	InsecureListen bool
	// CreateDataDir: the command may create a missing --data-dir (serve,
	// import, replay-run); the others refuse one, so a mistyped path does
	// not silently start an empty store.
	CreateDataDir bool
	// OnStorage is called when the embedded server's disk fills (true) and
	// when JetStream restarted after space returned (false).
	OnStorage func(full bool)
}

func (f *connFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.DataDir, "data-dir", envOr("CONVLOG_DATA_DIR", "./convlog-data"), "JetStream data directory of the embedded NATS server (env CONVLOG_DATA_DIR); ignored with --nats-url")
	fs.StringVar(&f.NATSURL, "nats-url", os.Getenv("CONVLOG_NATS_URL"), "comma-separated NATS URLs of an existing server or cluster (env CONVLOG_NATS_URL); empty = embedded")
	fs.StringVar(&f.CredsFile, "creds", "", "NATS credentials file (JWT + NKey seed)")
	fs.StringVar(&f.NKeyFile, "nkey", "", "NATS NKey seed file")
	fs.StringVar(&f.User, "user", "", "NATS user name (password from --password-file or env CONVLOG_NATS_PASSWORD)")
	fs.StringVar(&f.PasswordFile, "password-file", "", "file holding the NATS password")
	fs.StringVar(&f.TokenFile, "token-file", "", "file holding a NATS token (or env CONVLOG_NATS_TOKEN)")
	fs.StringVar(&f.TLSCert, "tls-cert", "", "client TLS certificate file")
	fs.StringVar(&f.TLSKey, "tls-key", "", "client TLS key file")
	fs.StringVar(&f.TLSCA, "tls-ca", "", "CA file to verify the NATS server")
	fs.IntVar(&f.Replicas, "replicas", 1, "replicas of the stream and KV buckets (1 or 3 on a cluster); with --nats-url, commands other than serve provision only when it is given")
	fs.IntVar(&f.Partitions, "partitions", envInt("CONVLOG_PARTITIONS"), "partitions of the log and snapshot buckets (K; env CONVLOG_PARTITIONS): recorded by the first process that provisions a deployment and fixed after; 0 = the deployment's (1 for a new one); see docs/partitions-design.md")
	fs.StringVar(&f.Stream, "stream", "CONVLOG", "JetStream stream name")
	fs.StringVar(&f.Prefix, "subject-prefix", "conv", "thread subject prefix")
	fs.Int32Var(&f.MaxPayload, "max-payload", 0, "embedded server max payload in bytes (0 = NATS default, 1 MiB)")
	fs.StringVar(&f.Listen, "nats-listen", "127.0.0.1:-1", "client address of the embedded NATS server (host:port; -1 = random port); a non-loopback address needs --nats-tls-cert/--nats-tls-key or --insecure-nats-listen")
	fs.StringVar(&f.NATSTLSCert, "nats-tls-cert", "", "certificate file: the embedded NATS server's client listener requires TLS")
	fs.StringVar(&f.NATSTLSKey, "nats-tls-key", "", "key file of --nats-tls-cert")
	fs.BoolVar(&f.InsecureListen, "insecure-nats-listen", false, "allow a non-loopback --nats-listen without TLS (credentials still required)")
}

// envInt is the integer in env k: 0 when unset, -1 when not an integer
// (validate then names the flag).
func envInt(k string) int {
	v := os.Getenv(k)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func (f *connFlags) validate() error {
	var errs []error
	if f.NATSURL == "" && f.DataDir == "" {
		errs = append(errs, errors.New("--data-dir or --nats-url is required"))
	}
	if f.Replicas < 1 || f.Replicas > 5 {
		errs = append(errs, fmt.Errorf("--replicas must be 1..5, got %d", f.Replicas))
	}
	if f.Partitions < 0 || f.Partitions > provision.MaxPartitions {
		errs = append(errs, fmt.Errorf("--partitions (env CONVLOG_PARTITIONS) must be 0..%d, got %d", provision.MaxPartitions, f.Partitions))
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if (f.NATSTLSCert == "") != (f.NATSTLSKey == "") {
		errs = append(errs, errors.New("--nats-tls-cert and --nats-tls-key go together"))
	}
	if f.NATSURL == "" {
		if host, _, err := f.listenAddr(); err != nil {
			errs = append(errs, err)
		} else if !isLoopback(host) && f.NATSTLSCert == "" && !f.InsecureListen {
			errs = append(errs, fmt.Errorf("--nats-listen %q is not a loopback address: the embedded NATS server would take credentials in clear text from the network; set --nats-tls-cert and --nats-tls-key, or pass --insecure-nats-listen", f.Listen))
		}
	}
	for _, p := range []struct{ flag, path string }{{"--creds", f.CredsFile}, {"--nkey", f.NKeyFile}, {"--password-file", f.PasswordFile},
		{"--token-file", f.TokenFile}, {"--tls-cert", f.TLSCert}, {"--tls-key", f.TLSKey}, {"--tls-ca", f.TLSCA},
		{"--nats-tls-cert", f.NATSTLSCert}, {"--nats-tls-key", f.NATSTLSKey}} {
		if p.path != "" {
			if _, err := os.Stat(p.path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.flag, err))
			}
		}
	}
	if f.NATSURL == "" && f.Replicas > 1 {
		errs = append(errs, errors.New("--replicas > 1 needs a cluster (--nats-url)"))
	}
	return errors.Join(errs...)
}

func (f *connFlags) resources() provision.Config {
	return provision.Config{Stream: f.Stream, SubjectPrefix: f.Prefix, Replicas: f.Replicas, Partitions: f.Partitions}
}

// conn is an open NATS connection, with the embedded server if we run one.
type conn struct {
	NC     *nats.Conn
	Server *embedded.Server
	URL    string
	// Lock is held while this process owns the data directory (it runs
	// Server).
	Lock *datadir.Lock
	// Seed is the NKey seed file the embedded server requires ("" with
	// --nats-url).
	Seed string
	// OwnerPID is the PID of the data directory's owner this command
	// attached to (0 when it owns the directory or uses --nats-url).
	OwnerPID int
}

// Close withdraws the owner record, drains the connection, stops the
// embedded server and releases the data directory (in that order).
func (c *conn) Close() {
	if c.Lock != nil {
		c.Lock.Withdraw()
	}
	if c.NC != nil {
		_ = c.NC.Drain()
		deadline := time.Now().Add(5 * time.Second)
		for c.NC.IsDraining() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		c.NC.Close()
	}
	if c.Server != nil {
		c.Server.Shutdown()
	}
	c.Lock.Unlock()
}

// open starts the embedded server or connects to --nats-url. Reconnects
// forever with backoff (cluster node loss, rolling restarts). role says
// what the process may do with the data directory (see openDataDir).
func (f *connFlags) open(logger *slog.Logger, name string, role dataDirRole) (*conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { logger.Info("NATS reconnected", "url", nc.ConnectedUrl()) }),
	}
	if f.NATSURL == "" {
		return f.openDataDir(logger, role, opts)
	}
	if f.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(f.CredsFile))
	}
	if f.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(f.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if f.User != "" {
		pw := os.Getenv("CONVLOG_NATS_PASSWORD")
		if f.PasswordFile != "" {
			b, err := os.ReadFile(f.PasswordFile)
			if err != nil {
				return nil, err
			}
			pw = strings.TrimSpace(string(b))
		}
		opts = append(opts, nats.UserInfo(f.User, pw))
	}
	tok := os.Getenv("CONVLOG_NATS_TOKEN")
	if f.TokenFile != "" {
		b, err := os.ReadFile(f.TokenFile)
		if err != nil {
			return nil, err
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok != "" {
		opts = append(opts, nats.Token(tok))
	}
	if f.TLSCert != "" {
		opts = append(opts, nats.ClientCert(f.TLSCert, f.TLSKey))
	}
	if f.TLSCA != "" {
		opts = append(opts, nats.RootCAs(f.TLSCA))
	}
	nc, err := nats.Connect(f.NATSURL, opts...)
	if role == roleServe {
		// A server that does not answer yet (a cluster starting beside
		// us): wait for it rather than exit; any other error (TLS,
		// authentication) is final.
		for wait, deadline := 250*time.Millisecond, time.Now().Add(serveConnectWait); errors.Is(err, nats.ErrNoServers) && time.Now().Before(deadline); wait = min(2*wait, 2*time.Second) {
			logger.Warn("no NATS server answers yet; retrying", "url", f.NATSURL, "retry_in", wait)
			time.Sleep(wait)
			nc, err = nats.Connect(f.NATSURL, opts...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", f.NATSURL, err)
	}
	return &conn{NC: nc, URL: f.NATSURL}, nil
}

// serveConnectWait is how long agentd serve waits for a --nats-url server
// that refuses connections at start (no server listening yet) before it
// exits.
const serveConnectWait = time.Minute

// client opens a convlog client on c, provisioning resources if asked;
// track sets client.Config.TrackSnapshots (agentd serve: its HTTP API's
// views of hot threads cost no round trip).
func (f *connFlags) client(ctx context.Context, c *conn, provisionRes, track bool, producer string, logger *slog.Logger) (*client.Client, error) {
	return client.New(ctx, c.NC, client.Config{Resources: f.resources(), Provision: provisionRes, TrackSnapshots: track, Producer: producer, Logger: logger})
}

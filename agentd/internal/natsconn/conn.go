// Package natsconn opens agentd's NATS: the embedded JetStream of a data
// directory or an existing server or cluster (Config.NATSURL).
//
// A data directory has one owner at a time, the process that holds its
// lock (two nats-servers on the same files lose acknowledged writes). The
// owner runs the embedded server with the directory's generated NKey
// credentials. agentd serve owns its directory for its life
// ([RoleServe]); an operator command ([RoleCommand]) owns a free
// directory while it runs, its server accepting in-process connections
// only, and otherwise connects to the owner's NATS with the credentials
// the owner published. Connections reconnect forever with backoff.
//
// The errors of [Config.Validate] and [Config.Open] name the agentd flags
// that set the fields.
package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/datadir"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/provision"
)

// Config is where NATS is and how to reach it: either NATSURL (an existing
// server or cluster) or the embedded JetStream in DataDir. The zero value
// is not valid: DataDir or NATSURL is required, and Replicas is 1 to 5.
// agentd binds its NATS flags to these fields.
type Config struct {
	// DataDir is the embedded server's JetStream directory (--data-dir);
	// Open makes it absolute. Ignored with NATSURL.
	DataDir string
	// NATSURL is the comma-separated URLs of an existing server or
	// cluster (--nats-url); "" runs the embedded server.
	NATSURL string
	// CredsFile, NKeyFile, User with PasswordFile (or the environment's
	// CONVLOG_NATS_PASSWORD), TokenFile (or CONVLOG_NATS_TOKEN) and the
	// client TLS files authenticate to NATSURL.
	CredsFile    string
	NKeyFile     string
	User         string
	PasswordFile string
	TokenFile    string
	TLSCert      string
	TLSKey       string
	TLSCA        string
	// Replicas of the stream and KV buckets (1 to 5; more than 1 needs a
	// cluster).
	Replicas int
	// Partitions is K for a new deployment (0 = the deployment's).
	Partitions int
	// Stream is the JetStream stream's name and Prefix the threads'
	// subject prefix ("": provision's defaults).
	Stream string
	Prefix string
	// MaxPayload is the embedded server's max payload in bytes (0: NATS
	// default, 1 MiB).
	MaxPayload int32
	// Listen is the embedded server's client address (host:port, port -1
	// random; "" = loopback, random port). Only RoleServe listens.
	Listen string
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

// Validate reports every problem with the settings at once
// (errors.Join); the files they name must exist.
func (f *Config) Validate() error {
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
		} else if !IsLoopback(host) && f.NATSTLSCert == "" && !f.InsecureListen {
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

// Resources is the stream and buckets the settings name.
func (f *Config) Resources() provision.Config {
	return provision.Config{Stream: f.Stream, SubjectPrefix: f.Prefix, Replicas: f.Replicas, Partitions: f.Partitions}
}

// Conn is an open NATS connection, with the embedded server if this
// process runs one.
type Conn struct {
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
func (c *Conn) Close() {
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

// Open starts the embedded server or connects to NATSURL, naming the
// connection name. Reconnects forever with backoff (cluster node loss,
// rolling restarts). role says what the process may do with the data
// directory: RoleServe fails at once when another process owns it, and
// with NATSURL waits up to a minute for a server that does not answer
// yet.
func (f *Config) Open(logger *slog.Logger, name string, role Role) (*Conn, error) {
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
	if role == RoleServe {
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
	return &Conn{NC: nc, URL: f.NATSURL}, nil
}

// serveConnectWait is how long agentd serve waits for a --nats-url server
// that refuses connections at start (no server listening yet) before it
// exits.
const serveConnectWait = time.Minute

// Client opens a convlog client on c, provisioning resources if asked;
// track sets client.Config.TrackSnapshots (agentd serve: its HTTP API's
// views of hot threads cost no round trip).
func (f *Config) Client(ctx context.Context, c *Conn, provisionRes, track bool, producer string, logger *slog.Logger) (*client.Client, error) {
	return client.New(ctx, c.NC, client.Config{Resources: f.Resources(), Provision: provisionRes, TrackSnapshots: track, Producer: producer, Logger: logger})
}

// IsLoopback reports whether host (a name or an IP address) is this
// machine's loopback: "localhost" or a loopback IP.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

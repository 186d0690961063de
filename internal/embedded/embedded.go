// Package embedded runs an in-process nats-server with JetStream: the
// default NATS of `agentd serve` and of `agentd import --data-dir`, and the
// server tests run against. It is the only non-test package that imports
// nats-server (a test in the repository root guards this).
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Config configures an embedded server. The zero value is not usable:
// StoreDir is required.
type Config struct {
	// StoreDir is the JetStream data directory (created if missing).
	StoreDir string
	// Host and Port to listen on. Defaults: 127.0.0.1 and -1 (a random
	// free port). Set DontListen to accept in-process connections only.
	Host       string
	Port       int
	DontListen bool
	// ServerName, default "convlog-embedded".
	ServerName string
	// MaxPayload in bytes; 0 keeps the NATS default of 1 MiB.
	MaxPayload int32
	// Logger receives the server's log lines (nil = discard).
	Logger *slog.Logger
	// Cluster, when set, joins the server to a JetStream cluster.
	Cluster *ClusterConfig
	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default 10 s.
	ReadyTimeout time.Duration
	// NKeySeed is the path of an NKey user seed file. When set, the server
	// requires every client to authenticate as that user (over TCP and in
	// process); Connect does so. Empty: no authentication (tests).
	NKeySeed string
	// Users are NKey users the server accepts besides NKeySeed's (which
	// has every permission), each limited to its allow lists: the
	// tenant-scoped users of package tenancy. They need NKeySeed (without
	// it the server has no authentication). Change them on a running
	// server with [Server.SetUsers].
	Users []User
	// TLSCert and TLSKey are certificate and key files for the client
	// listener; when set, TCP clients must use TLS (in-process
	// connections need not). Both or neither.
	TLSCert, TLSKey string
	// StorageReserve is the free space (bytes) the store's file system
	// needs before JetStream is restarted after its disk filled (see
	// Server.StorageFull). Default DefaultStorageReserve.
	StorageReserve uint64
	// OnStorage, when set, is called when the store's disk becomes full
	// (true) and when JetStream has been restarted after space returned
	// (false), from the server's goroutines.
	OnStorage func(full bool)
}

// ClusterConfig makes the server a node of a JetStream cluster.
type ClusterConfig struct {
	// Name of the cluster (all nodes alike).
	Name string
	// Host and Port of this node's route listener.
	Host string
	Port int
	// Routes lists every node's route URL, e.g. "nats://127.0.0.1:6222".
	Routes []string
}

// User is an NKey user limited to the subjects it may publish to and
// subscribe to (NATS subject patterns; nothing else is allowed, and
// replies to its requests must come to a subject in Subscribe).
type User struct {
	// PublicKey is the user's public NKey ("U...").
	PublicKey string
	// Publish and Subscribe are the allow lists.
	Publish, Subscribe []string
}

// Server is a running embedded nats-server.
type Server struct {
	s    *server.Server
	auth []nats.Option
	st   *storage
	// opts are the options the server runs with, kept for SetUsers;
	// admin is the NKeySeed user ("" without authentication).
	mu    sync.Mutex
	opts  *server.Options
	admin string
}

// nkeyUsers returns the server's NKey users: admin with every permission
// and users with theirs. It returns an error naming a user whose public
// key is not a user NKey.
func nkeyUsers(admin string, users []User) ([]*server.NkeyUser, error) {
	out := []*server.NkeyUser{{Nkey: admin}}
	for i, u := range users {
		if !nkeys.IsValidPublicUserKey(u.PublicKey) {
			return nil, fmt.Errorf("embedded: user %d: %q is not a public user NKey", i, u.PublicKey)
		}
		out = append(out, &server.NkeyUser{Nkey: u.PublicKey, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: slices.Clone(u.Publish)},
			Subscribe: &server.SubjectPermission{Allow: slices.Clone(u.Subscribe)},
		}})
	}
	return out, nil
}

// sameUsers reports whether a and b hold the same users with the same
// allow lists, in any order.
func sameUsers(a, b []*server.NkeyUser) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(u *server.NkeyUser) string {
		k := u.Nkey
		if p := u.Permissions; p != nil {
			if p.Publish != nil {
				k += "|p:" + strings.Join(p.Publish.Allow, ",")
			}
			if p.Subscribe != nil {
				k += "|s:" + strings.Join(p.Subscribe.Allow, ",")
			}
		}
		return k
	}
	seen := make(map[string]int, len(a))
	for _, u := range a {
		seen[key(u)]++
	}
	for _, u := range b {
		if seen[key(u)] == 0 {
			return false
		}
		seen[key(u)]--
	}
	return true
}

// SetUsers replaces the scoped users (Config.Users) of a running server
// (a configuration reload): a new user may connect at once, and a removed
// user's connections are closed with an authorization error. The same
// users again change nothing. A reload also closes connections that are
// authenticating at that moment (nats-server 2.15); clients reconnect. It returns
// an error when the server runs without NKeySeed or a key is invalid;
// the users are then unchanged. Safe for concurrent use.
func (s *Server) SetUsers(users []User) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin == "" {
		return errors.New("embedded: scoped users need NKeySeed (the server has no authentication)")
	}
	nk, err := nkeyUsers(s.admin, users)
	if err != nil {
		return err
	}
	if sameUsers(s.opts.Nkeys, nk) {
		// No reload: a reload closes the connections that are still
		// authenticating while it runs (nats-server sees them as moved
		// to another account), so only a real change pays for that.
		return nil
	}
	o := s.opts.Clone()
	o.Nkeys = nk
	if err := s.s.ReloadOptions(o); err != nil {
		return fmt.Errorf("embedded: reload users: %w", err)
	}
	s.opts = o
	return nil
}

// Start starts the server and waits until it accepts connections. It
// returns an error when StoreDir is empty, the options are invalid, the
// port is taken, or the server is not ready within ReadyTimeout.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded: StoreDir is required")
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		DontListen: cfg.DontListen,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		MaxPayload: cfg.MaxPayload,
	}
	if opts.ServerName == "" {
		opts.ServerName = "convlog-embedded"
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = -1
	}
	if cfg.MaxPayload > 0 && int64(cfg.MaxPayload) > 64<<20 {
		return nil, fmt.Errorf("embedded: MaxPayload %d exceeds the NATS hard limit of 64 MiB", cfg.MaxPayload)
	}
	if cfg.MaxPayload > 0 {
		opts.MaxPending = max(int64(cfg.MaxPayload)*2, 64<<20)
	}
	if c := cfg.Cluster; c != nil {
		opts.Cluster.Name, opts.Cluster.Host, opts.Cluster.Port = c.Name, c.Host, c.Port
		if opts.Cluster.Host == "" {
			opts.Cluster.Host = "127.0.0.1"
		}
		opts.Routes = server.RoutesFromStr(strings.Join(c.Routes, ","))
	}
	var auth []nats.Option
	if cfg.NKeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeed)
		if err != nil {
			return nil, fmt.Errorf("embedded: NKeySeed: %w", err)
		}
		var co nats.Options
		if err := o(&co); err != nil {
			return nil, fmt.Errorf("embedded: NKeySeed: %w", err)
		}
		if opts.Nkeys, err = nkeyUsers(co.Nkey, cfg.Users); err != nil {
			return nil, err
		}
		auth = []nats.Option{o}
	} else if len(cfg.Users) > 0 {
		return nil, errors.New("embedded: Users need NKeySeed (the server would have no authentication)")
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("embedded: TLSCert and TLSKey go together")
	}
	if cfg.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("embedded: TLS: %w", err)
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify = tc, true, false
		opts.TLSTimeout = 2
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	st := &storage{reserve: cfg.StorageReserve, dir: cfg.StoreDir, onChange: cfg.OnStorage, done: make(chan struct{})}
	if st.reserve == 0 {
		st.reserve = DefaultStorageReserve
	}
	// The adapter also watches for a full disk, so it is set with or
	// without a Logger (nil discards).
	s.SetLoggerV2(&slogAdapter{l: cfg.Logger, st: st}, false, false, false)
	go s.Start()
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if !s.ReadyForConnections(timeout) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded: server in %s not ready after %s", cfg.StoreDir, timeout)
	}
	if jc := s.JetStreamConfig(); jc != nil {
		go st.watch(s, *jc)
	} else {
		close(st.done)
	}
	srv := &Server{s: s, auth: auth, st: st, opts: opts}
	if len(opts.Nkeys) > 0 {
		srv.admin = opts.Nkeys[0].Nkey
	}
	return srv, nil
}

// ClientURL is the URL clients connect to ("" with DontListen).
func (s *Server) ClientURL() string {
	if s.s.ClientURL() == "" {
		return ""
	}
	return s.s.ClientURL()
}

// Connect opens an in-process client connection to the server,
// authenticated with Config.NKeySeed when it is set. opts are added after
// convlog's defaults.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.InProcessServer(s.s), nats.Name("convlog")}, s.auth...)
	all = append(all, opts...)
	return nats.Connect("", all...)
}

// Shutdown stops the server and waits until it has stopped. Safe to call
// more than once.
func (s *Server) Shutdown() {
	s.stopWatch()
	s.s.Shutdown()
	s.s.WaitForShutdown()
}

// stopWatch stops the storage watcher (once).
func (s *Server) stopWatch() {
	if s.st == nil {
		return
	}
	select {
	case <-s.st.done:
	default:
		close(s.st.done)
	}
}

// NATS returns the underlying server, for tests that need it.
func (s *Server) NATS() *server.Server { return s.s }

// slogAdapter sends the server's log to l (nil discards it) and shows its
// error lines to st, which watches for a full disk.
type slogAdapter struct {
	l  *slog.Logger
	st *storage
}

func (a *slogAdapter) log(level slog.Level, format string, v ...any) {
	if a.l == nil && level < slog.LevelError {
		return
	}
	msg := fmt.Sprintf(format, v...)
	if level >= slog.LevelError {
		a.st.noteLog(msg)
	}
	if a.l != nil {
		a.l.Log(context.Background(), level, msg, "component", "nats")
	}
}

func (a *slogAdapter) Noticef(format string, v ...any) { a.log(slog.LevelInfo, format, v...) }
func (a *slogAdapter) Warnf(format string, v ...any)   { a.log(slog.LevelWarn, format, v...) }
func (a *slogAdapter) Fatalf(format string, v ...any)  { a.log(slog.LevelError, format, v...) }
func (a *slogAdapter) Errorf(format string, v ...any)  { a.log(slog.LevelError, format, v...) }
func (a *slogAdapter) Debugf(format string, v ...any)  { a.log(slog.LevelDebug, format, v...) }
func (a *slogAdapter) Tracef(format string, v ...any)  { a.log(slog.LevelDebug, format, v...) }

// Package embedded runs an in-process nats-server with JetStream: the
// default NATS of `agentd serve` and of `agentd import --data-dir`, and the
// server tests run against. It is the only non-test package that imports
// nats-server (a test in the repository root guards this).
package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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
	// Accounts is a nats-server configuration "accounts { … }" block
	// (nats-server's configuration syntax): the accounts of the
	// server's other users, such as package tenancy's tenant accounts
	// (tenancy.AccountsConf). The account it names GlobalAccount holds
	// the NKeySeed user and must enable JetStream ("jetstream: enabled");
	// the server runs it as its global account "$G", the account of a
	// server without accounts, so a data directory keeps its streams
	// whether accounts are set or not. Empty: every user is the
	// NKeySeed user, in the global account. Needs NKeySeed. Change it on
	// a running server with [Server.SetAccounts].
	Accounts string
	// GlobalAccount names the account of Accounts that is the global
	// account. Default DefaultGlobalAccount.
	GlobalAccount string
	// TLSCert and TLSKey are certificate and key files for the client
	// listener; when set, TCP clients must use TLS (in-process
	// connections need not). Both or neither.
	TLSCert, TLSKey string
	// StorageReserve is the free space (bytes) the store's file system
	// needs before the store is no longer full after its disk filled (see
	// Server.StorageFull). Default DefaultStorageReserve.
	StorageReserve uint64
	// OnStorage, when set, is called when the store's disk becomes full
	// (true) and when JetStream has its own storage limit again after
	// space returned (false), from the server's goroutines.
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

// DefaultGlobalAccount is Config.GlobalAccount's default.
const DefaultGlobalAccount = "CONVLOG"

// Server is a running embedded nats-server.
type Server struct {
	s    *server.Server
	auth []nats.Option
	st   *storage
	// opts are the options the server runs with, kept for SetAccounts;
	// admin is the NKeySeed user ("" without authentication); accounts
	// and global are Config.Accounts and Config.GlobalAccount as applied.
	mu       sync.Mutex
	opts     *server.Options
	admin    string
	accounts string
	global   string
}

// withAccounts sets o's accounts and NKey users: the accounts conf
// declares, the one named global renamed to the server's global account
// "$G" (nats-server reserves that name in configuration), their users,
// and admin as a user of the global account (with conf empty, the only
// user). It returns an error naming what is wrong in conf.
func withAccounts(o *server.Options, admin, conf, global string) error {
	o.Accounts, o.Nkeys = nil, []*server.NkeyUser{{Nkey: admin}}
	if conf == "" {
		return nil
	}
	var p server.Options
	if err := p.ProcessConfigString(conf); err != nil {
		return fmt.Errorf("embedded: accounts: %w", err)
	}
	if len(p.Users) > 0 || p.Username != "" || p.Authorization != "" {
		return errors.New("embedded: accounts: only NKey users are allowed (users with a password or token are not)")
	}
	var g *server.Account
	for _, a := range p.Accounts {
		if a.Name == global {
			g = a
		}
	}
	if g == nil {
		return fmt.Errorf("embedded: accounts: no account %q (the global account, which holds JetStream)", global)
	}
	g.Name = server.DEFAULT_GLOBAL_ACCOUNT
	o.Accounts = p.Accounts
	o.Nkeys = append(p.Nkeys, &server.NkeyUser{Nkey: admin, Account: g})
	return nil
}

// SetAccounts replaces the accounts (Config.Accounts) of a running server
// (a configuration reload): a new user may connect at once, and a removed
// user's connections are closed with an authorization error. The same
// accounts again change nothing. A reload also closes connections that
// are authenticating at that moment (nats-server 2.15); clients reconnect.
// It returns an error when the server runs without NKeySeed or conf is
// invalid; the accounts are then unchanged. Safe for concurrent use.
func (s *Server) SetAccounts(conf string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin == "" {
		return errors.New("embedded: accounts need NKeySeed (the server has no authentication)")
	}
	if conf == s.accounts {
		// No reload: a reload closes the connections that are still
		// authenticating while it runs (nats-server sees them as moved
		// to another account), so only a real change pays for that.
		return nil
	}
	o := s.opts.Clone()
	if err := withAccounts(o, s.admin, conf, s.global); err != nil {
		return err
	}
	added := false
	for _, a := range o.Accounts {
		if a.Name != server.DEFAULT_GLOBAL_ACCOUNT && !hasAccount(s.opts.Accounts, a.Name) {
			added = true
		}
	}
	if err := s.s.ReloadOptions(o); err != nil {
		return fmt.Errorf("embedded: reload accounts: %w", err)
	}
	s.opts, s.accounts = o, conf
	if added {
		// A reload registers a new account without subscribing its
		// service imports (nats-server 2.15 does that only at start or
		// for an account that existed before the reload): the same
		// options again subscribe them.
		o = o.Clone()
		if err := withAccounts(o, s.admin, conf, s.global); err != nil {
			return err
		}
		if err := s.s.ReloadOptions(o); err != nil {
			return fmt.Errorf("embedded: reload accounts: %w", err)
		}
		s.opts = o
	}
	return nil
}

// hasAccount reports whether accounts holds one named name.
func hasAccount(accounts []*server.Account, name string) bool {
	for _, a := range accounts {
		if a.Name == name {
			return true
		}
	}
	return false
}

// Start starts the server and waits until it accepts connections. It
// returns an error when StoreDir is empty, the options are invalid, the
// port is taken, or the server is not ready within ReadyTimeout.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded: StoreDir is required")
	}
	opts, err := serverOptions(cfg)
	if err != nil {
		return nil, err
	}
	auth, admin, global, err := applyAuth(opts, cfg)
	if err != nil {
		return nil, err
	}
	if err := applyTLS(opts, cfg); err != nil {
		return nil, err
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
		st.start(s, *jc)
	} else {
		close(st.done)
	}
	srv := &Server{s: s, auth: auth, st: st, opts: opts, admin: admin, accounts: cfg.Accounts, global: global}
	return srv, nil
}

// serverOptions returns the nats-server options of cfg without
// authentication or TLS: JetStream in StoreDir, the listener, MaxPayload
// (with a client's pending limit of twice it, at least 64 MiB) and the
// cluster, with their defaults. It returns an error when MaxPayload
// exceeds the NATS hard limit of 64 MiB.
func serverOptions(cfg Config) (*server.Options, error) {
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
	return opts, nil
}

// applyAuth sets opts' NKey users and accounts from cfg.NKeySeed and
// cfg.Accounts (withAccounts), and returns the client options that
// authenticate as the NKeySeed user, that user's public key (admin) and
// the global account's name (cfg.GlobalAccount, DefaultGlobalAccount when
// empty and NKeySeed is set). Without NKeySeed it changes nothing and
// returns no options. It returns an error when the seed file cannot be
// read, cfg.Accounts is invalid, or Accounts are set without NKeySeed.
func applyAuth(opts *server.Options, cfg Config) (auth []nats.Option, admin, global string, err error) {
	if cfg.NKeySeed == "" {
		if cfg.Accounts != "" {
			return nil, "", "", errors.New("embedded: Accounts need NKeySeed (the server would have no authentication)")
		}
		return nil, "", cfg.GlobalAccount, nil
	}
	o, err := nats.NkeyOptionFromSeed(cfg.NKeySeed)
	if err != nil {
		return nil, "", "", fmt.Errorf("embedded: NKeySeed: %w", err)
	}
	var co nats.Options
	if err := o(&co); err != nil {
		return nil, "", "", fmt.Errorf("embedded: NKeySeed: %w", err)
	}
	global = cmp.Or(cfg.GlobalAccount, DefaultGlobalAccount)
	admin = co.Nkey
	if err := withAccounts(opts, admin, cfg.Accounts, global); err != nil {
		return nil, "", "", err
	}
	return []nats.Option{o}, admin, global, nil
}

// applyTLS sets opts' client TLS from cfg.TLSCert and cfg.TLSKey (TCP
// clients must use TLS; client certificates are not verified). Without
// them it changes nothing. It returns an error when only one is set or
// they cannot be loaded.
func applyTLS(opts *server.Options, cfg Config) error {
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("embedded: TLSCert and TLSKey go together")
	}
	if cfg.TLSCert == "" {
		return nil
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey})
	if err != nil {
		return fmt.Errorf("embedded: TLS: %w", err)
	}
	opts.TLSConfig, opts.TLS, opts.TLSVerify = tc, true, false
	opts.TLSTimeout = 2
	return nil
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

package natsconn

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convlog/convlog/internal/datadir"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

// Role is what a process may do with the data directory.
type Role int

const (
	// RoleServe: the process must own the directory for its life; a
	// directory another process owns is an error at once.
	RoleServe Role = iota
	// RoleCommand: an operator command owns the directory while it runs
	// when nobody else does, and otherwise talks to the owner's NATS.
	RoleCommand
)

// attachWait bounds how long an operator command waits for the owner of a
// locked data directory to publish its NATS address (a serve starting up)
// or to release the lock (another operator command finishing).
const attachWait = 30 * time.Second

// listenAddr parses --nats-listen into host and port (-1 = random).
func (f *Config) listenAddr() (string, int, error) {
	if f.Listen == "" {
		return "127.0.0.1", -1, nil
	}
	h, p, err := net.SplitHostPort(f.Listen)
	if err != nil {
		return "", 0, fmt.Errorf("--nats-listen %q: want host:port: %w", f.Listen, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("--nats-listen %q: port must be -1 (random) or 0..65535", f.Listen)
	}
	return h, port, nil
}

// openDataDir opens the embedded JetStream in --data-dir. The process that
// holds the directory's lock is its only owner (two nats-servers on the
// same files lose acknowledged writes); the owner runs the embedded server
// with the directory's generated NKey credentials. serve owns the
// directory or fails naming the owner's PID; an operator command owns it
// when it is free (its server then listens in process only) and otherwise
// connects to the owner's NATS with the credentials the owner published.
func (f *Config) openDataDir(logger *slog.Logger, role Role, opts []nats.Option) (*Conn, error) {
	dir, err := filepath.Abs(f.DataDir) // the owner record is read from other working directories
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	f.DataDir = dir
	if st, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if !f.CreateDataDir {
			return nil, fmt.Errorf("data directory %s does not exist (run `agentd serve` or `agentd import` to create one, or pass --data-dir or --nats-url)", dir)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", dir)
	}
	deadline := time.Now().Add(attachWait)
	for {
		lock, err := datadir.Acquire(dir)
		if err == nil {
			return f.startOwner(lock, role, opts)
		}
		var inUse *datadir.InUseError
		if !errors.As(err, &inUse) {
			return nil, err
		}
		if role == RoleServe {
			return nil, fmt.Errorf("%w: stop it first, or run a second agentd against its NATS with --nats-url (operator commands given this --data-dir talk to it)", err)
		}
		if o, err := datadir.ReadOwner(dir); err == nil && o.PID == datadir.LockPID(dir) {
			c, err := attachOwner(o, opts)
			if err != nil {
				return nil, fmt.Errorf("%s: connect to the NATS of its owner, process %d, at %s: %w", dir, o.PID, o.NATSURL, err)
			}
			logger.Debug("data directory is owned by a running process; using its NATS", "pid", o.PID, "url", o.NATSURL)
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w and it publishes no NATS address (waited %s); wait for it to finish", err, attachWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startOwner runs the embedded server of the locked data directory. serve
// listens on --nats-listen and publishes the owner record; an operator
// command's server accepts in-process connections only.
func (f *Config) startOwner(lock *datadir.Lock, role Role, opts []nats.Option) (_ *Conn, err error) {
	defer func() {
		if err != nil {
			lock.Unlock()
		}
	}()
	seed, _, err := datadir.Credentials(f.DataDir)
	if err != nil {
		return nil, err
	}
	host, port, err := f.listenAddr()
	if err != nil {
		return nil, err
	}
	cfg := embedded.Config{StoreDir: f.DataDir, Host: host, Port: port, MaxPayload: f.MaxPayload, NKeySeed: seed,
		TLSCert: f.NATSTLSCert, TLSKey: f.NATSTLSKey, DontListen: role != RoleServe, OnStorage: f.OnStorage}
	if role == RoleServe {
		cfg.GlobalAccount = tenancy.ConvlogAccount
		if cfg.Accounts, err = loadTenantAccounts(f.DataDir, f.Resources()); err != nil {
			return nil, err
		}
	}
	s, err := embedded.Start(cfg)
	if err != nil {
		return nil, err
	}
	nc, err := s.Connect(opts...)
	if err != nil {
		s.Shutdown()
		return nil, err
	}
	c := &Conn{NC: nc, Server: s, URL: s.ClientURL(), Lock: lock, Seed: seed}
	if role == RoleServe {
		err = lock.Publish(datadir.Owner{PID: os.Getpid(), NATSURL: localURL(s.ClientURL()), Seed: seed, TLSCert: f.NATSTLSCert, StartedAt: time.Now().UTC()})
		if err != nil {
			nc.Close()
			s.Shutdown()
			return nil, err
		}
	}
	return c, nil
}

// attachOwner connects to the NATS of a data directory's running owner. A
// TLS listener's certificate is pinned to the owner's certificate file
// (the address is a loopback one, which the certificate need not name).
func attachOwner(o datadir.Owner, opts []nats.Option) (*Conn, error) {
	auth, err := nats.NkeyOptionFromSeed(o.Seed)
	if err != nil {
		return nil, err
	}
	// The owner may stop while the command runs; do not retry for ever.
	all := append(append([]nats.Option{}, opts...), auth, nats.MaxReconnects(20))
	if o.TLSCert != "" {
		tc, err := pinnedTLS(o.TLSCert)
		if err != nil {
			return nil, err
		}
		all = append(all, nats.Secure(tc))
	}
	nc, err := nats.Connect(o.NATSURL, all...)
	if err != nil {
		return nil, err
	}
	return &Conn{NC: nc, URL: o.NATSURL, Seed: o.Seed, OwnerPID: o.PID}, nil
}

// pinnedTLS accepts exactly the leaf certificate in certFile.
func pinnedTLS(certFile string) (*tls.Config, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", certFile)
	}
	if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, blk.Bytes) {
				return fmt.Errorf("the NATS server's certificate is not %s", certFile)
			}
			return nil
		},
	}, nil
}

// localURL turns a client URL on a wildcard address into one this host can
// dial.
func localURL(u string) string {
	for _, wild := range []string{"0.0.0.0", "[::]"} {
		if i := bytes.Index([]byte(u), []byte("://"+wild+":")); i >= 0 {
			return u[:i+3] + "127.0.0.1" + u[i+3+len(wild):]
		}
	}
	return u
}

// TenantUsersFile keeps, in the data directory, the tenant-scoped users
// serve last gave its embedded server (from the registry in JetStream) and
// the deployment's partition count their accounts cover: the next start
// listens with them at once, so that the registry's first application
// changes nothing (embedded.Server.SetAccounts reloads only on a change)
// and a tenant's service can reconnect as soon as NATS is up. Format:
// {"partitions": K, "users": [...]} (a bare list of users means K = 1).
const TenantUsersFile = "credentials/tenant-users.json"

// savedTenantUsers is TenantUsersFile's content.
type savedTenantUsers struct {
	Partitions int            `json:"partitions"`
	Users      []tenancy.User `json:"users"`
}

// loadTenantAccounts reads TenantUsersFile (none: no users) and returns
// the embedded server's accounts for them (tenantAccounts) on res's names
// and the saved partition count.
func loadTenantAccounts(dir string, res provision.Config) (string, error) {
	path := filepath.Join(dir, TenantUsersFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return TenantAccounts(nil, res, nil)
	}
	if err != nil {
		return "", fmt.Errorf("tenant users: %w", err)
	}
	saved := savedTenantUsers{Partitions: 1}
	if err = json.Unmarshal(b, &saved); err != nil {
		err = json.Unmarshal(b, &saved.Users)
	}
	if err != nil || saved.Partitions < 1 || saved.Partitions > provision.MaxPartitions {
		return "", fmt.Errorf("tenant users %s: not {\"partitions\": K, \"users\": [...]} (%v): delete it, serve writes it again from the registry", path, err)
	}
	res.Partitions = saved.Partitions
	return TenantAccounts(saved.Users, res, nil)
}

// SaveTenantUsers writes users and the deployment's partition count k to
// TenantUsersFile (mode 0600, replaced atomically).
func SaveTenantUsers(dir string, k int, users []tenancy.User) error {
	b, err := json.Marshal(savedTenantUsers{Partitions: k, Users: users})
	if err != nil {
		return err
	}
	path := filepath.Join(dir, TenantUsersFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("tenant users: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tenant users: %w", err)
	}
	return nil
}

// TenantAccounts is the embedded server's accounts (Config.Accounts):
// convlog's own, and one per tenant of users holding them with their
// tenant's permissions and imports (tenancy.AccountsConf; read-only for
// the tenants readOnly names). It returns an error naming a user whose
// tenant id or key is invalid.
func TenantAccounts(users []tenancy.User, res provision.Config, readOnly map[string]bool) (string, error) {
	return tenancy.AccountsConf(tenancy.AccountsConfig{Resources: res, Users: users, ReadOnly: readOnly})
}

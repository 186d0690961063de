package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

// The files of an operator directory (agentd operator init). Seeds and
// creds are written with mode 0600, the rest with 0644.
const (
	opJWTFile          = "operator.jwt"        // public: the operator
	opSigningFile      = "operator-signing.nk" // secret: signs accounts
	opSysJWTFile       = "sys.jwt"             // public: the system account
	opSysCredsFile     = "sys.creds"           // secret: pushes account JWTs
	opConvlogJWTFile   = "convlog.jwt"         // public: convlog's account
	opConvlogCredsFile = "convlog.creds"       // agentd's user of convlog's account
	opTenantSignFile   = "tenant-signing.nk"   // secret: signs tenant users
	opServerConfFile   = "nats-operator.conf"  // public: the servers' fragment
	opAccountsDir      = "accounts"            // public: <tenant>.jwt, the tenant accounts
)

// opResolverDir is the default resolver directory in nats-operator.conf.
const opResolverDir = "/data/jwt"

func newOperatorCmd(lf *logFlags) *cobra.Command {
	var f cliFlags
	var dir string
	cmd := &cobra.Command{Use: "operator", Short: "Operator mode: tenant accounts as NATS JWTs on servers with a full resolver (clusters)",
		Example: `  agentd operator init --dir ops
  agentd operator tenant-create acme --dir ops --nats-url nats://n1:4222 --out acme.creds`,
		Long: `Operator mode isolates tenants as 'agentd tenant' does (one NATS account per tenant that imports
exactly its tenant's subjects from convlog's account CONVLOG), with accounts as JWTs signed by an
operator and kept by the servers' full resolver, which a cluster replicates itself: no
configuration reload adds or revokes a tenant.

'init' writes, in --dir, the operator, the system account, CONVLOG and a tenant-user signing key,
and the configuration fragment every nats-server includes. 'tenant-create' makes a tenant's
account (first time) and pushes it to the resolver, registers a user in the tenant registry and
writes its creds; 'tenant-revoke' revokes users in the registry and in their account.

Secrets stay in --dir with the operator: operator-signing.nk, tenant-signing.nk and sys.creds.
agentd serve needs only convlog.creds (--creds). A tenant's service gets its creds file.

  agentd operator init --dir ops
  # each node: include 'nats-operator.conf' (or: agentd operator server-conf --resolver-dir PATH)
  agentd serve --nats-url nats://n1:4222 --creds ops/convlog.creds --replicas 3
  agentd operator tenant-create acme --dir ops --nats-url nats://n1:4222 --out acme.creds
  agentd operator tenant-revoke acme --dir ops --nats-url nats://n1:4222`}
	f.register(cmd)
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "the operator directory (agentd operator init); holds the operator's secrets")
	var name, resolverDir string
	initCmd := &cobra.Command{Use: "init --dir DIR", Short: "Create an operator, its system account, CONVLOG and the server configuration in --dir",
		Example: `  agentd operator init --dir ops
  agentd operator init --dir ops --partitions 3 --resolver-dir /data/jwt`,
		Long: `init writes, in --dir (created with mode 0700), a new operator: operator.jwt and its signing key
operator-signing.nk; the system account sys.jwt and a user of it, sys.creds; convlog's account
convlog.jwt (JetStream, the exports of the tenant subjects for --stream, --subject-prefix and
--partitions) and agentd's user of it, convlog.creds; the tenant-user signing key
tenant-signing.nk; and nats-operator.conf, the fragment each nats-server includes (operator,
system_account, a full resolver in --resolver-dir, resolver_preload of SYS and CONVLOG). A
directory that holds an operator is kept as it is. Give --partitions K for a deployment of K
partitions: CONVLOG exports each partition's subjects.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			if err := f.conn.Validate(); err != nil {
				return usageError{err}
			}
			created, err := operatorInit(dir, name, resolverDir, f.conn)
			if err != nil {
				return err
			}
			if !created {
				fmt.Fprintf(cmd.OutOrStdout(), "kept the operator in %s\n", dir)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created operator %s in %s\ninclude %s in each nats-server's configuration; agentd serve connects with --creds %s\n",
				name, dir, filepath.Join(dir, opServerConfFile), filepath.Join(dir, opConvlogCredsFile))
			return nil
		}}
	initCmd.Flags().StringVar(&name, "name", "convlog", "the operator's name")
	initCmd.Flags().StringVar(&resolverDir, "resolver-dir", opResolverDir, "directory of each nats-server's full resolver (in nats-operator.conf)")
	serverConf := &cobra.Command{Use: "server-conf --dir DIR --resolver-dir PATH", Short: "Print the nats-server configuration fragment for a resolver directory",
		Example: `  agentd operator server-conf --dir ops --resolver-dir /data/jwt > nats-operator.conf`,
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			conf, err := operatorDir(dir).serverConf(resolverDir)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), conf)
			return nil
		}}
	serverConf.Flags().StringVar(&resolverDir, "resolver-dir", opResolverDir, "directory of the nats-server's full resolver")
	cmd.AddCommand(initCmd, serverConf, newOperatorTenantCreateCmd(lf, &f, &dir), newOperatorTenantRevokeCmd(lf, &f, &dir))
	return cmd
}

func newOperatorTenantCreateCmd(lf *logFlags, f *cliFlags, dir *string) *cobra.Command {
	var out, name string
	c := &cobra.Command{Use: "tenant-create TENANT --dir DIR --nats-url URL --out CREDS_FILE",
		Short:   "Create TENANT's account if new, push it, register a user and write its creds to --out (mode 0600)",
		Example: `  agentd operator tenant-create acme --dir ops --nats-url nats://n1:4222 --out acme.creds --name billing`,
		Long: `tenant-create pushes TENANT's account to the servers' resolver (made on first use and kept in
--dir/accounts/TENANT.jwt; pushed again each time, with the current partitions), registers a new
user in the tenant registry (as 'agentd tenant create' does) and writes its creds file (user JWT
signed by the tenant-user signing key, and its NKey seed) to --out. It connects as agentd
(--creds, default --dir/convlog.creds) for the registry and as the system account user
(--dir/sys.creds) for the push, on a deployment agentd serve has provisioned (nothing is
provisioned or resized). Run one operator command at a time on a --dir.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := operatorFlags(f, *dir); err != nil {
				return err
			}
			if out == "" {
				return usageError{errors.New("--out is required: the file the user's creds are written to (never stored by convlog)")}
			}
			if _, err := os.Stat(out); err == nil {
				return usageError{fmt.Errorf("--out %s exists: choose a new file (creds are never overwritten)", out)}
			}
			return operatorRun(cmd, lf, f, func(ctx context.Context, e *cliEnv) error {
				u, err := operatorTenantCreate(ctx, e, f, operatorDir(*dir), args[0], name, out)
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(map[string]any{"user": u, "creds_file": out, "inbox_prefix": tenancy.InboxPrefix(u.Tenant)})
				}
				fmt.Fprintf(e.out, "created user %s of tenant %s; its creds are in %s\nconnect with nats.UserCredentials and nats.CustomInboxPrefix(%q); use client.Config{Tenant: %q}\n",
					u.PublicKey, u.Tenant, out, tenancy.InboxPrefix(u.Tenant), u.Tenant)
				return nil
			})
		}}
	c.Flags().StringVar(&out, "out", "", "file to write the user's creds to (must not exist)")
	c.Flags().StringVar(&name, "name", "", "a label for the user (e.g. the service that holds it)")
	return c
}

func newOperatorTenantRevokeCmd(lf *logFlags, f *cliFlags, dir *string) *cobra.Command {
	var user string
	c := &cobra.Command{Use: "tenant-revoke TENANT --dir DIR --nats-url URL [--user PUBLIC_KEY]",
		Example: `  agentd operator tenant-revoke acme --dir ops --nats-url nats://n1:4222
  agentd operator tenant-revoke acme --dir ops --nats-url nats://n1:4222 --user UABC...`,
		Short: "Revoke TENANT's user --user, or all its users, in its account (pushed) and the registry",
		Long: `tenant-revoke adds TENANT's registered users (or only --user) to the revocations of TENANT's
account, pushes the account to the servers' resolver, which closes their connections and refuses
them from then on, and removes them from the tenant registry.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := operatorFlags(f, *dir); err != nil {
				return err
			}
			return operatorRun(cmd, lf, f, func(ctx context.Context, e *cliEnv) error {
				gone, err := operatorTenantRevoke(ctx, e, f, operatorDir(*dir), args[0], user)
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(map[string]any{"revoked": gone})
				}
				fmt.Fprintf(e.out, "revoked %d user(s) of tenant %s\n", len(gone), args[0])
				return nil
			})
		}}
	c.Flags().StringVar(&user, "user", "", "public NKey of the user to revoke (default: every user of the tenant)")
	return c
}

// operatorFlags checks the flags of a command that connects as agentd
// and as the system account user; --creds defaults to dir's convlog.creds.
func operatorFlags(f *cliFlags, dir string) error {
	if dir == "" {
		return usageError{errors.New("--dir is required: the operator directory (agentd operator init)")}
	}
	if f.conn.NATSURL == "" {
		return usageError{errors.New("--nats-url is required: operator mode runs on your own NATS servers")}
	}
	if f.conn.CredsFile == "" && f.conn.NKeyFile == "" && f.conn.User == "" {
		f.conn.CredsFile = filepath.Join(dir, opConvlogCredsFile)
	}
	return nil
}

// operatorRun is cliFlags.run without provisioning: the operator commands
// work on a deployment agentd serve made (its replicas and partitions
// stay as they are; a missing registry bucket is an error).
func operatorRun(cmd *cobra.Command, lf *logFlags, f *cliFlags, fn func(ctx context.Context, e *cliEnv) error) error {
	logger, err := stderrLogger(lf)
	if err != nil {
		return err
	}
	if err := f.conn.Validate(); err != nil {
		return usageError{err}
	}
	cn, err := f.conn.Open(logger, "agentd-operator", natsconn.RoleCommand)
	if err != nil {
		return err
	}
	defer cn.Close()
	ctx := cmd.Context()
	cl, err := f.conn.Client(ctx, cn, false, false, "agentd-operator", logger)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, &cliEnv{c: cl, conn: cn, logger: logger, out: cmd.OutOrStdout(), json: f.JSON, tenant: f.Tenant})
}

// operatorTenantCreate pushes tenant's account, registers a user of it and
// writes the user's creds to out. A user whose creds could not be written
// is removed from the registry again.
func operatorTenantCreate(ctx context.Context, e *cliEnv, f *cliFlags, od operatorDir, tenant, name, out string) (tenancy.User, error) {
	res := e.c.Config().Resources
	res.Partitions = len(e.c.Partitions())
	ac, err := od.tenantAccount(tenant, res)
	if err != nil {
		return tenancy.User{}, err
	}
	if err := od.pushAccount(ctx, e, f, tenant, ac); err != nil {
		return tenancy.User{}, err
	}
	signer, err := od.seed(opTenantSignFile)
	if err != nil {
		return tenancy.User{}, err
	}
	reg, err := e.registry(ctx)
	if err != nil {
		return tenancy.User{}, err
	}
	u, seed, err := reg.Create(ctx, tenant, name)
	if err != nil {
		return tenancy.User{}, err
	}
	creds, err := tenancy.TenantUserCreds(ac.Subject, signer, seed, name)
	if err == nil {
		err = writeSeed(out, creds)
	}
	if err != nil {
		_, _ = reg.Revoke(ctx, u.Tenant, u.PublicKey)
		return tenancy.User{}, err
	}
	return u, nil
}

// operatorTenantRevoke revokes tenant's registered users (only
// publicKey's when set) in its account, pushes the account, then removes
// the users from the registry: a push that fails leaves the registry as
// it was, so the command can run again.
func operatorTenantRevoke(ctx context.Context, e *cliEnv, f *cliFlags, od operatorDir, tenant, publicKey string) ([]tenancy.User, error) {
	reg, err := e.registry(ctx)
	if err != nil {
		return nil, err
	}
	users, err := reg.List(ctx, tenant)
	if err != nil {
		return nil, err
	}
	users = slices.DeleteFunc(users, func(u tenancy.User) bool { return publicKey != "" && u.PublicKey != publicKey })
	if publicKey != "" && len(users) == 0 {
		return nil, fmt.Errorf("tenant %s has no user %s", tenant, publicKey)
	}
	ac, err := od.account(tenant)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, u := range users {
		ac.RevokeAt(u.PublicKey, now)
	}
	if err := od.pushAccount(ctx, e, f, tenant, ac); err != nil {
		return nil, err
	}
	var gone []tenancy.User
	for _, u := range users {
		g, err := reg.Revoke(ctx, tenant, u.PublicKey)
		gone = append(gone, g...)
		if err != nil {
			return gone, err
		}
	}
	return gone, nil
}

// operatorInit writes a new operator into dir (created 0700) and reports
// true, or reports false when dir already holds one (nothing is changed).
// cf gives the resources CONVLOG exports.
func operatorInit(dir, name, resolverDir string, cf connFlags) (bool, error) {
	od := operatorDir(dir)
	if _, err := os.Stat(od.path(opJWTFile)); err == nil {
		return false, nil
	}
	setup, err := tenancy.NewOperatorSetup(name, cf.Resources())
	if err != nil {
		return false, err
	}
	conf, err := tenancy.OperatorServerConf(setup.OperatorJWT, setup.SystemAccountJWT, setup.ConvlogAccountJWT, resolverDir)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Join(dir, opAccountsDir), 0o700); err != nil {
		return false, err
	}
	// The operator JWT last: its presence says the directory is complete.
	for _, w := range []struct {
		name   string
		data   []byte
		secret bool
	}{
		{opSigningFile, setup.OperatorSigningSeed, true},
		{opTenantSignFile, setup.TenantSigningSeed, true},
		{opSysCredsFile, setup.SystemUserCreds, true},
		{opConvlogCredsFile, setup.ConvlogUserCreds, true},
		{opSysJWTFile, []byte(setup.SystemAccountJWT), false},
		{opConvlogJWTFile, []byte(setup.ConvlogAccountJWT), false},
		{opServerConfFile, []byte(conf), false},
		{opJWTFile, []byte(setup.OperatorJWT), false},
	} {
		mode := os.FileMode(0o644)
		if w.secret {
			mode = 0o600
		}
		if err := writeFileAtomic(od.path(w.name), w.data, mode); err != nil {
			return false, err
		}
	}
	return true, nil
}

// operatorDir is a directory agentd operator init wrote. Its methods are
// not safe for concurrent use on one directory (by goroutines or by
// processes).
type operatorDir string

func (d operatorDir) path(name string) string { return filepath.Join(string(d), name) }

func (d operatorDir) read(name string) (string, error) {
	b, err := os.ReadFile(d.path(name))
	if err != nil {
		return "", fmt.Errorf("operator directory: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// seed returns the key pair of the seed file name.
func (d operatorDir) seed(name string) (nkeys.KeyPair, error) {
	s, err := d.read(name)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.FromSeed([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.path(name), err)
	}
	return kp, nil
}

// serverConf is the nats-server fragment for resolverDir.
func (d operatorDir) serverConf(resolverDir string) (string, error) {
	var jwts [3]string
	for i, name := range []string{opJWTFile, opSysJWTFile, opConvlogJWTFile} {
		var err error
		if jwts[i], err = d.read(name); err != nil {
			return "", err
		}
	}
	return tenancy.OperatorServerConf(jwts[0], jwts[1], jwts[2], resolverDir)
}

// account returns the claims of tenant's account as last pushed.
func (d operatorDir) account(tenant string) (*jwt.AccountClaims, error) {
	if err := events.ValidateTenant(tenant); err != nil {
		return nil, usageError{err}
	}
	s, err := d.read(filepath.Join(opAccountsDir, tenant+".jwt"))
	if err != nil {
		return nil, fmt.Errorf("tenant %s has no account (agentd operator tenant-create makes it): %w", tenant, err)
	}
	ac, err := jwt.DecodeAccountClaims(s)
	if err != nil {
		return nil, fmt.Errorf("account of tenant %s: %w", tenant, err)
	}
	if tenancy.TenantOf(ac) != tenant {
		return nil, fmt.Errorf("account of tenant %s: the file holds account %q", tenant, ac.Name)
	}
	return ac, nil
}

// tenantAccount returns tenant's account claims for res: its account key
// and revocations kept, or a new account key for a new tenant.
func (d operatorDir) tenantAccount(tenant string, res provision.Config) (*jwt.AccountClaims, error) {
	convlogJWT, err := d.read(opConvlogJWTFile)
	if err != nil {
		return nil, err
	}
	convlog, err := jwt.DecodeAccountClaims(convlogJWT)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.path(opConvlogJWTFile), err)
	}
	signer, err := d.seed(opTenantSignFile)
	if err != nil {
		return nil, err
	}
	signerPub, err := signer.PublicKey()
	if err != nil {
		return nil, err
	}
	old, err := d.account(tenant)
	var accountPub string
	var revocations jwt.RevocationList
	switch {
	case err == nil:
		accountPub, revocations = old.Subject, old.Revocations
	case errors.Is(err, fs.ErrNotExist):
		kp, err := nkeys.CreateAccount()
		if err != nil {
			return nil, err
		}
		accountPub, _ = kp.PublicKey()
	default:
		return nil, err
	}
	ac, err := tenancy.TenantAccountClaims(tenant, accountPub, convlog.Subject, signerPub, res, false)
	if err != nil {
		return nil, usageError{err}
	}
	ac.Revocations = revocations
	return ac, nil
}

// pushAccount signs ac with the operator's signing key, keeps it as
// tenant's account file and pushes it to the resolver as the system
// account user (f's server and TLS settings, dir's sys.creds).
func (d operatorDir) pushAccount(ctx context.Context, e *cliEnv, f *cliFlags, tenant string, ac *jwt.AccountClaims) error {
	signer, err := d.seed(opSigningFile)
	if err != nil {
		return err
	}
	accountJWT, err := ac.Encode(signer)
	if err != nil {
		return fmt.Errorf("sign the account of %s: %w", tenant, err)
	}
	if err := writeFileAtomic(d.path(filepath.Join(opAccountsDir, tenant+".jwt")), []byte(accountJWT), 0o644); err != nil {
		return err
	}
	sys := f.conn
	sys.CredsFile, sys.NKeyFile, sys.User, sys.TokenFile = d.path(opSysCredsFile), "", "", ""
	cn, err := sys.Open(e.logger, "agentd-operator", natsconn.RoleCommand)
	if err != nil {
		return fmt.Errorf("connect as the system account user: %w", err)
	}
	defer cn.Close()
	ctx, cancel := context.WithTimeout(ctx, opPushTimeout)
	defer cancel()
	return tenancy.PushAccountJWT(ctx, cn.NC, accountJWT)
}

// opPushTimeout bounds a push of an account JWT.
const opPushTimeout = 30 * time.Second

// writeFileAtomic writes data to path with mode through a temporary file
// in its directory and a rename.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if err := tmp.Chmod(mode); werr == nil {
		werr = err
	}
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return os.Rename(tmp.Name(), path)
}

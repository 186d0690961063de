package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/agentd/operator"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/tenancy"
)

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
			created, err := operator.Init(operator.Dir(dir), name, resolverDir, f.conn.Resources())
			if err != nil {
				return err
			}
			if !created {
				fmt.Fprintf(cmd.OutOrStdout(), "kept the operator in %s\n", dir)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created operator %s in %s\ninclude %s in each nats-server's configuration; agentd serve connects with --creds %s\n",
				name, dir, filepath.Join(dir, operator.ServerConfFile), filepath.Join(dir, operator.ConvlogCredsFile))
			return nil
		}}
	initCmd.Flags().StringVar(&name, "name", "convlog", "the operator's name")
	initCmd.Flags().StringVar(&resolverDir, "resolver-dir", operator.DefaultResolverDir, "directory of each nats-server's full resolver (in nats-operator.conf)")
	serverConf := &cobra.Command{Use: "server-conf --dir DIR --resolver-dir PATH", Short: "Print the nats-server configuration fragment for a resolver directory",
		Example: `  agentd operator server-conf --dir ops --resolver-dir /data/jwt > nats-operator.conf`,
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			conf, err := operator.Dir(dir).ServerConf(resolverDir)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), conf)
			return nil
		}}
	serverConf.Flags().StringVar(&resolverDir, "resolver-dir", operator.DefaultResolverDir, "directory of the nats-server's full resolver")
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
			if err := operatorFlags(f, *dir, args[0]); err != nil {
				return err
			}
			if out == "" {
				return usageError{errors.New("--out is required: the file the user's creds are written to (never stored by convlog)")}
			}
			if _, err := os.Stat(out); err == nil {
				return usageError{fmt.Errorf("--out %s exists: choose a new file (creds are never overwritten)", out)}
			}
			return operatorRun(cmd, lf, f, func(ctx context.Context, e *cliEnv) error {
				reg, err := e.registry(ctx)
				if err != nil {
					return err
				}
				res := e.c.Config().Resources
				res.Partitions = len(e.c.Partitions())
				od := operator.Dir(*dir)
				u, err := operator.TenantCreate(ctx, od, reg, operatorPusher(e, f, od), res, args[0], name, out)
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
them from then on, and removes them from the tenant registry. The push succeeds once every server
of the cluster has confirmed it; otherwise (30 s) the command fails naming the servers that did
not, and leaves the registry as it was: run it again.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := operatorFlags(f, *dir, args[0]); err != nil {
				return err
			}
			return operatorRun(cmd, lf, f, func(ctx context.Context, e *cliEnv) error {
				reg, err := e.registry(ctx)
				if err != nil {
					return err
				}
				od := operator.Dir(*dir)
				gone, err := operator.TenantRevoke(ctx, od, reg, operatorPusher(e, f, od), args[0], user)
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

// operatorFlags checks the flags and the tenant argument of a command
// that connects as agentd and as the system account user; --creds
// defaults to dir's convlog.creds.
func operatorFlags(f *cliFlags, dir, tenant string) error {
	if dir == "" {
		return usageError{errors.New("--dir is required: the operator directory (agentd operator init)")}
	}
	if f.conn.NATSURL == "" {
		return usageError{errors.New("--nats-url is required: operator mode runs on your own NATS servers")}
	}
	if f.conn.CredsFile == "" && f.conn.NKeyFile == "" && f.conn.User == "" {
		f.conn.CredsFile = filepath.Join(dir, operator.ConvlogCredsFile)
	}
	if err := events.ValidateTenant(tenant); err != nil {
		return usageError{err}
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

// operatorPusher pushes account JWTs to the resolver as the system
// account user: f's server and TLS settings, dir's sys.creds.
func operatorPusher(e *cliEnv, f *cliFlags, dir operator.Dir) operator.Pusher {
	return func(ctx context.Context, accountJWT string) error {
		sys := f.conn
		sys.CredsFile, sys.NKeyFile, sys.User, sys.TokenFile = dir.Path(operator.SysCredsFile), "", "", ""
		cn, err := sys.Open(e.logger, "agentd-operator", natsconn.RoleCommand)
		if err != nil {
			return fmt.Errorf("connect as the system account user: %w", err)
		}
		defer cn.Close()
		ctx, cancel := context.WithTimeout(ctx, opPushTimeout)
		defer cancel()
		return tenancy.PushAccountJWT(ctx, cn.NC, accountJWT)
	}
}

// opPushTimeout bounds a push of an account JWT.
const opPushTimeout = 30 * time.Second

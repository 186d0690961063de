package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

func newTenantCmd(lf *logFlags) *cobra.Command {
	var f cliFlags
	cmd := &cobra.Command{Use: "tenant", Short: "Tenant-scoped NATS users: create, list, revoke, show their accounts",
		Example: `  agentd tenant create acme --out acme.nk
  agentd tenant list --json`,
		Long: `A tenant-scoped NATS user may append to and read one tenant's threads over NATS and
nothing else. Each tenant is a NATS account of its own that imports exactly its tenant's
subjects from convlog's account (CONVLOG: the streams, buckets and the tenant service), so no
subject a tenant names, as subject or as reply subject, reaches another tenant or convlog's own
streams, consumers and API ('agentd tenant accounts' prints the configuration). 'agentd serve'
gives its embedded NATS server these accounts from the registry (KV bucket convlog_tenants) as
it changes: a created user can connect at once, a revoked user's connections are closed. With
--nats-url (your own NATS servers) the registry is kept the same way, and you put the block
'agentd tenant accounts' prints into the servers' configuration and reload them.

A service connects with the seed file 'create' writes (nats.NkeyOptionFromSeed) and
nats.CustomInboxPrefix("_INBOX_<tenant>"), and uses client.Config{Tenant: "<tenant>"}.

  agentd tenant create acme --out acme.nk
  agentd tenant accounts --convlog-nkey UAGENTD... > accounts.conf`}
	f.register(cmd)
	var out, name string
	create := &cobra.Command{Use: "create TENANT --out SEED_FILE", Short: "Create a user of TENANT and write its NKey seed to --out (mode 0600)",
		Example: `  agentd tenant create acme --out acme.nk --name billing`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError{errors.New("--out is required: the file the user's NKey seed is written to (never stored by convlog)")}
			}
			if _, err := os.Stat(out); err == nil {
				return usageError{fmt.Errorf("--out %s exists: choose a new file (a seed is never overwritten)", out)}
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				reg, err := e.registry(ctx)
				if err != nil {
					return err
				}
				u, seed, err := reg.Create(ctx, args[0], name)
				if err != nil {
					return err
				}
				if err := writeSeed(out, seed); err != nil {
					_, _ = reg.Revoke(ctx, u.Tenant, u.PublicKey)
					return err
				}
				if err := e.syncTenantUsers(ctx, reg, f.conn.DataDir); err != nil {
					return err
				}
				if e.json {
					return e.printJSON(map[string]any{"user": u, "seed_file": out, "inbox_prefix": tenancy.InboxPrefix(u.Tenant)})
				}
				fmt.Fprintf(e.out, "created user %s of tenant %s; its seed is in %s\nconnect with the seed and nats.CustomInboxPrefix(%q); use client.Config{Tenant: %q}\n",
					u.PublicKey, u.Tenant, out, tenancy.InboxPrefix(u.Tenant), u.Tenant)
				return nil
			})
		}}
	create.Flags().StringVar(&out, "out", "", "file to write the user's NKey seed to (must not exist)")
	create.Flags().StringVar(&name, "name", "", "a label for the user (e.g. the service that holds it)")
	list := &cobra.Command{Use: "list [TENANT]", Short: "List the tenant-scoped users (of TENANT, or all)", Args: cobra.MaximumNArgs(1),
		Example: `  agentd tenant list
  agentd tenant list acme --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				reg, err := e.registry(ctx)
				if err != nil {
					return err
				}
				users, err := reg.List(ctx, strings.Join(args, ""))
				if err != nil {
					return err
				}
				if e.json {
					return e.printJSON(map[string]any{"users": users})
				}
				for _, u := range users {
					fmt.Fprintf(e.out, "%s\t%s\t%s\t%s\n", u.Tenant, u.PublicKey, u.CreatedAt.Format("2006-01-02T15:04:05Z"), u.Name)
				}
				return nil
			})
		}}
	var user string
	revoke := &cobra.Command{Use: "revoke TENANT [--user PUBLIC_KEY]", Short: "Revoke TENANT's user --user, or all of TENANT's users",
		Example: `  agentd tenant revoke acme
  agentd tenant revoke acme --user UABC...`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				reg, err := e.registry(ctx)
				if err != nil {
					return err
				}
				gone, err := reg.Revoke(ctx, args[0], user)
				if err != nil {
					return err
				}
				if err := e.syncTenantUsers(ctx, reg, f.conn.DataDir); err != nil {
					return err
				}
				if user != "" && len(gone) == 0 {
					return fmt.Errorf("tenant %s has no user %s", args[0], user)
				}
				if e.json {
					return e.printJSON(map[string]any{"revoked": gone})
				}
				fmt.Fprintf(e.out, "revoked %d user(s) of tenant %s\n", len(gone), args[0])
				return nil
			})
		}}
	revoke.Flags().StringVar(&user, "user", "", "public NKey of the user to revoke (default: every user of the tenant)")
	var format string
	perms := &cobra.Command{Use: "permissions TENANT", Short: "Print the NATS allow lists of TENANT's users (JSON)",
		Example: `  agentd tenant permissions acme
  agentd tenant permissions acme --partitions 3`,
		Long: `permissions prints the allow lists of a tenant-scoped user of TENANT for the configured
stream, buckets and subject prefix, as JSON: the subjects its account imports from convlog's and
its users may use. For a deployment of K partitions give --partitions K (the lists name every
partition's stream, subjects and buckets). The nats-server configuration of tenants is
'agentd tenant accounts': allow lists inside one account cannot stop a reply subject from
crossing into another tenant's data.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.conn.validate(); err != nil {
				return usageError{err}
			}
			p, err := tenancy.For(f.conn.resources(), args[0]) // --partitions: the deployment's K
			if err != nil {
				return usageError{err}
			}
			if format != "json" {
				return usageError{fmt.Errorf("--format %q: only json; a users entry of one account cannot isolate tenants (NATS does not check reply subjects): use 'agentd tenant accounts'", format)}
			}
			return (&cliEnv{out: cmd.OutOrStdout()}).printJSON(p)
		}}
	perms.Flags().StringVar(&format, "format", "json", "json (the only format)")
	var convlogKeys []string
	var noRegistry bool
	accounts := &cobra.Command{Use: "accounts --convlog-nkey U... [--no-registry]", Short: "Print the nats-server accounts block that isolates the tenants",
		Example: `  agentd tenant accounts --nats-url nats://n1:4222 --nkey agentd.nk --convlog-nkey UAGENTD... > accounts.conf
  agentd tenant accounts --convlog-nkey UAGENTD... --no-registry`,
		Long: `accounts prints the "accounts { ... }" block of a nats-server configuration for the
deployment: convlog's account CONVLOG (JetStream, the users --convlog-nkey names, which agentd
and your services with every permission connect as, and the exports of every tenant-scoped
subject) and one account per tenant of the registry's users, importing exactly its tenant's
subjects. Put it in each server's configuration in place of any authorization block, reload
the servers (nats-server --signal reload), and print it again after each create or revoke.
With --no-registry it prints the block without tenants (to start a new server before agentd
has made the registry). For K partitions give --partitions K.

  agentd tenant accounts --nats-url nats://n1:4222 --nkey agentd.nk --convlog-nkey UAGENTD... > accounts.conf`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(convlogKeys) == 0 {
				return usageError{errors.New("--convlog-nkey is required: the public NKey (U...) of agentd's own NATS user, which goes into convlog's account")}
			}
			for _, k := range convlogKeys {
				if !nkeys.IsValidPublicUserKey(k) {
					return usageError{fmt.Errorf("--convlog-nkey %q is not a public user NKey (U...)", k)}
				}
			}
			print := func(users []tenancy.User, res provision.Config) error {
				conf, err := tenancy.AccountsConf(tenancy.AccountsConfig{Resources: res, Users: users, ConvlogUsers: convlogKeys})
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), conf)
				return nil
			}
			if noRegistry {
				if err := f.conn.validate(); err != nil {
					return usageError{err}
				}
				return print(nil, f.conn.resources())
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				reg, err := e.registry(ctx)
				if err != nil {
					return err
				}
				users, err := reg.List(ctx, "")
				if err != nil {
					return err
				}
				res := e.c.Config().Resources
				res.Partitions = len(e.c.Partitions())
				return print(users, res)
			})
		}}
	accounts.Flags().StringSliceVar(&convlogKeys, "convlog-nkey", nil, "public NKey of a user of convlog's account (agentd's own); repeat for several")
	accounts.Flags().BoolVar(&noRegistry, "no-registry", false, "print the block without reading the registry (no tenant accounts)")
	cmd.AddCommand(create, list, revoke, perms, accounts)
	return cmd
}

// registry returns the tenant registry of the deployment.
func (e *cliEnv) registry(ctx context.Context) (*tenancy.Registry, error) {
	b := e.c.Config().Resources.WithDefaults().TenantBucket
	kv, err := e.c.JetStream().KeyValue(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("KV bucket %s: %w", b, err)
	}
	return tenancy.NewRegistry(kv), nil
}

// syncTenantUsers writes the registry's users to the data directory's
// tenantUsersFile when this command owns the directory (no agentd serve
// runs on it): the next serve starts with exactly them, so a user revoked
// meanwhile is never accepted, not even before serve applies the
// registry. A running serve keeps the file itself.
func (e *cliEnv) syncTenantUsers(ctx context.Context, reg *tenancy.Registry, dataDir string) error {
	if e.conn == nil || e.conn.Server == nil {
		return nil
	}
	users, err := reg.List(ctx, "")
	if err != nil {
		return err
	}
	return saveTenantUsers(dataDir, len(e.c.Partitions()), users)
}

// writeSeed writes seed to a new file path with mode 0600.
func writeSeed(path string, seed []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	_, werr := f.Write(append(seed, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("--out %s: %w", path, werr)
	}
	return nil
}

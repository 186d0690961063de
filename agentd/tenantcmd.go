package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/internal/datadir"
	"github.com/convlog/convlog/internal/tenancy"
)

func newTenantCmd(lf *logFlags) *cobra.Command {
	f := &cliFlags{}
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

Moving from tenant users inside one account: an embedded server needs nothing (the registry's
users become their tenants' accounts at start, and their seeds keep working); a nats-server of
your own keeps convlog's streams in its global account, which a configuration cannot export
from, so they move into CONVLOG first (docs/tenants.md gives the steps, for one server and for
a cluster in operator mode, 'agentd operator').

Keep secret: agentd's own seed or creds (a user of CONVLOG reads and changes every tenant's
data) and each tenant's seed, which 'create' writes once and never stores (a lost seed is
revoked and replaced, never recovered). The public keys, the registry and the accounts block
are not secret.

  agentd tenant create acme --out acme.nk
  agentd tenant accounts --convlog-nkey UAGENTD... > accounts.conf`}
	f.register(cmd)
	cmd.AddCommand(newTenantCreateCmd(f, lf), newTenantListCmd(f, lf), newTenantRevokeCmd(f, lf),
		newTenantPermissionsCmd(f), newTenantAccountsCmd(f, lf))
	return cmd
}

func newTenantCreateCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var out, name string
	cmd := &cobra.Command{Use: "create TENANT --out SEED_FILE", Short: "Create a user of TENANT and write its NKey seed to --out (mode 0600)",
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
				return createTenantUser(ctx, e, args[0], name, out, f.conn.DataDir)
			})
		}}
	cmd.Flags().StringVar(&out, "out", "", "file to write the user's NKey seed to (must not exist)")
	cmd.Flags().StringVar(&name, "name", "", "a label for the user (e.g. the service that holds it)")
	return cmd
}

// createTenantUser creates a user name of tenant, writes its seed to the
// new file out (revoking the user when that fails) and prints how to
// connect as it.
func createTenantUser(ctx context.Context, e *cliEnv, tenant, name, out, dataDir string) error {
	reg, err := e.registry(ctx)
	if err != nil {
		return err
	}
	u, seed, err := reg.Create(ctx, tenant, name)
	if err != nil {
		return err
	}
	if err := datadir.WriteNewSecret(out, append(seed, '\n')); err != nil {
		err = fmt.Errorf("--out: %w", err)
		_, _ = reg.Revoke(ctx, u.Tenant, u.PublicKey)
		return err
	}
	if err := e.syncTenantUsers(ctx, reg, dataDir); err != nil {
		return err
	}
	if e.json {
		return e.printJSON(map[string]any{"user": u, "seed_file": out, "inbox_prefix": tenancy.InboxPrefix(u.Tenant)})
	}
	fmt.Fprintf(e.out, "created user %s of tenant %s; its seed is in %s\nconnect with the seed and nats.CustomInboxPrefix(%q); use client.Config{Tenant: %q}\n",
		u.PublicKey, u.Tenant, out, tenancy.InboxPrefix(u.Tenant), u.Tenant)
	return nil
}

func newTenantListCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	return &cobra.Command{Use: "list [TENANT]", Short: "List the tenant-scoped users (of TENANT, or all)", Args: cobra.MaximumNArgs(1),
		Example: `  agentd tenant list
  agentd tenant list acme --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				return listTenantUsers(ctx, e, strings.Join(args, ""))
			})
		}}
}

// listTenantUsers prints the users of tenant, or of every tenant when
// tenant is "".
func listTenantUsers(ctx context.Context, e *cliEnv, tenant string) error {
	reg, err := e.registry(ctx)
	if err != nil {
		return err
	}
	users, err := reg.List(ctx, tenant)
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
}

func newTenantRevokeCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var user string
	cmd := &cobra.Command{Use: "revoke TENANT [--user PUBLIC_KEY]", Short: "Revoke TENANT's user --user, or all of TENANT's users",
		Example: `  agentd tenant revoke acme
  agentd tenant revoke acme --user UABC...`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				return revokeTenantUsers(ctx, e, args[0], user, f.conn.DataDir)
			})
		}}
	cmd.Flags().StringVar(&user, "user", "", "public NKey of the user to revoke (default: every user of the tenant)")
	return cmd
}

// revokeTenantUsers revokes tenant's user (every user of tenant when user
// is "") and prints how many are gone; an error when user names none.
func revokeTenantUsers(ctx context.Context, e *cliEnv, tenant, user, dataDir string) error {
	reg, err := e.registry(ctx)
	if err != nil {
		return err
	}
	gone, err := reg.Revoke(ctx, tenant, user)
	if err != nil {
		return err
	}
	if err := e.syncTenantUsers(ctx, reg, dataDir); err != nil {
		return err
	}
	if user != "" && len(gone) == 0 {
		return fmt.Errorf("tenant %s has no user %s", tenant, user)
	}
	if e.json {
		return e.printJSON(map[string]any{"revoked": gone})
	}
	fmt.Fprintf(e.out, "revoked %d user(s) of tenant %s\n", len(gone), tenant)
	return nil
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
// natsconn.TenantUsersFile when this command owns the directory (no
// agentd serve runs on it): the next serve starts with exactly them, so a
// user revoked meanwhile is never accepted, not even before serve
// applies the registry. A running serve keeps the file itself.
func (e *cliEnv) syncTenantUsers(ctx context.Context, reg *tenancy.Registry, dataDir string) error {
	if e.conn == nil || e.conn.Server == nil {
		return nil
	}
	users, err := reg.List(ctx, "")
	if err != nil {
		return err
	}
	return natsconn.SaveTenantUsers(dataDir, len(e.c.Partitions()), users)
}

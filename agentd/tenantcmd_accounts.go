package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/quota"
	"github.com/convlog/convlog/internal/tenancy"
)

// The subcommands of 'agentd tenant' that print NATS configuration:
// permissions (a tenant's allow lists) and accounts (the nats-server
// accounts block).

func newTenantPermissionsCmd(f *cliFlags) *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: "permissions TENANT", Short: "Print the NATS allow lists of TENANT's users (JSON)",
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
			return printTenantPermissions(cmd.OutOrStdout(), &f.conn, args[0], format)
		}}
	cmd.Flags().StringVar(&format, "format", "json", "json (the only format)")
	return cmd
}

// printTenantPermissions writes the allow lists of tenant's users for the
// deployment c names to w, as JSON.
func printTenantPermissions(w io.Writer, c *connFlags, tenant, format string) error {
	if err := c.Validate(); err != nil {
		return usageError{err}
	}
	p, err := tenancy.For(c.Resources(), tenant) // --partitions: the deployment's K
	if err != nil {
		return usageError{err}
	}
	if format != "json" {
		return usageError{fmt.Errorf("--format %q: only json; a users entry of one account cannot isolate tenants (NATS does not check reply subjects): use 'agentd tenant accounts'", format)}
	}
	return (&cliEnv{out: w}).printJSON(p)
}

func newTenantAccountsCmd(f *cliFlags, lf *logFlags) *cobra.Command {
	var convlogKeys []string
	var noRegistry bool
	cmd := &cobra.Command{Use: "accounts --convlog-nkey U... [--no-registry]", Short: "Print the nats-server accounts block that isolates the tenants",
		Example: `  agentd tenant accounts --nats-url nats://n1:4222 --nkey agentd.nk --convlog-nkey UAGENTD... > accounts.conf
  agentd tenant accounts --convlog-nkey UAGENTD... --no-registry`,
		Long: `accounts prints the "accounts { ... }" block of a nats-server configuration for the
deployment: convlog's account CONVLOG (JetStream, the users --convlog-nkey names, which agentd
and your services with every permission connect as, and the exports of every tenant-scoped
subject) and one account per tenant of the registry's users, importing exactly its tenant's
subjects. Put it in each server's configuration in place of any authorization block, reload
the servers (nats-server --signal reload), and print it again after each create or revoke.
A tenant over its storage quota (the usage agentd serve meters with --quota-file) gets
read-only users and no import of the append subjects, as on the embedded server: print the
block again and reload when a tenant goes over its quota or back under it. With
--no-registry it prints the block without tenants (to start a new server before agentd has
made the registry). For K partitions give --partitions K.

  agentd tenant accounts --nats-url nats://n1:4222 --nkey agentd.nk --convlog-nkey UAGENTD... > accounts.conf`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkConvlogKeys(convlogKeys); err != nil {
				return err
			}
			if noRegistry {
				if err := f.conn.Validate(); err != nil {
					return usageError{err}
				}
				return printAccounts(cmd.OutOrStdout(), nil, f.conn.Resources(), convlogKeys, nil)
			}
			return f.run(cmd, lf, func(ctx context.Context, e *cliEnv) error {
				return printRegistryAccounts(ctx, e, cmd.OutOrStdout(), convlogKeys)
			})
		}}
	cmd.Flags().StringSliceVar(&convlogKeys, "convlog-nkey", nil, "public NKey of a user of convlog's account (agentd's own); repeat for several")
	cmd.Flags().BoolVar(&noRegistry, "no-registry", false, "print the block without reading the registry (no tenant accounts)")
	return cmd
}

// checkConvlogKeys is a usage error unless keys holds at least one key and
// every key is a public user NKey.
func checkConvlogKeys(keys []string) error {
	if len(keys) == 0 {
		return usageError{errors.New("--convlog-nkey is required: the public NKey (U...) of agentd's own NATS user, which goes into convlog's account")}
	}
	for _, k := range keys {
		if !nkeys.IsValidPublicUserKey(k) {
			return usageError{fmt.Errorf("--convlog-nkey %q is not a public user NKey (U...)", k)}
		}
	}
	return nil
}

// printRegistryAccounts writes to w the accounts block of the deployment
// e.c is connected to, with an account per tenant of the registry's users,
// read-only for the tenants over their storage quota.
func printRegistryAccounts(ctx context.Context, e *cliEnv, w io.Writer, convlogKeys []string) error {
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
	readOnly, err := overStorageQuota(ctx, e.c.JetStream(), res.WithDefaults().UsageBucket, users)
	if err != nil {
		return err
	}
	return printAccounts(w, users, res, convlogKeys, readOnly)
}

// overStorageQuota returns the tenants of users whose record in the usage
// bucket (metered by agentd serve with --quota-file) is over its storage
// limit (quota.Usage.OverStorage), as agentd serve gives its embedded
// server. A tenant without a readable record is not held, as the append
// path's quota check fails open, and none is without the bucket. An
// error names a bucket or record that cannot be read.
func overStorageQuota(ctx context.Context, js jetstream.JetStream, bucket string, users []tenancy.User) (map[string]bool, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil // nothing metered
	}
	if err != nil {
		return nil, fmt.Errorf("KV bucket %s: %w", bucket, err)
	}
	over := map[string]bool{}
	for _, u := range users {
		if _, seen := over[u.Tenant]; seen {
			continue
		}
		over[u.Tenant] = false
		e, err := kv.Get(ctx, u.Tenant)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("usage of %s: %w", u.Tenant, err)
		}
		var usage quota.Usage
		if json.Unmarshal(e.Value(), &usage) == nil {
			over[u.Tenant] = usage.OverStorage()
		}
	}
	return over, nil
}

// printAccounts writes to w the accounts block for res, users and the
// users convlogKeys of convlog's account; the tenants readOnly names get
// read-only users and no import of the append subjects.
func printAccounts(w io.Writer, users []tenancy.User, res provision.Config, convlogKeys []string, readOnly map[string]bool) error {
	conf, err := tenancy.AccountsConf(tenancy.AccountsConfig{Resources: res, Users: users, ConvlogUsers: convlogKeys, ReadOnly: readOnly})
	if err != nil {
		return err
	}
	fmt.Fprint(w, conf)
	return nil
}

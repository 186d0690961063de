//go:build cluster

package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// The migration docs/tenants.md gives a single nats-server whose
// configuration has tenant users in one account (an authorization block):
// stop the server, move its JetStream directory of the global account
// ("$G") to convlog's account's ("CONVLOG"), put the block of `agentd
// tenant accounts` in place of the authorization block and start it. The
// threads written before read back the same, and the tenant's user (the
// same seed) works through its account.
func TestMigrateTenantUsersToAccounts(t *testing.T) {
	natsBin, agentdBin := buildBinaries(t)
	dir := t.TempDir()
	adminPub, adminFile := newAdminSeed(t, dir)
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	store := filepath.Join(dir, "js")
	conf := filepath.Join(dir, "nats.conf")
	writeConf := func(auth string) {
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf("listen: 127.0.0.1:%d\njetstream { store_dir: %q }\n%s\n", port, store, auth)), 0o600))
	}
	start := func(name string) (*proc, *proc) {
		return startNATSAndServe(t, dir, name+"-", natsBin, agentdBin, conf, url, "--nkey", adminFile)
	}
	adminClient := func(ctx context.Context) (*nats.Conn, *client.Client) {
		auth, err := nats.NkeyOptionFromSeed(adminFile)
		require.NoError(t, err)
		nc, err := nats.Connect(url, auth)
		require.NoError(t, err)
		c, err := client.New(ctx, nc, client.Config{})
		require.NoError(t, err)
		return nc, c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Before: one account, the admin with every permission.
	writeConf(fmt.Sprintf("authorization { users: [ { nkey: %q } ] }", adminPub))
	ns, agent := start("before")
	nc, c := adminClient(ctx)
	_, _, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "t1"})
	require.NoError(t, err)
	_, err = c.Append(ctx, "acme", "t1", []events.Event{{Payload: events.UserMessage{Content: events.Text("written before")}}}, client.ExpectVersion(v))
	require.NoError(t, err)
	before, err := c.Get(ctx, "acme", "t1")
	require.NoError(t, err)
	seedFile := filepath.Join(dir, "acme.nk")
	out, err := exec.Command(agentdBin, "tenant", "create", "acme", "--out", seedFile, "--nats-url", url, "--nkey", adminFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	nc.Close()
	agent.stop(t, syscall.SIGTERM, 30*time.Second)
	ns.stop(t, syscall.SIGTERM, 30*time.Second)

	// The migration.
	require.NoError(t, os.Rename(filepath.Join(store, "jetstream", "$G"), filepath.Join(store, "jetstream", "CONVLOG")))
	writeConf("include 'accounts.conf'")
	accounts, err := exec.Command(agentdBin, "tenant", "accounts", "--convlog-nkey", adminPub, "--no-registry").Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "accounts.conf"), accounts, 0o600))
	ns, _ = start("after")
	accounts, err = exec.Command(agentdBin, "tenant", "accounts", "--convlog-nkey", adminPub, "--nats-url", url, "--nkey", adminFile).Output()
	require.NoError(t, err)
	require.Contains(t, string(accounts), "convlog_tenant_acme", "the registry kept acme's user")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "accounts.conf"), accounts, 0o600))
	for range 2 { // a reload subscribes the imports of the accounts the previous one added
		n := countLines(ns.log, "Reloaded server configuration")
		ns.kill(syscall.SIGHUP)
		require.NoError(t, poll(10*time.Second, 50*time.Millisecond, func() error {
			if countLines(ns.log, "Reloaded server configuration") <= n {
				return errNotYet
			}
			return nil
		}))
	}

	nc, c = adminClient(ctx)
	defer nc.Close()
	after, err := c.Get(ctx, "acme", "t1")
	require.NoError(t, err)
	require.Equal(t, before.Version, after.Version)
	require.Equal(t, before.Messages, after.Messages, "the thread written before the migration reads the same")

	auth, err := nats.NkeyOptionFromSeed(seedFile)
	require.NoError(t, err)
	tnc, err := nats.Connect(url, auth, nats.CustomInboxPrefix(client.TenantInboxPrefix("acme")))
	require.NoError(t, err)
	defer tnc.Close()
	tc, err := client.New(ctx, tnc, client.Config{Tenant: "acme"})
	require.NoError(t, err)
	got, err := tc.Get(ctx, "acme", "t1")
	require.NoError(t, err)
	require.Equal(t, before.Messages, got.Messages, "the tenant's user reads its thread through its account")
	_, err = tc.Append(ctx, "acme", "t1", []events.Event{{Payload: events.UserMessage{Content: events.Text("written after")}}}, client.ExpectVersion(after.Version))
	require.NoError(t, err)
}

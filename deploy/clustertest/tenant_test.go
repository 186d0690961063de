//go:build cluster

package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// Tenant accounts on your own NATS: a nats-server process whose
// configuration includes the accounts block `agentd tenant accounts`
// prints (first without tenants, then, after `agentd tenant create`, with
// the registry's, and a reload), and agentd serve against it with
// --nats-url (which runs the tenant service): the tenant's service uses
// client/ with Config.Tenant, the server denies it another tenant's
// subjects, and a reply subject naming the JetStream API or another
// tenant's thread changes nothing.
func TestTenantAccountsInANATSServerConfig(t *testing.T) {
	natsBin, agentdBin := buildBinaries(t)
	dir := t.TempDir()
	adminPub, adminFile := newAdminSeed(t, dir)

	accounts := filepath.Join(dir, "accounts.conf")
	writeAccounts := func(args ...string) {
		t.Helper()
		out, err := exec.Command(agentdBin, append([]string{"tenant", "accounts", "--convlog-nkey", adminPub}, args...)...).Output()
		require.NoError(t, err, "%s", out)
		require.NoError(t, os.WriteFile(accounts, out, 0o600))
	}
	writeAccounts("--no-registry")
	port := freePort(t)
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`listen: 127.0.0.1:%d
jetstream { store_dir: %q }
include 'accounts.conf'
`, port, filepath.Join(dir, "js"))), 0o600))
	out, err := exec.Command(natsBin, "-t", "-c", conf).CombinedOutput()
	require.NoError(t, err, "nats-server -t: %s", out)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ns, _ := startNATSAndServe(t, dir, "", natsBin, agentdBin, conf, url, "--nkey", adminFile)

	// A user of acme in the registry, its account in the configuration.
	seedFile := filepath.Join(dir, "acme.nk")
	out, err = exec.Command(agentdBin, "tenant", "create", "acme", "--out", seedFile, "--nats-url", url, "--nkey", adminFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	writeAccounts("--nats-url", url, "--nkey", adminFile)
	// nats-server subscribes the service imports of an account a reload
	// adds only at the next reload: reload twice.
	for want := 1; want <= 2; want++ {
		ns.kill(syscall.SIGHUP)
		require.NoError(t, poll(10*time.Second, 50*time.Millisecond, func() error {
			if n := strings.Count(tail(ns.log, 200), "Reloaded server configuration"); n < want {
				return fmt.Errorf("%d reloads, want %d", n, want)
			}
			return nil
		}))
	}
	auth, err := nats.NkeyOptionFromSeed(seedFile)
	require.NoError(t, err)

	var denied []string
	var mu sync.Mutex
	var nc *nats.Conn
	require.NoError(t, poll(30*time.Second, 100*time.Millisecond, func() error { // the reload is done
		nc, err = nats.Connect(url, auth, nats.CustomInboxPrefix(client.TenantInboxPrefix("acme")),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				mu.Lock()
				denied = append(denied, err.Error())
				mu.Unlock()
			}))
		return err
	}))
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, nc, client.Config{Tenant: "acme"})
	require.NoError(t, err)
	var v uint64
	require.NoError(t, poll(30*time.Second, 200*time.Millisecond, func() error { // the service is up once serve runs
		_, _, v, err = c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "t1"})
		return err
	}))
	r, err := c.Append(ctx, "acme", "t1", []events.Event{{Payload: events.UserMessage{Content: events.Text("hello")}}}, client.ExpectVersion(v))
	require.NoError(t, err)
	th, err := c.Get(ctx, "acme", "t1", client.Consistent())
	require.NoError(t, err)
	require.Equal(t, "hello", th.Messages[0].Content.Text)
	require.Equal(t, r.Version, th.Version)
	require.NoError(t, poll(30*time.Second, 100*time.Millisecond, func() error {
		page, err := c.List(ctx, "acme", client.ListOptions{})
		if err != nil || len(page.Threads) != 1 {
			return fmt.Errorf("list: %v %v", page, err)
		}
		return nil
	}))

	// What the server must deny.
	require.NoError(t, nc.Publish("conv.globex.t1", []byte("x")))
	_, err = nc.SubscribeSync("conv.>")
	require.NoError(t, err)
	_, err = nc.Request("$JS.API.DIRECT.GET.CONVLOG", []byte(`{"seq":1,"batch":10}`), 500*time.Millisecond)
	require.Error(t, err)
	require.NoError(t, nc.Flush())
	// Replies aimed at the stream's purge and another tenant's thread.
	admin2, err := nats.NkeyOptionFromSeed(adminFile)
	require.NoError(t, err)
	anc, err := nats.Connect(url, admin2)
	require.NoError(t, err)
	defer anc.Close()
	_, err = anc.Request("conv.globex.g1", []byte("globex's"), 5*time.Second)
	require.NoError(t, err)
	m := nats.NewMsg("$JS.API.DIRECT.GET.CONVLOG.conv.acme.t1")
	m.Reply = "$JS.API.STREAM.PURGE.CONVLOG"
	require.NoError(t, nc.PublishMsg(m))
	m = nats.NewMsg("conv.acme.t1")
	m.Reply, m.Data = "conv.globex.g1", []byte("x")
	require.NoError(t, nc.PublishMsg(m))
	require.NoError(t, nc.Flush())
	time.Sleep(500 * time.Millisecond)
	last, err := anc.Request("$JS.API.DIRECT.GET.CONVLOG.conv.globex.g1", nil, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "globex's", string(last.Data), "globex's thread holds what globex wrote")
	mu.Lock()
	all := strings.Join(denied, "\n")
	mu.Unlock()
	for _, want := range []string{`Publish to "conv.globex.t1"`, `Subscription to "conv.>"`, `Publish to "$JS.API.DIRECT.GET.CONVLOG"`} {
		require.Contains(t, all, "Permissions Violation for "+want)
	}
}

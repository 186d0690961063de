//go:build cluster

package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// Issue 21 item 1 on your own NATS: a nats-server process whose
// configuration grants a tenant's user exactly what `agentd tenant
// permissions --format conf` prints, and agentd serve against it with
// --nats-url (which runs the tenant service): the tenant's service uses
// client/ with Config.Tenant, and the server denies it another tenant's
// subjects.
func TestTenantPermissionsInANATSServerConfig(t *testing.T) {
	natsBin, agentdBin := buildBinaries(t)
	dir := t.TempDir()
	admin, _ := nkeys.CreateUser()
	adminPub, _ := admin.PublicKey()
	adminSeed, _ := admin.Seed()
	adminFile := filepath.Join(dir, "admin.nk")
	require.NoError(t, os.WriteFile(adminFile, adminSeed, 0o600))
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()

	entry, err := exec.Command(agentdBin, "tenant", "permissions", "acme", "--format", "conf", "--nkey", userPub).CombinedOutput()
	require.NoError(t, err, "%s", entry)
	port := freePort(t)
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`listen: 127.0.0.1:%d
jetstream { store_dir: %q }
authorization {
  users: [
    { nkey: %q }
    %s  ]
}
`, port, filepath.Join(dir, "js"), adminPub, entry)), 0o600))
	out, err := exec.Command(natsBin, "-t", "-c", conf).CombinedOutput()
	require.NoError(t, err, "nats-server -t: %s", out)
	ns := newProc(t, dir, "nats", natsBin, []string{"-c", conf}, nil)
	ns.start(t)
	// agentd exits when no server answers its first connect: start it once
	// the server listens.
	require.NoError(t, poll(30*time.Second, 20*time.Millisecond, func() error {
		if !ns.logContains("Server is ready") {
			return errNotYet
		}
		return nil
	}), "nats-server did not start: %s", tail(ns.log, 20))
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	agent := newProc(t, dir, "agentd", agentdBin, []string{"serve", "--nats-url", url, "--nkey", adminFile, "--workers", "0", "--http-addr", ""}, nil)
	agent.start(t)
	require.NoError(t, poll(60*time.Second, 100*time.Millisecond, func() error {
		if !agent.logContains("projector started") {
			return errNotYet
		}
		return nil
	}), "agentd serve did not start: %s", tail(agent.log, 20))

	var denied []string
	nc, err := nats.Connect(url, nats.Nkey(userPub, user.Sign), nats.CustomInboxPrefix(client.TenantInboxPrefix("acme")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied = append(denied, err.Error()) }))
	require.NoError(t, err)
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
	time.Sleep(200 * time.Millisecond)
	all := strings.Join(denied, "\n")
	for _, want := range []string{`Publish to "conv.globex.t1"`, `Subscription to "conv.>"`, `Publish to "$JS.API.DIRECT.GET.CONVLOG"`} {
		require.Contains(t, all, "Permissions Violation for "+want)
	}
}

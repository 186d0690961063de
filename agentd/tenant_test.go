package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// Tenants with agentd itself: `agentd tenant create` on the data
// directory of a running `agentd serve` registers a user, which can
// connect to serve's NATS at once with the seed file and use client/ for
// its tenant (append, a projected snapshot read, list), and nothing of
// another tenant; `agentd tenant revoke` closes its connection.
func TestTenantUserOfARunningServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--workers", "0")
	p.ok(t, "POST", "/v1/threads", `{"id":"theirs","replies":"off"}`)
	p.ok(t, "POST", "/v1/threads/theirs/events", `{"events":[{"type":"message.user","payload":{"content":"not for acme"}}]}`)

	seed := filepath.Join(t.TempDir(), "acme.nk")
	out, stderr, err := runCLIFull(t, "tenant", "create", "acme", "--out", seed, "--name", "billing", "--data-dir", dir)
	require.NoError(t, err, stderr)
	require.Contains(t, out, "_INBOX_acme")
	st, err := os.Stat(seed)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	_, stderr, err = runCLIFull(t, "tenant", "create", "acme", "--out", seed, "--data-dir", dir)
	require.Error(t, err, "an existing seed file is never overwritten")
	require.Contains(t, stderr, "exists")

	list, stderr, err := runCLIFull(t, "tenant", "list", "--json", "--data-dir", dir)
	require.NoError(t, err, stderr)
	var listed struct {
		Users []struct {
			Tenant, PublicKey, Name string
		} `json:"users"`
	}
	require.NoError(t, json.Unmarshal([]byte(list), &listed))
	require.Len(t, listed.Users, 1)
	require.Equal(t, "acme", listed.Users[0].Tenant)
	require.Equal(t, "billing", listed.Users[0].Name)

	perms, stderr, err := runCLIFull(t, "tenant", "permissions", "acme")
	require.NoError(t, err, stderr)
	require.Contains(t, perms, `"conv.acme.*"`)
	require.Contains(t, perms, `"_INBOX_acme.>"`)

	// The user connects at once (serve applied the registry) and works.
	auth, err := nats.NkeyOptionFromSeed(seed)
	require.NoError(t, err)
	var nc *nats.Conn
	require.Eventually(t, func() bool {
		nc, err = nats.Connect(p.natsURL, auth, nats.CustomInboxPrefix(client.TenantInboxPrefix("acme")), nats.MaxReconnects(0))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "connect as the new user: %v", err)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, nc, client.Config{Tenant: "acme"})
	require.NoError(t, err)
	_, _, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "mine"})
	require.NoError(t, err)
	r, err := c.Append(ctx, "acme", "mine", []events.Event{{Payload: events.UserMessage{Content: events.Text("hello from acme")}}}, client.ExpectVersion(v))
	require.NoError(t, err)
	th, err := c.Get(ctx, "acme", "mine", client.AtLeastVersion(r.Version))
	require.NoError(t, err)
	require.Equal(t, "hello from acme", th.Messages[0].Content.Text)
	require.Eventually(t, func() bool {
		page, err := c.List(ctx, "acme", client.ListOptions{})
		return err == nil && len(page.Threads) == 1 && page.Threads[0].Thread == "mine"
	}, 10*time.Second, 50*time.Millisecond)
	_, err = c.Get(ctx, events.DefaultTenant, "theirs")
	require.ErrorIs(t, err, events.ErrOtherTenant)
	// Raw NATS cannot reach the default tenant's thread either.
	_, err = nc.Request("$JS.API.DIRECT.GET.CONVLOG.conv.default.theirs", nil, 500*time.Millisecond)
	require.Error(t, err)

	out, stderr, err = runCLIFull(t, "tenant", "revoke", "acme", "--data-dir", dir)
	require.NoError(t, err, stderr)
	require.Contains(t, out, "revoked 1 user(s)")
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 10*time.Second, 20*time.Millisecond)
	_, err = nats.Connect(p.natsURL, auth, nats.MaxReconnects(0))
	require.Error(t, err)
	require.True(t, strings.Contains(p.log(), "tenant accounts applied"), "serve logs each application of the registry")
}

// A user revoked while no serve runs (the command owns the data
// directory) is out of the users serve starts with, so it is never
// accepted, not even before serve applies the registry.
func TestTenantRevokedWhileServeIsDown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--workers", "0")
	seed := filepath.Join(t.TempDir(), "acme.nk")
	_, stderr, err := runCLIFull(t, "tenant", "create", "acme", "--out", seed, "--data-dir", dir)
	require.NoError(t, err, stderr)
	saved := filepath.Join(dir, natsconn.TenantUsersFile)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(saved)
		return err == nil && strings.Contains(string(b), `"tenant":"acme"`)
	}, 10*time.Second, 50*time.Millisecond, "serve saves the users it applied")
	stopServe(t, p)

	_, stderr, err = runCLIFull(t, "tenant", "revoke", "acme", "--data-dir", dir)
	require.NoError(t, err, stderr)
	b, err := os.ReadFile(saved)
	require.NoError(t, err)
	require.NotContains(t, string(b), "acme", "the revoke updated the users the next serve starts with")

	p = startServe(t, dir, "--workers", "0")
	auth, err := nats.NkeyOptionFromSeed(seed)
	require.NoError(t, err)
	for range 20 {
		nc, err := nats.Connect(p.natsURL, auth, nats.MaxReconnects(0))
		if err == nil {
			nc.Close()
			t.Fatal("a revoked user connected to the restarted serve")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/tenancy"
)

// Quotas with agentd itself: with --quota-file, a tenant over
// its storage quota gets 429 quota-exceeded over HTTP (naming the limit),
// its tenant-scoped NATS users lose the right to append (a raw publish is
// denied by the server), the metrics say so, and another tenant writes on.
// The accounts block 'agentd tenant accounts' prints for servers of your
// own holds the same: the tenant's account imports no append subject and
// its users may not publish there; another tenant's may.
func TestStorageQuotaOverHTTPAndNATS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	qf := filepath.Join(t.TempDir(), "quota.json")
	require.NoError(t, os.WriteFile(qf, []byte(`{"tenants":{"acme":{"storage_bytes":30000}}}`), 0o600))
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("acme:acme-key\nglobex:globex-key\n"), 0o600))
	p := startServe(t, dir, "--workers", "0", "--quota-file", qf, "--api-keys-file", keys)
	as := func(tenant string) []string { return []string{"Authorization", "Bearer " + tenant + "-key"} }
	for _, tenant := range []string{"acme", "globex"} {
		code, b := p.call(t, "POST", "/v1/threads", `{"id":"big","replies":"off"}`, as(tenant)...)
		require.Less(t, code, 300, string(b))
	}
	seed := filepath.Join(t.TempDir(), "acme.nk")
	_, stderr, err := runCLIFull(t, "tenant", "create", "acme", "--out", seed, "--data-dir", dir)
	require.NoError(t, err, stderr)
	auth, err := nats.NkeyOptionFromSeed(seed)
	require.NoError(t, err)
	var mu sync.Mutex
	var denied []string
	var nc *nats.Conn
	require.Eventually(t, func() bool {
		nc, err = nats.Connect(p.natsURL, auth, nats.CustomInboxPrefix(client.TenantInboxPrefix("acme")),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				mu.Lock()
				denied = append(denied, err.Error())
				mu.Unlock()
			}))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	defer nc.Close()

	body := `{"events":[{"type":"message.user","payload":{"content":"` + strings.Repeat("x", 1000) + `"}}]}`
	var code int
	var b []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if code, b = p.call(t, "POST", "/v1/threads/big/events", body, as("acme")...); code != 201 && code != 200 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, http.StatusTooManyRequests, code, string(b))
	var prob struct {
		Type, Code, Detail string
		Limit              int64
	}
	require.NoError(t, json.Unmarshal(b, &prob))
	require.Contains(t, prob.Type, "quota-exceeded")
	require.Equal(t, "storage", prob.Code)
	require.Equal(t, int64(30000), prob.Limit)
	require.Contains(t, prob.Detail, "tenant acme stores")
	// Retrying cannot help: SDKs that retry 429 are told not to.
	req, err := http.NewRequest("POST", p.httpURL+"/v1/threads/big/events", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer acme-key")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Equal(t, "false", res.Header.Get("X-Should-Retry"))

	// globex is not held.
	code, b = p.call(t, "POST", "/v1/threads/big/events", body, as("globex")...)
	require.Less(t, code, 300, string(b))

	// acme's NATS user may no longer append (the server denies it).
	require.Eventually(t, func() bool {
		_ = nc.Publish("conv.acme.raw", []byte("x"))
		_ = nc.Flush()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range denied {
			if strings.Contains(e, `Permissions Violation for Publish to "conv.acme.raw"`) {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond, "a raw append of an over-quota tenant was not denied")
	// ...but may still read.
	_, err = nc.Request("$JS.API.DIRECT.GET.CONVLOG.conv.acme.big", nil, 2*time.Second)
	require.NoError(t, err)

	res, err = http.Get(p.httpURL + "/metrics")
	require.NoError(t, err)
	mb, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(mb), `convlog_tenant_quota_exceeded{kind="storage",tenant="acme"} 1`)
	require.Contains(t, string(mb), `convlog_tenant_quota_exceeded{kind="storage",tenant="globex"} 0`)
	require.Contains(t, string(mb), `convlog_tenant_storage_bytes{tenant="acme"}`)

	_, stderr, err = runCLIFull(t, "tenant", "create", "globex", "--out", filepath.Join(t.TempDir(), "globex.nk"), "--data-dir", dir)
	require.NoError(t, err, stderr)
	admin, err := nkeys.CreateUser()
	require.NoError(t, err)
	adminKey, _ := admin.PublicKey()
	conf, stderr, err := runCLIFull(t, "tenant", "accounts", "--convlog-nkey", adminKey, "--data-dir", dir)
	require.NoError(t, err, stderr)
	account := func(tenant string) string {
		_, block, ok := strings.Cut(conf, "  "+tenancy.AccountName(tenant)+": {\n")
		require.True(t, ok, "the accounts block has %s's account:\n%s", tenant, conf)
		block, _, _ = strings.Cut(block, "\n  }\n")
		return block
	}
	appendImport := func(tenant string) string {
		return fmt.Sprintf(`{ service: { account: %s, subject: "conv.%s.*" } }`, tenancy.ConvlogAccount, tenant)
	}
	require.Contains(t, account("globex"), appendImport("globex"), "globex may append")
	require.Contains(t, account("globex"), `"conv.globex.*"`)
	require.NotContains(t, account("acme"), appendImport("acme"), "acme over its quota imports the append subject")
	require.NotContains(t, account("acme"), `"conv.acme.*"`, "acme over its quota may publish appends")
	require.Contains(t, account("acme"), `"conv.acme.*.delta"`, "acme still reads and sends deltas")
}

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
)

// agentd serve --retention-file erases a thread once it is idle past the
// policy; `agentd retention plan` named it before; audit verify then lists
// it as erased and the rest of the log still verifies.
func TestServeAppliesARetentionFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	policy := filepath.Join(t.TempDir(), "retention.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"interval":"200ms","tenants":{"default":{"erase_idle":"1s"}}}`), 0o600))

	// Written before serve enforces anything: plan shows it once idle.
	p := startServe(t, dir, "--workers", "0")
	post := func(path, body string) int {
		res, err := http.Post(p.httpURL+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusCreated, post("/v1/threads", `{"id":"old","replies":"off"}`))
	require.Equal(t, http.StatusCreated, post("/v1/threads/old/events", `{"events":[{"type":"message.user","payload":{"content":"secret PII"}}]}`))
	require.Eventually(t, func() bool {
		out, _, err := runCLIFull(t, "retention", "plan", "--retention-file", policy, "--data-dir", dir)
		return err == nil && strings.Contains(out, "would erase default/old:") && strings.Contains(out, "1 thread(s) would be erased")
	}, 30*time.Second, 200*time.Millisecond)
	res, err := http.Get(p.httpURL + "/v1/threads/old")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "plan changed nothing")
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	<-p.done

	p = startServe(t, dir, "--workers", "0", "--retention-file", policy)
	require.Eventually(t, func() bool {
		res, err := http.Get(p.httpURL + "/v1/threads/old")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusNotFound
	}, 30*time.Second, 100*time.Millisecond, "the idle thread is erased")
	var rep audit.Report
	require.Eventually(t, func() bool {
		out, _, err := runCLIFull(t, "audit", "verify", "--data-dir", dir, "--json")
		rep = audit.Report{}
		return err == nil && json.Unmarshal([]byte(out), &rep) == nil && rep.OK && len(rep.Erased) == 1 && rep.Unsigned == 0
	}, 30*time.Second, 200*time.Millisecond, "verify lists the erasure: %+v", rep)
	require.Equal(t, "conv.default.old", rep.Erased[0].Subject)
}

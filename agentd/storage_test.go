package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// On a real full disk (a 32 MiB tmpfs): once the data directory's disk
// fills, an append answers 507
// storage-full (not a 504 "outcome unknown" timeout) and /healthz 503
// names the disk; when space is freed, appends succeed again without a
// restart; no acknowledged append is lost.
func TestAFullDiskIsReportedAndRecovers(t *testing.T) {
	mnt := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", mnt).CombinedOutput()
	require.NoError(t, err, "mount a tmpfs for the full disk (needs root): %s", out)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })

	data := filepath.Join(mnt, "data")
	p := startServe(t, data, "--workers", "0")
	p.mu.Lock()
	base := p.httpURL
	p.mu.Unlock()
	require.NotEmpty(t, base)

	post := func(path string, body any) (int, []byte) {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		res, err := http.Post(base+path, "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		defer res.Body.Close()
		rb, _ := io.ReadAll(res.Body)
		return res.StatusCode, rb
	}
	status, body := post("/v1/threads", map[string]any{"replies": "off"})
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var th struct {
		Thread string `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(body, &th))
	events := "/v1/threads/" + th.Thread + "/events"

	// Leave about 4 MiB free: the server sized its store when the disk
	// was empty, so the disk fills before any JetStream limit.
	var fs syscall.Statfs_t
	require.NoError(t, syscall.Statfs(mnt, &fs))
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, int64(fs.Bavail)*fs.Bsize-4<<20), 0o600))

	big := strings.Repeat("x", 200<<10)
	var acked []string
	full := false
	for i := 0; i < 60 && !full; i++ {
		id := fmt.Sprintf("0193f0c2-0000-7000-8000-%012d", i)
		status, body := post(events, map[string]any{"events": []any{map[string]any{"id": id, "type": "message.user", "payload": map[string]any{"content": big}}}})
		switch status {
		case http.StatusCreated:
			acked = append(acked, id)
		case http.StatusInsufficientStorage:
			full = true
			require.Contains(t, string(body), "storage-full")
		default:
			t.Fatalf("append %d answered %d, want 201 or 507: %s", i, status, body)
		}
	}
	require.True(t, full, "the disk never filled")
	res, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	hb, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s", hb)
	require.Contains(t, string(hb), "storage-full")

	require.NoError(t, os.Remove(filler))
	recovered := false
	deadline := time.Now().Add(45 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		id := fmt.Sprintf("0193f0c2-0000-7000-9000-%012d", i)
		status, _ := post(events, map[string]any{"events": []any{map[string]any{"id": id, "type": "message.user", "payload": map[string]any{"content": "after"}}}})
		if status == http.StatusCreated {
			acked = append(acked, id)
			recovered = true
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	require.True(t, recovered, "appends succeed again after space is freed, without a restart\n%s", p.log())
	// A small append may fit in what the full disk still allowed: /healthz
	// says ok once the watcher has seen the space (statfs, polled).
	require.Eventually(t, func() bool {
		res, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "/healthz answers ok once space is free")

	// Every acknowledged append is in the log.
	c := connectServe(t, p)
	seen := map[string]bool{}
	for ev, err := range c.Events(t.Context(), "default", th.Thread, 0, 0) {
		require.NoError(t, err)
		seen[ev.ID] = true
	}
	for _, id := range acked {
		require.True(t, seen[id], "acknowledged append %s lost", id)
	}
	t.Logf("%d appends acknowledged before and after the full disk, all stored", len(acked))
}

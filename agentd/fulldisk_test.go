package main

import (
	"errors"
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// fullDiskHeadroom is the free space left on the data directory's disk
// before the log's own data fills it: more than
// embedded.DefaultStorageReserve, so that erasing what filled it gives
// JetStream its own storage limit back.
const fullDiskHeadroom = 12 << 20

// A disk filled by the log's own data (a tmpfs shrunk under a running
// agentd, so that the disk fills before JetStream's storage limit, which
// it sized from the disk at start): an append that does not fit answers
// 507 storage-full without waiting for the request timeout, another
// tenant's thread stays readable, a soft delete succeeds, erasing the
// thread that filled the disk succeeds and frees its space, and appends
// are stored again.
func TestEraseAndDeleteWorkOnAFullDisk(t *testing.T) {
	mnt := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput()
	require.NoError(t, err, "mount a tmpfs for the full disk (needs root): %s", out)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("acme:acme-key\nglobex:globex-key\n"), 0o600))
	p := startServe(t, filepath.Join(mnt, "data"), "--workers", "0", "--api-keys-file", keys)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agentd's log:\n%s", p.log())
		}
	})

	// call sends a request as tenant; a client deadline shorter than
	// the server's request timeout (10 s) shows that an answer did not
	// wait for it.
	call := func(tenant, method, path, body string, deadline time.Duration) (int, string, time.Duration) {
		t.Helper()
		req, err := http.NewRequest(method, p.httpURL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tenant+"-key")
		start := time.Now()
		res, err := (&http.Client{Timeout: deadline}).Do(req)
		took := time.Since(start)
		if err != nil {
			var ne interface{ Timeout() bool }
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "%s %s as %s: no answer within %s", method, path, tenant, deadline)
			require.NoError(t, err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b), took
	}
	ok := func(tenant, method, path, body string) string {
		t.Helper()
		code, b, _ := call(tenant, method, path, body, time.Minute)
		require.Less(t, code, 300, "%s %s as %s: %s", method, path, tenant, b)
		return b
	}
	free := func() int64 {
		var fs syscall.Statfs_t
		require.NoError(t, syscall.Statfs(mnt, &fs))
		return int64(fs.Bavail) * fs.Bsize
	}
	message := func(content string) string {
		return `{"events":[{"type":"message.user","payload":{"content":"` + content + `"}}]}`
	}

	ok("globex", "POST", "/v1/threads", `{"id":"kept","replies":"off"}`)
	ok("globex", "POST", "/v1/threads/kept/events", message("globex keeps this"))
	ok("acme", "POST", "/v1/threads", `{"id":"big","replies":"off"}`)
	ok("acme", "POST", "/v1/threads", `{"id":"small","replies":"off"}`)
	ok("acme", "POST", "/v1/threads/small/events", message("hello"))

	var fs syscall.Statfs_t
	require.NoError(t, syscall.Statfs(mnt, &fs))
	used := int64(fs.Blocks-fs.Bfree) * fs.Bsize
	size := fmt.Sprintf("size=%dk", (used+fullDiskHeadroom)>>10)
	out, err = exec.Command("mount", "-o", "remount,"+size, mnt).CombinedOutput()
	require.NoError(t, err, "shrink the tmpfs: %s", out)

	// Fill the disk with one thread's events (and their projections).
	big := message(strings.Repeat("x", 256<<10))
	full := false
	for i := 0; i < 4*fullDiskHeadroom/(256<<10) && !full; i++ {
		code, b, _ := call("acme", "POST", "/v1/threads/big/events", big, time.Minute)
		switch code {
		case http.StatusCreated:
		case http.StatusInsufficientStorage:
			require.Contains(t, b, "storage-full")
			full = true
		default:
			t.Fatalf("append %d answered %d, want 201 or 507: %s", i, code, b)
		}
	}
	require.True(t, full, "the disk never filled (%d bytes free)", free())
	t.Logf("disk full: %d bytes free", free())

	// Appends that do not fit answer 507 without waiting for the request
	// timeout.
	for _, thread := range []string{"big", "small", "big"} {
		code, b, took := call("acme", "POST", "/v1/threads/"+thread+"/events", big, 5*time.Second)
		require.Equal(t, http.StatusInsufficientStorage, code, b)
		require.Contains(t, b, "storage-full")
		t.Logf("append on a full disk answered 507 in %s", took)
	}

	// Another tenant's thread stays readable.
	require.Contains(t, ok("globex", "GET", "/v1/threads/kept", ""), "globex keeps this")
	require.Contains(t, ok("globex", "GET", "/v1/threads/kept/events", ""), "globex keeps this")

	// A soft delete succeeds.
	code, b, took := call("acme", "DELETE", "/v1/threads/small", "", 5*time.Second)
	require.Equal(t, http.StatusOK, code, b)
	require.Contains(t, b, `"deleted":true`)
	t.Logf("delete on a full disk answered %d in %s", code, took)

	// Erasing the thread that filled the disk succeeds and frees its
	// space: JetStream counts it free at once; the disk gets the bytes
	// back as nats-server drops or compacts the blocks that held them.
	nc, err := nats.Connect(p.natsURL, natsAuth(t, p.dataDir)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stored := func() uint64 {
		info, err := js.AccountInfo(t.Context())
		require.NoError(t, err)
		return info.Store
	}
	storedBefore, freeBefore := stored(), free()
	code, b, took = call("acme", "POST", "/v1/threads/big/erase", `{"confirm":true,"reason":"full disk"}`, 5*time.Second)
	require.Equal(t, http.StatusOK, code, b)
	t.Logf("erase on a full disk answered %d in %s: JetStream stores %d bytes before, %d after; %d bytes free on disk before, %d after",
		code, took, storedBefore, stored(), freeBefore, free())
	require.Less(t, stored(), storedBefore-fullDiskHeadroom/4, "the erasure frees the thread's bytes")
	code, b, _ = call("acme", "GET", "/v1/threads/big", "", time.Minute)
	require.Equal(t, http.StatusNotFound, code, b)

	// Appends are stored again.
	code, b, took = call("globex", "POST", "/v1/threads/kept/events", message("after"), 5*time.Second)
	require.Equal(t, http.StatusCreated, code, b)
	t.Logf("append after the erasure answered %d in %s", code, took)
	ok("acme", "POST", "/v1/threads", `{"id":"after","replies":"off"}`)
	ok("acme", "POST", "/v1/threads/after/events", message("space again"))
}

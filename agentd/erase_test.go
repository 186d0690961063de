package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/threadkey"
)

// Erase means gone, on one node with agentd's own data
// directory: a thread's text, title, state and blob never reach any file
// under the data directory in the clear (they are sealed with the
// thread's data key), and after the erasure the key itself is in no file
// either, while agentd runs, after it stops and after a restart; the
// erasure marker stays, another thread reads as before, and the audit
// chain of the whole stream still verifies.
func TestEraseLeavesNoReadableByteOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--workers", "0")
	const marker, keptMarker = "GONE-MARKER-4c1d9", "KEPT-MARKER-8a2b7"
	for _, th := range []struct{ id, text string }{{"gone", marker}, {"kept", keptMarker}} {
		p.ok(t, "POST", "/v1/threads", `{"id":"`+th.id+`","replies":"off","title":"title `+th.text+`","metadata":{"note":"`+th.text+`"}}`)
		for range 20 {
			p.ok(t, "POST", "/v1/threads/"+th.id+"/events", `{"events":[{"type":"message.user","payload":{"content":"text `+th.text+` `+strings.Repeat("x", 500)+`"}}]}`)
		}
		p.ok(t, "PUT", "/v1/threads/"+th.id+"/state/k", `{"value":"state `+th.text+`"}`)
		req, err := http.NewRequest("PUT", p.httpURL+"/v1/threads/"+th.id+"/blobs/doc", strings.NewReader(strings.Repeat("blob "+th.text+" ", 20000)))
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Less(t, res.StatusCode, 300)
	}
	// Projected (heads, chunks and index entries written) and readable.
	require.Eventually(t, func() bool {
		code, b := p.call(t, "GET", "/v1/threads?limit=10", "")
		return code == 200 && bytes.Contains(b, []byte("title "+keptMarker)) && bytes.Contains(b, []byte("title "+marker))
	}, 30*time.Second, 50*time.Millisecond)
	require.Contains(t, string(p.ok(t, "GET", "/v1/threads/gone", "")), "text "+marker)

	nc, err := nats.Connect(p.natsURL, mustNKey(t, filepath.Join(dir, "credentials", "agentd.nk")))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(context.Background(), "convlog_keys")
	require.NoError(t, err)
	rec, err := kv.Get(context.Background(), threadkey.Key("default", "gone"))
	require.NoError(t, err)
	key := bytes.Clone(rec.Value()[9:])
	require.Len(t, key, 32)

	// Nothing of either thread is on disk in the clear; the key is.
	for _, m := range []string{marker, keptMarker} {
		require.Empty(t, natstest.FilesContaining(t, dir, []byte(m)), "clear text of %s on disk", m)
	}
	require.Eventually(t, func() bool { return len(natstest.FilesContaining(t, dir, key)) > 0 }, 10*time.Second, 100*time.Millisecond,
		"the thread's key is on disk before the erasure (else the checks below prove nothing)")

	var rep struct {
		KeyDestroyed bool `json:"key_destroyed"`
	}
	require.NoError(t, json.Unmarshal(p.ok(t, "POST", "/v1/threads/gone/erase", `{"reason":"test","confirm":true}`), &rep))
	require.True(t, rep.KeyDestroyed)
	require.Empty(t, natstest.FilesContaining(t, dir, key), "the key is gone from disk at once")
	code, _ := p.call(t, "GET", "/v1/threads/gone", "")
	require.Equal(t, http.StatusNotFound, code)

	nc.Close()
	stopServe(t, p)
	require.Empty(t, natstest.FilesContaining(t, dir, key), "after a stop")
	for _, m := range []string{marker, keptMarker} {
		require.Empty(t, natstest.FilesContaining(t, dir, []byte(m)), "after a stop: %s", m)
	}

	p = startServe(t, dir, "--workers", "0")
	code, _ = p.call(t, "GET", "/v1/threads/gone", "")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, string(p.ok(t, "GET", "/v1/threads/kept", "")), "text "+keptMarker)
	require.Contains(t, string(p.ok(t, "GET", "/v1/threads/kept/blobs/doc", "")), "blob "+keptMarker)
	// The marker remains as the thread's only event; the rest of the
	// stream, erased thread included, verifies.
	nc, err = nats.Connect(p.natsURL, mustNKey(t, filepath.Join(dir, "credentials", "agentd.nk")))
	require.NoError(t, err)
	defer nc.Close()
	js, err = jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), "CONVLOG")
	require.NoError(t, err)
	last, err := st.GetLastMsgForSubject(context.Background(), "conv.default.gone")
	require.NoError(t, err)
	require.Equal(t, "thread.erased", last.Header.Get("Convlog-Type"))
	require.Equal(t, map[string]uint64{"conv.default.gone": 1}, subjectsOf(t, st, "conv.default.gone"), "the marker is all that is left")
	var out, stderr string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, stderr, err = runCLIFull(t, "audit", "verify", "--data-dir", dir, "--json")
		var rep audit.Report
		if err == nil && json.Unmarshal([]byte(out), &rep) == nil && rep.OK && rep.Unsigned == 0 && rep.Threads == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "audit verify: %v\n%s\n%s", err, out, stderr)
	}
	require.Empty(t, natstest.FilesContaining(t, dir, key), "after a restart")
}

// subjectsOf returns the message count per subject matching filter.
func subjectsOf(t *testing.T, st jetstream.Stream, filter string) map[string]uint64 {
	t.Helper()
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(filter))
	require.NoError(t, err)
	return info.State.Subjects
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/threadkey"
)

// Redaction of one field, end to end on agentd with its
// own data directory: in a thread of 1,000 messages the content of one is
// redacted; the thread's old key (and with it the event's key) is in no
// file afterwards, and the secret never was in the clear; the default
// read, a replay, SSE resumed across the redacted sequence and the export
// show "[redacted]" there and every other message as it was; audit verify
// is clean and reports the redaction.
func TestRedactOneFieldOfAThousandMessageThread(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--workers", "0")
	const secret = "SECRET-TOKEN-7c2e91"
	p.ok(t, "POST", "/v1/threads", `{"id":"r","replies":"off"}`)
	const n, target = 1000, 500
	text := func(i int) string {
		if i == target {
			return "my token is " + secret
		}
		return fmt.Sprintf("message %d", i)
	}
	for i := 0; i < n; i += 100 {
		var evs []string
		for j := i; j < i+100; j++ {
			evs = append(evs, `{"type":"message.user","payload":{"content":"`+text(j)+`"}}`)
		}
		p.ok(t, "POST", "/v1/threads/r/events", `{"events":[`+strings.Join(evs, ",")+`]}`)
	}
	type thread struct {
		Version    uint64           `json:"version"`
		Messages   []events.Message `json:"messages"`
		Redactions []struct {
			Seq    uint64 `json:"seq"`
			Reason string `json:"reason"`
		} `json:"redactions"`
	}
	get := func(query string) thread {
		var th thread
		require.NoError(t, json.Unmarshal(p.ok(t, "GET", "/v1/threads/r"+query, ""), &th))
		return th
	}
	th := get("?consistent=true")
	require.Len(t, th.Messages, n)
	seq := th.Messages[target].Seq
	require.Equal(t, text(target), th.Messages[target].Content.String())

	nc, err := nats.Connect(p.natsURL, mustNKey(t, filepath.Join(dir, "credentials", "agentd.nk")))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(context.Background(), "convlog_keys")
	require.NoError(t, err)
	rec, err := kv.Get(context.Background(), threadkey.Key("default", "r"))
	require.NoError(t, err)
	oldKey := bytes.Clone(rec.Value()[9:41])
	require.Eventually(t, func() bool { return len(natstest.FilesContaining(t, dir, oldKey)) > 0 }, 10*time.Second, 100*time.Millisecond,
		"the thread's key is on disk before the redaction (else the check below proves nothing)")

	code, body := p.call(t, "POST", "/v1/threads/r/redact", `{"seq":`+strconv.FormatUint(seq, 10)+`,"fields":["content"],"reason":"leaked token","confirm":true}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var rep struct {
		Version uint64   `json:"version"`
		Fields  []string `json:"fields"`
	}
	require.NoError(t, json.Unmarshal(body, &rep))
	require.Equal(t, []string{"content"}, rep.Fields)

	require.Empty(t, natstest.FilesContaining(t, dir, oldKey), "the old thread key, and with it the redacted event's key, is in no file")
	require.Empty(t, natstest.FilesContaining(t, dir, []byte(secret)), "the secret never was on disk in the clear")

	check := func(what string, msgs []events.Message) {
		t.Helper()
		require.Len(t, msgs, n, what)
		for i, m := range msgs {
			want := text(i)
			if i == target {
				want = events.RedactedText
			}
			require.Equal(t, want, m.Content.String(), "%s: message %d", what, i)
		}
	}
	// Projected: the snapshot itself covers the redaction. (The default
	// read of a thread without a snapshot folds the log; the projector
	// rebuilds a 1,000-message snapshot in steps of MaxBatch events, so a
	// default read between two steps may return an older version than the
	// log gave a moment before: 999 messages at seq 1,000.)
	c, err := client.New(context.Background(), nc, client.Config{})
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool {
		th, err := c.Get(context.Background(), "default", "r")
		return err == nil && th.FromSnapshot && th.Version >= rep.Version
	}, 30*time.Second, 50*time.Millisecond, "projected")
	require.Eventually(t, func() bool {
		return bytes.Contains(p.ok(t, "GET", "/v1/threads", ""), []byte(`"thread":"r"`))
	}, 10*time.Second, 50*time.Millisecond, "listed again (its index entry is written anew)")
	require.NotContains(t, p.log(), "unreadable index entry", "the index entry of the retired value key was replaced, not found unreadable")
	th = get("")
	check("the default (snapshot) read", th.Messages)
	require.Len(t, th.Redactions, 1)
	require.Equal(t, seq, th.Redactions[0].Seq)
	check("a consistent read", get("?consistent=true").Messages)
	check("a replay at the redaction's sequence", get("?at_seq="+strconv.FormatUint(rep.Version, 10)).Messages)

	// SSE resumed from just before the redacted event, across it.
	req, err := http.NewRequest("GET", p.httpURL+"/v1/threads/r/events", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatUint(seq-1, 10))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var frames []string
	for sc.Scan() && len(frames) < 3 {
		if d, found := strings.CutPrefix(sc.Text(), "data: "); found {
			frames = append(frames, d)
		}
	}
	require.Len(t, frames, 3, "three events from seq %d on", seq)
	require.Contains(t, frames[0], `"seq":`+strconv.FormatUint(seq, 10))
	require.Contains(t, frames[0], events.RedactedText)
	require.NotContains(t, strings.Join(frames, "\n"), secret)
	require.Contains(t, frames[1], text(target+1))
	cancel()

	export := string(p.ok(t, "GET", "/v1/threads/r/export", ""))
	require.NotContains(t, export, secret)
	require.Contains(t, export, events.RedactedText)
	require.Contains(t, export, text(target+1))

	var out string
	var arep audit.Report
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, _, err = runCLIFull(t, "audit", "verify", "--data-dir", dir, "--json")
		arep = audit.Report{}
		if err == nil && json.Unmarshal([]byte(out), &arep) == nil && arep.OK && arep.Unsigned == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "audit verify: %v\n%s", err, out)
	}
	require.Len(t, arep.Redacted, 1, "%s", out)
	require.Equal(t, seq, arep.Redacted[0].Seq)
	require.Equal(t, "leaked token", arep.Redacted[0].Reason)
	text2, _, err := runCLIFull(t, "audit", "verify", "--data-dir", dir)
	require.NoError(t, err)
	require.Contains(t, text2, "redacted at seq "+strconv.FormatUint(seq, 10))

	nc.Close()
	stopServe(t, p)
	require.Empty(t, natstest.FilesContaining(t, dir, oldKey), "after a stop")
}

// `agentd thread redact` does what POST …/redact does, beside a running
// serve, and refuses without --yes or --seq.
func TestThreadRedactCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--workers", "0")
	post := func(path, body string) { p.postOK(t, path, body) }
	post("/v1/threads", `{"id":"c","replies":"off"}`)
	post("/v1/threads/c/events", `{"events":[{"type":"message.user","payload":{"content":"keep"}},{"type":"message.user","payload":{"content":"drop me"}}]}`)
	_, stderr, err := runCLIFull(t, "thread", "redact", "c", "--seq", "3", "--data-dir", dir)
	require.Error(t, err)
	require.Contains(t, stderr, "--yes")
	_, stderr, err = runCLIFull(t, "thread", "redact", "c", "--yes", "--data-dir", dir)
	require.Error(t, err)
	require.Contains(t, stderr, "--seq")
	out, stderr, err := runCLIFull(t, "thread", "redact", "c", "--seq", "3", "--fields", "content", "--reason", "asked", "--yes", "--data-dir", dir)
	require.NoError(t, err, "%s", stderr)
	require.Contains(t, out, "redacted default/c seq 3 (message.user")
	res, err := http.Get(p.httpURL + "/v1/threads/c?consistent=true")
	require.NoError(t, err)
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(b), `"keep"`)
	require.Contains(t, string(b), events.RedactedText)
	require.NotContains(t, string(b), "drop me")
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
)

// agentd serve signs checkpoints with the data directory's key;
// `agentd audit verify` beside it verifies clean (exit 0), and fails with
// exit code 1 naming the sequence once events are purged behind convlog's
// back; `agentd audit key` prints the key serve published.
func TestAuditVerifyCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--workers", "0")
	post := func(path, body string) map[string]any {
		res, err := http.Post(p.httpURL+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer res.Body.Close()
		require.Less(t, res.StatusCode, 300, path)
		var out map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return out
	}
	post("/v1/threads", `{"id":"t1","replies":"off"}`)
	for i := range 5 {
		post("/v1/threads/t1/events", `{"events":[{"type":"message.user","payload":{"content":"m`+strconv.Itoa(i)+`"}}]}`)
	}
	var rep audit.Report
	require.Eventually(t, func() bool {
		out, _, err := runCLIFull(t, "audit", "verify", "--data-dir", dir, "--json")
		rep = audit.Report{}
		return err == nil && json.Unmarshal([]byte(out), &rep) == nil && rep.OK && rep.Verified == 6 && rep.Unsigned == 0
	}, 30*time.Second, 200*time.Millisecond, "a clean verification of 6 events: %+v", rep)

	// The checkpointer's metrics.
	res, err := http.Get(p.httpURL + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Regexp(t, `(?m)^convlog_audit_checkpoints_total [1-9]`, string(body))
	require.Regexp(t, `(?m)^convlog_audit_checkpointed_events_total ([6-9]|[1-9][0-9]+)$`, string(body))
	require.Regexp(t, `(?m)^convlog_audit_covered_seq [1-9]`, string(body))
	// The projector's held triggers, by partition (none held once idle).
	require.Regexp(t, `(?m)^convlog_projector_held_triggers\{partition="0"\} [0-9]+$`, string(body))
	require.Regexp(t, `(?m)^convlog_projector_held_bytes\{partition="0"\} [0-9]+$`, string(body))

	// --state-file keeps the last verified checkpoint and requires it in
	// the next run: a log rewritten since (here: an anchor that the
	// stream does not hold) fails.
	state := filepath.Join(t.TempDir(), "audit-state.json")
	_, stderr, err := runCLIFull(t, "audit", "verify", "--data-dir", dir, "--state-file", state)
	require.NoError(t, err, stderr)
	kept, err := os.ReadFile(state)
	require.NoError(t, err)
	require.Contains(t, string(kept), `"msg_seq":`)
	_, stderr, err = runCLIFull(t, "audit", "verify", "--data-dir", dir, "--state-file", state)
	require.NoError(t, err, "the anchor kept is in the stream: %s", stderr)
	var a audit.Anchor
	require.NoError(t, json.Unmarshal(kept, &a))
	a.Hash = strings.Repeat("0", 64)
	forged, err := json.Marshal(a)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(state, forged, 0o600))
	stdout, _, err := runCLIFull(t, "audit", "verify", "--data-dir", dir, "--state-file", state)
	require.Error(t, err)
	require.Contains(t, stdout, "anchor-not-found")
	after, err := os.ReadFile(state)
	require.NoError(t, err)
	require.Equal(t, string(forged), string(after), "a failed run keeps the state file as it was")

	out, _, err := runCLIFull(t, "audit", "key", "--data-dir", dir)
	require.NoError(t, err)
	res, err = http.Get(p.httpURL + "/v1/audit/key")
	require.NoError(t, err)
	var k struct {
		PublicKey string `json:"public_key"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&k))
	res.Body.Close()
	require.Equal(t, k.PublicKey, strings.SplitN(out, "\n", 2)[0])

	nc, err := nats.Connect(p.natsURL, mustNKey(t, filepath.Join(dir, "credentials", "agentd.nk")))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), "CONVLOG")
	require.NoError(t, err)
	first, err := st.GetMsg(context.Background(), 1, jetstream.WithGetMsgSubject("conv.default.t1"))
	require.NoError(t, err)
	require.NoError(t, st.Purge(context.Background(), jetstream.WithPurgeSubject("conv.default.t1"), jetstream.WithPurgeSequence(first.Sequence+1)))

	stdout, stderr, err = runCLIFull(t, "audit", "verify", "--data-dir", dir)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "exit status: %v\n%s\n%s", err, stdout, stderr)
	require.Equal(t, 1, exit.ExitCode())
	require.Contains(t, stdout, "FAILED: 1 problem(s), the first at stream sequence "+strconv.FormatUint(first.Sequence, 10))
	require.Contains(t, stdout, "missing")
	require.True(t, bytes.Contains([]byte(stderr), []byte("verification failed")), stderr)
}

func mustNKey(t *testing.T, seed string) nats.Option {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(seed)
	require.NoError(t, err)
	return o
}

// The checkpoint subject purged beside a running agentd serve: `agentd
// audit verify` (no state file, no anchor) fails with exit code 1 once the
// events are older than the cadence allows, naming them uncovered; after
// the next event, serve's checkpointer goes on from its position rather
// than signing the old events again, and verify names the broken
// checkpoint chain too.
func TestAuditVerifyFailsWhenTheCheckpointsArePurged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--workers", "0")
	post := func(path, body string) { p.postOK(t, path, body) }
	post("/v1/threads", `{"id":"t1","replies":"off"}`)
	for i := range 3 {
		post("/v1/threads/t1/events", `{"events":[{"type":"message.user","payload":{"content":"m`+strconv.Itoa(i)+`"}}]}`)
	}
	verifyJSON := func() (audit.Report, error) {
		out, _, err := runCLIFull(t, "audit", "verify", "--data-dir", dir, "--json")
		var rep audit.Report
		if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
			return rep, errors.Join(err, jerr)
		}
		return rep, err
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep, err := verifyJSON()
		require.NoError(c, err)
		require.True(c, rep.OK && rep.Verified == 4 && rep.Unsigned == 0, "%+v", rep)
	}, 30*time.Second, 200*time.Millisecond, "a clean verification of 4 events")

	nc, err := nats.Connect(p.natsURL, mustNKey(t, filepath.Join(dir, "credentials", "agentd.nk")))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), "CONVLOG")
	require.NoError(t, err)
	require.NoError(t, st.Purge(context.Background(), jetstream.WithPurgeSubject(audit.CheckpointSubject(""))))
	first, err := st.GetMsg(context.Background(), 1, jetstream.WithGetMsgSubject("conv.default.t1"))
	require.NoError(t, err)

	var stdout, stderr string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		stdout, stderr, err = runCLIFull(t, "audit", "verify", "--data-dir", dir)
		var exit *exec.ExitError
		require.True(c, errors.As(err, &exit) && exit.ExitCode() == 1, "exit status %v\n%s\n%s", err, stdout, stderr)
	}, 60*time.Second, 200*time.Millisecond, "verify fails once the checkpoints are gone")
	require.Contains(t, stdout, "FAILED: 1 problem(s), the first at stream sequence "+strconv.FormatUint(first.Sequence, 10))
	require.Contains(t, stdout, "0 checkpoint(s)")
	require.Contains(t, stdout, audit.KindUncovered)
	require.Contains(t, stderr, "verification failed")
	require.Contains(t, stderr, audit.KindUncovered)

	post("/v1/threads/t1/events", `{"events":[{"type":"message.user","payload":{"content":"after the purge"}}]}`)
	var rep audit.Report
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep, err = verifyJSON()
		require.True(c, rep.Checkpoints == 1 && rep.Unsigned == 0, "a checkpoint of the new event: %v %+v", err, rep)
	}, 30*time.Second, 200*time.Millisecond)
	require.False(t, rep.OK)
	require.EqualValues(t, 1, rep.Verified, "only the event after the purge is signed: %+v", rep.Problems)
	require.Equal(t, first.Sequence, rep.FirstBadSeq)
	kinds := map[string]bool{}
	for _, pr := range rep.Problems {
		kinds[pr.Kind] = true
	}
	require.Equal(t, map[string]bool{audit.KindUncovered: true, audit.KindCheckpointChain: true}, kinds, "%+v", rep.Problems)
}

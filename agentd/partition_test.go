package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/natstest"
)

// agentd serve --partitions 3 on a new data directory: the demo agent
// answers threads of every partition (a worker pool per partition), the
// HTTP API lists them across partitions and streams one's log, the
// projectors and audit checkpointers of every partition run (`agentd audit
// verify` verifies all of them), and a restart without --partitions keeps
// the recorded 3 while --partitions 2 is refused with a clear error; a
// tenant-scoped NATS user (agentd tenant create) appends to and reads
// threads of each partition and lists them.
func TestServeWithPartitions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--partitions", "3")
	c := connectServe(t, p)
	require.Len(t, c.Partitions(), 3)
	ctx := context.Background()

	const n = 9
	threads := make([]string, n)
	seen := map[int]bool{}
	for i := range threads {
		_, threads[i], _, _ = c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
		require.NotEmpty(t, threads[i])
		p.ok(t, http.MethodPost, "/v1/threads/"+threads[i]+"/events", `{"events":[{"type":"message.user","payload":{"content":"what is 6*7?"}}]}`)
		seen[events.Partition(events.DefaultTenant, threads[i], 3)] = true
	}
	for _, th := range threads {
		got := waitAnswered(t, c, th, 1)
		require.Contains(t, got.Messages[len(got.Messages)-1].Content.String(), "42")
	}
	// With 9 random thread ids, all three partitions are used almost
	// always; the test needs at least two.
	require.GreaterOrEqual(t, len(seen), 2, "threads in partitions %v", seen)

	// The listing merges the partitions' index buckets.
	require.Eventually(t, func() bool {
		code, b := p.call(t, http.MethodGet, "/v1/threads?limit=100", "")
		var page client.ListPage
		return code == 200 && json.Unmarshal(b, &page) == nil && len(page.Threads) == n
	}, 30*time.Second, 100*time.Millisecond, "the HTTP listing does not show the %d threads", n)
	// The log of a thread of the last partition over HTTP (the SSE route's
	// reader, events as JSON).
	code, b := p.call(t, http.MethodGet, "/v1/threads/"+threads[n-1]+"/events", "")
	require.Equal(t, 200, code, "%s", b)
	require.Contains(t, string(b), "what is 6*7?")

	// Every partition is checkpointed and verifies.
	var rep audit.Report
	require.Eventually(t, func() bool {
		out, _, err := runCLIFull(t, "audit", "verify", "--data-dir", dir, "--json")
		rep = audit.Report{}
		return err == nil && json.Unmarshal([]byte(out), &rep) == nil && rep.OK && rep.Unsigned == 0 && rep.Threads == n
	}, 30*time.Second, 200*time.Millisecond, "a clean verification of every partition: %+v", rep)
	require.Len(t, rep.Partitions, 3)
	out, _, err := runCLIFull(t, "audit", "verify", "--data-dir", dir, "--json", "--tenant", events.DefaultTenant, "--thread", threads[0])
	require.NoError(t, err, out)
	require.Contains(t, out, `"ok": true`)

	// K is the deployment's.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "agentd exit after SIGTERM\n%s", p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("agentd did not stop after SIGTERM\n%s", p.log())
	}
	_, stderr, err := runCLIFull(t, "serve", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--partitions", "2")
	require.Error(t, err)
	require.Contains(t, stderr, "the deployment has 3 partitions (KV convlog_config, key partitions) but 2 were asked for")
	p2 := startServe(t, dir)
	c2 := connectServe(t, p2)
	require.Len(t, c2.Partitions(), 3)
	for _, th := range threads {
		got, err := c2.Get(ctx, events.DefaultTenant, th, client.Consistent())
		require.NoError(t, err)
		require.Equal(t, th, got.Thread)
	}
	// agentd stream info shows every partition.
	out, stderr, err = runCLIFull(t, "stream", "info", "--json", "--data-dir", dir)
	require.NoError(t, err, stderr)
	var info struct {
		Partitions []struct {
			Stream struct {
				Name     string `json:"name"`
				Messages uint64 `json:"messages"`
			} `json:"stream"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &info), out)
	require.Len(t, info.Partitions, 3)
	require.Equal(t, "CONVLOG_P2", info.Partitions[2].Stream.Name)

	// A tenant-scoped user works on every partition of its tenant.
	seed := filepath.Join(t.TempDir(), "acme.nk")
	_, stderr, err = runCLIFull(t, "tenant", "create", "acme", "--data-dir", dir, "--out", seed)
	require.NoError(t, err, stderr)
	auth, err := nats.NkeyOptionFromSeed(seed)
	require.NoError(t, err)
	var nc *nats.Conn
	require.Eventually(t, func() bool {
		nc, err = nats.Connect(p2.natsURL, auth, nats.CustomInboxPrefix(client.TenantInboxPrefix("acme")), nats.MaxReconnects(0))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "connect as the new user: %v", err)
	defer nc.Close()
	ac, err := client.New(ctx, nc, client.Config{Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, ac.Partitions(), 3)
	used := map[int]bool{}
	for i := 0; len(used) < 3; i++ {
		th := fmt.Sprintf("mine-%d", i)
		part := events.Partition("acme", th, 3)
		if used[part] {
			continue
		}
		used[part] = true
		_, _, v, err := ac.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: th, ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
		require.NoError(t, err, "partition %d", part)
		r, err := ac.Append(ctx, "acme", th, []events.Event{{Payload: events.UserMessage{Content: events.Text("hello " + th)}}}, client.ExpectVersion(v))
		require.NoError(t, err)
		got, err := ac.Get(ctx, "acme", th, client.Consistent())
		require.NoError(t, err, "partition %d", part)
		require.Equal(t, r.Version, got.Version)
		require.Equal(t, "hello "+th, got.Messages[0].Content.Text)
	}
	require.Eventually(t, func() bool {
		page, err := ac.List(ctx, "acme", client.ListOptions{})
		return err == nil && len(page.Threads) == 3
	}, 30*time.Second, 50*time.Millisecond, "the scoped listing over the partitions")
	_, err = ac.Get(ctx, events.DefaultTenant, threads[0])
	require.ErrorIs(t, err, events.ErrOtherTenant)
}

// agentd serve --nats-url started before its NATS server listens waits for
// it (no server answering is retried for a minute) instead of exiting.
func TestServeWaitsForItsNATSServer(t *testing.T) {
	port := natstest.FreePort(t)
	bin, err := buildOnce()
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve", "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", port), "--http-addr", "", "--workers", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
	cmd.Stdout = cmd.Stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	logged := func(s string) bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(out.String(), s) }
	require.Eventually(t, func() bool { return logged("no NATS server answers yet") }, 10*time.Second, 20*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("agentd exited while its server was not up: %v\n%s", err, out.String())
	default:
	}
	natstest.RunConfig(t, embedded.Config{Host: "127.0.0.1", Port: port})
	require.Eventually(t, func() bool { return logged("agentd ready") }, 30*time.Second, 50*time.Millisecond, "serve did not start once NATS listened")
}

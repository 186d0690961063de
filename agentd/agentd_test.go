package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// buildAgentd builds the agentd binary once per test binary run.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "agentd-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "agentd")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
})

// proc is a running `agentd serve`.
type proc struct {
	cmd     *exec.Cmd
	natsURL string
	httpURL string // http://host:port of the HTTP API
	dataDir string
	out     *strings.Builder
	mu      *sync.Mutex
	done    chan error    // the exit of cmd.Wait, sent once
	exited  chan struct{} // closed once cmd.Wait returned
}

// postOK posts the JSON body to p's HTTP API at path and requires a 2xx
// answer.
func (p *proc) postOK(t *testing.T, path, body string) {
	t.Helper()
	res, err := http.Post(p.httpURL+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	res.Body.Close()
	require.Less(t, res.StatusCode, 300, path)
}

func startServe(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	args := append([]string{"serve", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--log-level", "debug"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &proc{cmd: cmd, dataDir: dataDir, out: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan error, 1), exited: make(chan struct{})}
	cmd.Stderr = writerFunc(func(b []byte) (int, error) { p.mu.Lock(); defer p.mu.Unlock(); return p.out.Write(b) })
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		// cmd.ProcessState is written by the Wait goroutine: read the exit
		// through p.exited, never that field.
		select {
		case <-p.exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "HTTP API:"); ok {
				p.mu.Lock()
				p.httpURL = strings.TrimSuffix(strings.TrimSpace(rest), "/v1/threads")
				p.mu.Unlock()
			}
			if strings.HasPrefix(strings.TrimSpace(line), "NATS:") {
				urlc <- strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "NATS:"))
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		err := cmd.Wait()
		close(p.exited)
		p.done <- err
	}()
	select {
	case p.natsURL = <-urlc:
	case err := <-p.done:
		t.Fatalf("agentd exited before it was ready: %v\n%s", err, p.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("agentd not ready after 60s\n%s", p.log())
	}
	return p
}

// call sends method path with a JSON body (and headers given as name,
// value pairs) to p's HTTP API and returns the status and the body.
func (p *proc) call(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, p.httpURL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, b
}

// ok is call for a request that must succeed (2xx); it returns the body.
func (p *proc) ok(t *testing.T, method, path, body string) []byte {
	t.Helper()
	code, b := p.call(t, method, path, body)
	require.Less(t, code, 300, "%s %s: %s", method, path, b)
	return b
}

func (p *proc) log() string { p.mu.Lock(); defer p.mu.Unlock(); return p.out.String() }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func connectClient(t *testing.T, url string, opts ...nats.Option) *client.Client {
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c, err := client.New(context.Background(), nc, client.Config{})
	require.NoError(t, err)
	return c
}

// finalAnswers counts user messages and final assistant answers (assistant
// messages without tool calls) and checks each user message got exactly one.
func finalAnswers(th *client.Thread) (users, finals int, ok bool) {
	ok = true
	open := false
	for _, m := range th.Messages {
		switch {
		case m.Role == events.RoleUser:
			if open {
				ok = false
			}
			users++
			open = true
		case m.Role == events.RoleAssistant && len(m.ToolCalls) == 0:
			if !open {
				ok = false
			}
			finals++
			open = false
		}
	}
	return users, finals, ok && !open
}

func waitAnswered(t *testing.T, c *client.Client, thread string, users int) *client.Thread {
	t.Helper()
	var th *client.Thread
	require.Eventually(t, func() bool {
		var err error
		th, err = c.Get(context.Background(), events.DefaultTenant, thread, client.Consistent())
		if err != nil {
			return false
		}
		u, f, ok := finalAnswers(th)
		return ok && u == users && f == users
	}, 60*time.Second, 20*time.Millisecond, "thread %s not answered", thread)
	require.Zero(t, th.RejectedCount)
	require.Empty(t, th.Pending)
	return th
}

// agentd serve on a fresh data dir answers a conversation (with a tool
// call), stops cleanly on SIGTERM, restarts on the same data, and the thread
// is intact with the next answer appended.
func TestServeAnswersSurvivesRestart(t *testing.T) {
	data := t.TempDir()
	p := startServe(t, data)
	c := connectServe(t, p)
	ctx := context.Background()
	_, thread, v, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
	require.NoError(t, err)
	_, err = c.Append(ctx, events.DefaultTenant, thread, []events.Event{{Payload: events.UserMessage{Content: events.Text("what is 6*7?")}}}, client.ExpectVersion(v))
	require.NoError(t, err)
	th := waitAnswered(t, c, thread, 1)
	require.Contains(t, th.Messages[len(th.Messages)-1].Content.String(), "42")
	before := len(th.Messages)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "agentd exit after SIGTERM\n%s", p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("agentd did not stop after SIGTERM\n%s", p.log())
	}

	p2 := startServe(t, data)
	c2 := connectServe(t, p2)
	th2, err := c2.Get(ctx, events.DefaultTenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Len(t, th2.Messages, before)
	_, err = c2.Append(ctx, events.DefaultTenant, thread, []events.Event{{Payload: events.UserMessage{Content: events.Text("hello again")}}}, client.ExpectVersion(th2.Version))
	require.NoError(t, err)
	th3 := waitAnswered(t, c2, thread, 2)
	require.Equal(t, th.Messages, th3.Messages[:before], "history before the restart is unchanged")
	// The snapshot (projector) agrees with the log.
	require.Eventually(t, func() bool {
		snap, err := c2.Get(ctx, events.DefaultTenant, thread)
		return err == nil && snap.Version == th3.Version
	}, 30*time.Second, 20*time.Millisecond)
}

// A worker process killed with SIGKILL in the middle of turns with tool
// calls: after a restart every user message has exactly one complete answer
// and the history is valid.
func TestServeKilledMidTurnAnswersOnce(t *testing.T) {
	data := t.TempDir()
	args := []string{"--token-delay", "3ms", "--worker-ack-wait", "2s"}
	p := startServe(t, data, args...)
	c := connectServe(t, p)
	ctx := context.Background()
	var threads []string
	for i := 0; i < 3; i++ {
		_, thread, v, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
		require.NoError(t, err)
		_, err = c.Append(ctx, events.DefaultTenant, thread, []events.Event{{Payload: events.UserMessage{
			Content: events.Text("what time is it? and what is 3*(4+5)? remember the color is blue")}}}, client.ExpectVersion(v))
		require.NoError(t, err)
		threads = append(threads, thread)
	}
	// Kill as soon as the first turn has streamed something.
	require.Eventually(t, func() bool {
		th, err := c.Get(ctx, events.DefaultTenant, threads[0], client.Consistent())
		return err == nil && len(th.Messages) >= 2
	}, 30*time.Second, 2*time.Millisecond)
	require.NoError(t, syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL))
	<-p.done

	p2 := startServe(t, data, args...)
	c2 := connectServe(t, p2)
	for _, th := range threads {
		got := waitAnswered(t, c2, th, 1)
		var calls, results int
		for _, m := range got.Messages {
			calls += len(m.ToolCalls)
			if m.Role == events.RoleTool {
				results++
			}
		}
		require.Equal(t, calls, results, "every call answered once")
		require.Equal(t, 3, calls)
	}
}

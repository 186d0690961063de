//go:build cluster

package clustertest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
)

// freePort returns a loopback TCP port that was free a moment ago, outside
// the kernel's ephemeral range (natstest.FreePort).
func freePort(t testing.TB) int {
	t.Helper()
	return natstest.FreePort(t)
}

// proc is a child process in its own process group, logging to a file that
// each start appends to. It can be stopped and started again.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string

	// restartPolicy restarts the process a second after it exits unless
	// it was stopped on purpose (compose's "restart: unless-stopped").
	restartPolicy bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	halted bool     // stopped on purpose
	exits  []string // unexpected exits (restartPolicy)
}

func newProc(t testing.TB, dir, name, bin string, args, env []string) *proc {
	p := &proc{name: name, bin: bin, args: args, env: env, log: filepath.Join(dir, name+".log")}
	t.Cleanup(func() {
		p.kill(syscall.SIGKILL)
		p.wait(10 * time.Second)
		if t.Failed() {
			t.Logf("---- last lines of %s (%s) ----\n%s", name, p.log, tail(p.log, 40))
		}
		if keep := os.Getenv("CLUSTERTEST_KEEP_LOGS"); keep != "" {
			// A directory to copy the processes' logs to, for debugging.
			if b, err := os.ReadFile(p.log); err == nil && os.MkdirAll(keep, 0o755) == nil {
				_ = os.WriteFile(filepath.Join(keep, name+".log"), b, 0o644)
			}
		}
	})
	return p
}

// start starts the process; it must not be running.
func (p *proc) start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Nil(t, p.cmd, "%s is already running", p.name)
	p.halted = false
	require.NoError(t, p.startLocked(), "start %s", p.name)
}

func (p *proc) startLocked() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "==== %s: start %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "==== %s: exit: %v\n", time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.err, p.cmd = err, nil
		close(done)
		if p.restartPolicy && !p.halted {
			// What compose's "restart: unless-stopped" does.
			p.exits = append(p.exits, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
			time.AfterFunc(time.Second, func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				if p.cmd == nil && !p.halted {
					_ = p.startLocked()
				}
			})
		}
	}()
	return nil
}

// unexpectedExits lists the exits the restart policy restarted.
func (p *proc) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.exits)
}

// kill sends sig to the process group, if the process runs. The restart
// policy does not restart it.
func (p *proc) kill(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.halted = true
	if p.cmd != nil && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// wait waits up to d for the process to exit and reports whether it did
// (true when it was not running).
func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// running reports whether the process runs.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// stop sends sig and waits for the exit (then SIGKILL, so it always ends).
func (p *proc) stop(t testing.TB, sig syscall.Signal, d time.Duration) {
	t.Helper()
	p.kill(sig)
	if !p.wait(d) {
		p.kill(syscall.SIGKILL)
		require.True(t, p.wait(10*time.Second), "%s did not exit after SIGKILL", p.name)
		t.Errorf("%s did not exit within %s of %s", p.name, d, sig)
	}
}

// logContains reports whether the process's log holds s.
func (p *proc) logContains(s string) bool {
	b, err := os.ReadFile(p.log)
	return err == nil && bytes.Contains(b, []byte(s))
}

// countLines counts log lines that contain every one of subs.
func countLines(path string, subs ...string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		for _, s := range subs {
			if !strings.Contains(sc.Text(), s) {
				continue lines
			}
		}
		n++
	}
	return n
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// poll calls cond every interval until it returns nil or d has passed, and
// returns cond's last error (nil on success).
func poll(d, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", d, err)
		}
		time.Sleep(interval)
	}
}

var errNotYet = errors.New("not yet")

// waitLog waits up to d for p's log to hold line, failing t with the
// log's tail otherwise.
func waitLog(t testing.TB, p *proc, line string, d time.Duration) {
	t.Helper()
	require.NoError(t, poll(d, 50*time.Millisecond, func() error {
		if !p.logContains(line) {
			return errNotYet
		}
		return nil
	}), "%s did not log %q: %s", p.name, line, tail(p.log, 20))
}

// newAdminSeed writes a new NKey user's seed to dir/admin.nk and returns
// its public key and the file.
func newAdminSeed(t testing.TB, dir string) (pub, file string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, _ = kp.PublicKey()
	seed, _ := kp.Seed()
	file = filepath.Join(dir, "admin.nk")
	require.NoError(t, os.WriteFile(file, seed, 0o600))
	return pub, file
}

// startNATSAndServe starts nats-server with conf (named name+"-nats")
// and, once it is ready, `agentd serve` against url with args added
// (name+"-agentd", no workers, no HTTP), and waits until its projector
// started.
func startNATSAndServe(t testing.TB, dir, name, natsBin, agentdBin, conf, url string, args ...string) (ns, agent *proc) {
	t.Helper()
	ns = newProc(t, dir, name+"nats", natsBin, []string{"-c", conf}, nil)
	ns.start(t)
	// agentd exits when no server answers its first connect: start it
	// once the server listens.
	waitLog(t, ns, "Server is ready", 30*time.Second)
	agent = newProc(t, dir, name+"agentd", agentdBin, append([]string{"serve", "--nats-url", url, "--workers", "0", "--http-addr", ""}, args...), nil)
	agent.start(t)
	waitLog(t, agent, "projector started", 60*time.Second)
	return ns, agent
}

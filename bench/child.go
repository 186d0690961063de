package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/projector"
)

// The memory section runs the server, the projector and the worker each in
// a process of its own (this binary, re-executed with childEnv set to the
// role), so that each one's RSS and heap are its own.
const (
	childEnv    = "CONVLOG_BENCH_CHILD"
	childURLEnv = "CONVLOG_BENCH_URL"
	childDirEnv = "CONVLOG_BENCH_DIR"
	// childIDsEnv names a file of thread ids (one per line, tenant
	// tenant) that a reader child reads.
	childIDsEnv = "CONVLOG_BENCH_IDS"
	// profileEnv, when set to a directory, makes each child write a CPU
	// profile there (<role>.cpu.pprof); -profile sets it.
	profileEnv = "CONVLOG_BENCH_PROFILE"

	roleServer    = "server"
	roleProjector = "projector"
	roleWorker    = "worker"
	// roleReader is a client (client.New) that answers "read N" by
	// getting the next N threads of its ids file (round robin, 8 at a
	// time), as a reading service would.
	roleReader = "reader"
)

// ChildMem is what a child reports of its memory: the Go runtime's view
// after a GC (runtime.ReadMemStats) and the kernel's (/proc/self/status).
type ChildMem struct {
	Role       string `json:"role"`
	URL        string `json:"url,omitempty"`
	HeapInuse  uint64 `json:"heap_inuse"` // bytes in in-use heap spans after GC
	HeapAlloc  uint64 `json:"heap_alloc"` // live heap objects after GC
	GoSys      uint64 `json:"go_sys"`     // everything the Go runtime got from the OS
	RSS        uint64 `json:"rss"`        // VmRSS
	HWM        uint64 `json:"hwm"`        // VmHWM: peak RSS
	Goroutines int    `json:"goroutines"`
	Turns      int64  `json:"turns"` // worker: turns answered; reader: threads read
	// KVBytes is what the projector wrote to KV since it started
	// (projector.Projector.KVWritten: heads, chunks, deltas and index
	// entries as stored); 0 for other roles.
	KVBytes uint64 `json:"kv_bytes,omitempty"`
	Err     string `json:"err,omitempty"`
}

// isChild reports whether this process is a memory-section child.
func isChild() bool { return os.Getenv(childEnv) != "" }

// childMain runs the role named by childEnv until stdin says "quit" or
// closes, answering "mem" with a ChildMem line on stdout.
func childMain() int {
	role := os.Getenv(childEnv)
	out := json.NewEncoder(os.Stdout)
	fail := func(err error) int {
		_ = out.Encode(ChildMem{Role: role, Err: err.Error()})
		return 1
	}
	if dir := os.Getenv(profileEnv); dir != "" {
		stop, err := startCPUProfile(filepath.Join(dir, role+".cpu.pprof"))
		if err != nil {
			return fail(err)
		}
		defer stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg    sync.WaitGroup
		turns atomic.Int64
		url   = os.Getenv(childURLEnv)
		stop  func()
	)
	switch role {
	case roleServer:
		srv, err := embedded.Start(embedded.Config{StoreDir: os.Getenv(childDirEnv)})
		if err != nil {
			return fail(err)
		}
		url, stop = srv.ClientURL(), srv.Shutdown
	case roleProjector, roleWorker, roleReader:
		nc, err := nats.Connect(url, nats.Name("convlog-bench-"+role))
		if err != nil {
			return fail(err)
		}
		defer nc.Close()
		ready, run, err := childPart(ctx, role, nc, &turns)
		if err != nil {
			return fail(err)
		}
		var runErr error
		wg.Go(func() { runErr = run(ctx) })
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			return fail(fmt.Errorf("%s not ready after 30s", role))
		}
		stop = func() {
			cancel()
			wg.Wait()
			if runErr != nil {
				fmt.Fprintf(os.Stderr, "bench child %s: %v\n", role, runErr)
			}
		}
	default:
		return fail(fmt.Errorf("unknown role %q", role))
	}
	defer stop()
	if err := out.Encode(ChildMem{Role: role, URL: url}); err != nil {
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	samples := 0
	for in.Scan() {
		switch in.Text() {
		case "mem":
			m := readMem(role)
			if kvWritten != nil {
				m.KVBytes = kvWritten()
			}
			if dir := os.Getenv(profileEnv); dir != "" {
				if err := writeHeapProfile(filepath.Join(dir, fmt.Sprintf("%s.heap.%d.pprof", role, samples))); err != nil {
					m.Err = err.Error()
				}
				samples++
			}
			m.Turns = turns.Load()
			_ = out.Encode(m)
		case "turns":
			_ = out.Encode(ChildMem{Role: role, Turns: turns.Load()})
		case "quit":
			return 0
		default:
			if n, ok := strings.CutPrefix(in.Text(), "read "); ok && readThreads != nil {
				k, err := strconv.Atoi(n)
				if err == nil {
					err = readThreads(ctx, k, &turns)
				}
				m := ChildMem{Role: role, Turns: turns.Load()}
				if err != nil {
					m.Err = err.Error()
				}
				_ = out.Encode(m)
			}
		}
	}
	return 0
}

// writeHeapProfile writes the heap profile of this process to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startCPUProfile writes a CPU profile to path (<name>.cpu.pprof) until
// the returned function is called, which also writes the process's
// allocation profile to <name>.allocs.pprof.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		// The allocations of the whole run beside it (what drives the
		// garbage collector: go tool pprof -sample_index=alloc_space).
		if a, err := os.Create(strings.TrimSuffix(path, ".cpu.pprof") + ".allocs.pprof"); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
		}
	}, nil
}

// readThreads is the reader child's "read N" (set by childPart).
var readThreads func(ctx context.Context, n int, done *atomic.Int64) error

// childPart builds the projector or the worker pool of a child.
// kvWritten reports what the projector child wrote to KV so far (nil in
// other roles).
var kvWritten func() uint64

func childPart(ctx context.Context, role string, nc *nats.Conn, turns *atomic.Int64) (<-chan struct{}, func(context.Context) error, error) {
	if role == roleProjector {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, nil, err
		}
		p, err := projector.New(js, projector.Config{})
		if err != nil {
			return nil, nil, err
		}
		kvWritten = func() uint64 { return p.KVWritten().Bytes() }
		return p.Ready(), p.Run, nil
	}
	c, err := client.New(ctx, nc, client.Config{})
	if err != nil {
		return nil, nil, err
	}
	if role == roleReader {
		b, err := os.ReadFile(os.Getenv(childIDsEnv))
		if err != nil {
			return nil, nil, err
		}
		ids := strings.Fields(string(b))
		if len(ids) == 0 {
			return nil, nil, errors.New("reader: no thread ids")
		}
		next := 0
		readThreads = func(ctx context.Context, n int, done *atomic.Int64) error {
			var (
				wg    sync.WaitGroup
				slots = make(chan struct{}, 8)
				mu    sync.Mutex
				first error
			)
			for range n {
				id := ids[next%len(ids)]
				next++
				slots <- struct{}{}
				wg.Go(func() {
					defer func() { <-slots }()
					if _, err := c.Get(ctx, tenant, id); err != nil {
						mu.Lock()
						first = cmp.Or(first, fmt.Errorf("get %s: %w", id, err))
						mu.Unlock()
						return
					}
					done.Add(1)
				})
			}
			wg.Wait()
			return first
		}
		ready := make(chan struct{})
		close(ready)
		return ready, func(ctx context.Context) error { <-ctx.Done(); return nil }, nil
	}
	agents, err := demoAgents()
	if err != nil {
		return nil, nil, err
	}
	pool, err := worker.New(c, nc, worker.Config{Agents: agents, OnTurn: func(r worker.TurnResult) {
		if r.Outcome == "answered" {
			turns.Add(1)
		}
	}})
	if err != nil {
		return nil, nil, err
	}
	return pool.Ready(), pool.Run, nil
}

// readMem collects this process's memory figures after a GC.
func readMem(role string) ChildMem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := ChildMem{Role: role, HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, GoSys: ms.Sys, Goroutines: runtime.NumGoroutine()}
	m.RSS, m.HWM = procStatus()
	return m
}

// procStatus reads VmRSS and VmHWM of this process (0 where unavailable).
func procStatus() (rss, hwm uint64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// child is a running child process, seen from the parent.
type child struct {
	mu   sync.Mutex // one command at a time (ask)
	role string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *json.Decoder
	URL  string
}

// startChild re-executes this binary as role and waits for its first line.
func startChild(role, url, dir string, env ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+role, childURLEnv+"="+url, childDirEnv+"="+dir)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{role: role, cmd: cmd, in: in, out: json.NewDecoder(out)}
	first, err := c.read()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("%s child: %w", role, err)
	}
	c.URL = first.URL
	return c, nil
}

func (c *child) read() (ChildMem, error) {
	var m ChildMem
	if err := c.out.Decode(&m); err != nil {
		return m, err
	}
	if m.Err != "" {
		return m, errors.New(m.Err)
	}
	return m, nil
}

// mem asks the child for its memory figures.
func (c *child) mem() (ChildMem, error) { return c.ask("mem\n") }

// ask sends one command line and reads its answer; safe for concurrent
// use (one command at a time).
func (c *child) ask(line string) (ChildMem, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.in, line); err != nil {
		return ChildMem{}, err
	}
	return c.read()
}

// readThreads asks a reader child to get the next n threads of its ids file; it
// returns the threads read so far (Turns).
func (c *child) readThreads(n int) (ChildMem, error) {
	return c.ask(fmt.Sprintf("read %d\n", n))
}

// turns asks the child how many turns it answered (no GC).
func (c *child) turns() (ChildMem, error) { return c.ask("turns\n") }

// stop asks the child to quit and waits for it; after 30 s it is killed.
func (c *child) stop() {
	_, _ = io.WriteString(c.in, "quit\n")
	_ = c.in.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

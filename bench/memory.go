package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
)

// MemParams size the memory section.
type MemParams struct {
	Threads  int // threads loaded
	Messages int // messages per thread (user and assistant alternating)
	Content  int // content bytes per message
	// WorkerTurns is how many of the threads then get one more user
	// message, each answered by the worker (one turn per thread).
	WorkerTurns int
	// Reads is how many threads a client process (the reader child) then
	// gets, spread over all of them (0: no reader).
	Reads int
}

// MemResults are the memory section's figures: each part's memory, read
// in its own process (see child.go).
type MemResults struct {
	MemParams
	// Idle: started, nothing loaded. Loaded: after the history was
	// published and projected. After: after the worker's turns (and their
	// projection).
	ServerIdle, ProjectorIdle, WorkerIdle    ChildMem
	ServerLoaded, ProjectorLoaded            ChildMem
	ServerAfter, ProjectorAfter, WorkerAfter ChildMem
	// ReaderIdle: the reader child started (client.New); ReaderAfter:
	// after its Reads gets.
	ReaderIdle, ReaderAfter ChildMem
	ReadsTook               time.Duration
	Events                  int
	StreamBytes             uint64
	LoadTook, TurnsTook     time.Duration
	Turns                   int64
}

// RunMemory starts a fresh server, projector and worker, each in its own
// process, loads p.Threads threads of p.Messages messages (published like
// an import: each thread's events back to back, async), waits for the
// projector, then has the worker answer one new user message on
// p.WorkerTurns threads, and reads each process's memory along the way.
func RunMemory(ctx context.Context, root string, p MemParams, log func(string, ...any)) (*MemResults, error) {
	res := &MemResults{MemParams: p}
	d, err := startChildren(ctx, filepath.Join(root, "mem-nats"), "convlog-bench-loader")
	if err != nil {
		return nil, err
	}
	defer d.close()
	srv, proj, js, errs := d.srv, d.proj, d.js, &d.errs
	res.ServerIdle, res.ProjectorIdle = d.serverIdle, d.projectorIdle
	ids := make([]string, p.Threads)
	log("memory: loading %d threads of %d messages", p.Threads, p.Messages)
	start := time.Now()
	for t := range ids {
		ids[t] = events.NewID()
		subject := "conv." + tenant + "." + ids[t]
		m, err := rawMsg(subject, events.New(tenant, ids[t], producer, events.ThreadCreated{Agent: "demo"}))
		if err != nil {
			return nil, err
		}
		if err := publishAsync(ctx, js, m); err != nil {
			return nil, err
		}
		for i := range p.Messages {
			m, err := rawMsg(subject, events.New(tenant, ids[t], producer, message(i, p.Content)))
			if err != nil {
				return nil, err
			}
			if err := publishAsync(ctx, js, m); err != nil {
				return nil, err
			}
		}
		if (t+1)%max(p.Threads/10, 1) == 0 {
			log("memory: published %d/%d threads", t+1, p.Threads)
		}
	}
	if err := waitAsync(ctx, js); err != nil {
		return nil, err
	}
	res.Events = p.Threads * (p.Messages + 1)
	log("memory: published in %s; waiting for the projector", time.Since(start).Round(time.Millisecond))
	drainCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	if err := provision.WaitConsumerDrained(drainCtx, js, provision.DefaultConfig().Stream, projector.DefaultConfig().Durable); err != nil {
		return nil, err
	}
	res.LoadTook = time.Since(start)
	if n := errs.Load(); n > 0 {
		return nil, fmt.Errorf("memory: %d publishes failed", n)
	}
	if st, err := js.Stream(ctx, provision.DefaultConfig().Stream); err == nil {
		if info, err := st.Info(ctx); err == nil {
			res.StreamBytes = info.State.Bytes
		}
	}
	if res.ServerLoaded, err = srv.mem(); err != nil {
		return nil, err
	}
	if res.ProjectorLoaded, err = proj.mem(); err != nil {
		return nil, err
	}

	wrk, err := startChild(roleWorker, srv.URL, "")
	if err != nil {
		return nil, err
	}
	defer wrk.stop()
	if res.WorkerIdle, err = wrk.mem(); err != nil {
		return nil, err
	}
	log("memory: %d worker turns", p.WorkerTurns)
	start = time.Now()
	for t := range p.WorkerTurns {
		m, err := rawMsg("conv."+tenant+"."+ids[t], events.New(tenant, ids[t], producer, events.UserMessage{Content: events.Text("hello again")}))
		if err != nil {
			return nil, err
		}
		if err := publishAsync(ctx, js, m); err != nil {
			return nil, err
		}
	}
	if err := waitAsync(ctx, js); err != nil {
		return nil, err
	}
	for last := time.Now(); ; {
		m, err := wrk.turns()
		if err != nil {
			return nil, err
		}
		if m.Turns >= int64(p.WorkerTurns) {
			res.Turns = m.Turns
			break
		}
		if time.Since(last) > 10*time.Second {
			log("memory: %d/%d turns", m.Turns, p.WorkerTurns)
			last = time.Now()
		}
		select {
		case <-drainCtx.Done():
			return nil, fmt.Errorf("memory: %d of %d worker turns: %w", m.Turns, p.WorkerTurns, drainCtx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	res.TurnsTook = time.Since(start)
	if res.WorkerAfter, err = wrk.mem(); err != nil {
		return nil, err
	}
	if err := provision.WaitConsumerDrained(drainCtx, js, provision.DefaultConfig().Stream, projector.DefaultConfig().Durable); err != nil {
		return nil, err
	}
	if res.ProjectorAfter, err = proj.mem(); err != nil {
		return nil, err
	}
	if res.ServerAfter, err = srv.mem(); err != nil {
		return nil, err
	}
	if p.Reads > 0 {
		if err := readerRun(root, srv.URL, ids, p.Reads, res, log); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// readerRun starts a reader child on ids, has it get n threads spread
// over all of them and records its memory before and after in res.
func readerRun(root, url string, ids []string, n int, res *MemResults, log func(string, ...any)) error {
	step := max(len(ids)/n, 1)
	var spread []string
	for i := 0; i < len(ids) && len(spread) < n; i += step {
		spread = append(spread, ids[i])
	}
	rd, err := startReader(root, url, spread)
	if err != nil {
		return err
	}
	defer rd.stop()
	if res.ReaderIdle, err = rd.mem(); err != nil {
		return err
	}
	log("memory: a client reads %d threads", len(spread))
	start := time.Now()
	for done := 0; done < len(spread); done += 1000 {
		if _, err := rd.readThreads(min(1000, len(spread)-done)); err != nil {
			return err
		}
	}
	res.ReadsTook = time.Since(start)
	res.ReaderAfter, err = rd.mem()
	return err
}

// startReader writes ids to a file under root and starts a reader child
// on them.
func startReader(root, url string, ids []string) (*child, error) {
	f := filepath.Join(root, "reader-ids.txt")
	if err := os.WriteFile(f, []byte(strings.Join(ids, "\n")), 0o644); err != nil {
		return nil, err
	}
	return startChild(roleReader, url, "", childIDsEnv+"="+f)
}

// children are a server and a projector child (child.go) and the bench's
// connection to the server: a provisioned deployment whose processes'
// memory can be read.
type children struct {
	srv, proj *child
	nc        *nats.Conn
	// js publishes async; errs counts the publishes that failed.
	js   jetstream.JetStream
	errs atomic.Int64
	// serverIdle is the server's memory before anything connected,
	// projectorIdle the projector's once it consumes.
	serverIdle, projectorIdle ChildMem
}

// startChildren starts a server child storing in dir, connects to it as
// name, provisions it and starts a projector child.
func startChildren(ctx context.Context, dir, name string) (_ *children, err error) {
	d := &children{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.srv, err = startChild(roleServer, "", dir); err != nil {
		return nil, err
	}
	if d.serverIdle, err = d.srv.mem(); err != nil {
		return nil, err
	}
	if d.nc, err = nats.Connect(d.srv.URL, nats.Name(name)); err != nil {
		return nil, err
	}
	if _, err = client.New(ctx, d.nc, client.Config{Provision: true}); err != nil {
		return nil, err
	}
	if d.proj, err = startChild(roleProjector, d.srv.URL, ""); err != nil {
		return nil, err
	}
	if d.projectorIdle, err = d.proj.mem(); err != nil {
		return nil, err
	}
	d.js, err = jetstream.New(d.nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { d.errs.Add(1) }))
	return d, err
}

// close stops what startChildren started.
func (d *children) close() {
	if d.proj != nil {
		d.proj.stop()
	}
	if d.nc != nil {
		d.nc.Close()
	}
	if d.srv != nil {
		d.srv.stop()
	}
}

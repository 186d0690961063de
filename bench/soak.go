package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
)

// SoakParams size the soak section: a steady rate for
// a long time, the memory of each process sampled along the way.
type SoakParams struct {
	For     time.Duration // how long events are published
	Rate    int           // events per second, round robin over Threads
	Threads int
	Content int           // content bytes per message
	Every   time.Duration // sampling interval
	// ReadsPerSec is how many threads the reader child gets per second
	// (round robin over the same threads), as a reading service would.
	ReadsPerSec int
}

// SoakSample is the memory of every process at one point of the soak.
type SoakSample struct {
	At              time.Duration // since the first publish
	Published, Read int64
	// EventBytes are the bytes of the events published so far (as
	// stored); Projector.KVBytes / EventBytes is projection's write
	// amplification so far.
	EventBytes                uint64
	Server, Projector, Reader ChildMem
}

// SoakResults are the soak section's samples.
type SoakResults struct {
	SoakParams
	Samples []SoakSample
	// Base is the index in Samples the end is compared with: the sample
	// at a sixth of the run (minute 5 of 30).
	Base        int
	StreamBytes uint64
	Errors      int64
}

// RunSoak starts a server, a projector and a reader (a client process),
// each in its own process (see child.go), publishes p.Rate events per
// second round robin over p.Threads threads for p.For (plain async
// publishes, so that every thread grows: 1,800 messages per thread in the
// full run, chunks cut and merged along the way), has the reader get
// p.ReadsPerSec threads per second, and samples every process's memory
// every p.Every.
func RunSoak(ctx context.Context, root string, p SoakParams, log func(string, ...any)) (*SoakResults, error) {
	res := &SoakResults{SoakParams: p}
	d, err := startChildren(ctx, filepath.Join(root, "soak-nats"), "convlog-bench-soak")
	if err != nil {
		return nil, err
	}
	defer d.close()
	srv, proj, js, errs := d.srv, d.proj, d.js, &d.errs
	ids := make([]string, p.Threads)
	for i := range ids {
		ids[i] = events.NewID()
		m, err := rawMsg("conv."+tenant+"."+ids[i], events.New(tenant, ids[i], producer, events.ThreadCreated{Replies: events.RepliesOff}))
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
	drained := func() error {
		c, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		return provision.WaitConsumerDrained(c, js, provision.DefaultConfig().Stream, projector.DefaultConfig().Durable)
	}
	if err := drained(); err != nil {
		return nil, err
	}
	rd, err := startReader(root, srv.URL, ids)
	if err != nil {
		return nil, err
	}
	defer rd.stop()

	// The reader reads in its own goroutine, paced; a failed read ends
	// the soak.
	var read atomic.Int64
	readErr := make(chan error, 1)
	rctx, stopReads := context.WithCancel(ctx)
	defer stopReads()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				readErr <- nil
				return
			case <-t.C:
			}
			m, err := rd.readThreads(max(p.ReadsPerSec/10, 1))
			if err != nil {
				readErr <- err
				return
			}
			read.Store(m.Turns)
		}
	}()

	var eventBytes uint64
	sample := func(at time.Duration, published int64) error {
		s := SoakSample{At: at, Published: published, Read: read.Load(), EventBytes: eventBytes}
		var err error
		if s.Server, err = srv.mem(); err != nil {
			return err
		}
		if s.Projector, err = proj.mem(); err != nil {
			return err
		}
		if s.Reader, err = rd.mem(); err != nil {
			return err
		}
		res.Samples = append(res.Samples, s)
		log("soak: %s: %d published; projector heap %s RSS %s; reader heap %s RSS %s; server heap %s RSS %s; KV bytes per event byte %s",
			at.Round(time.Second), published, fmtBytes(s.Projector.HeapAlloc), fmtBytes(s.Projector.RSS),
			fmtBytes(s.Reader.HeapAlloc), fmtBytes(s.Reader.RSS), fmtBytes(s.Server.HeapAlloc), fmtBytes(s.Server.RSS),
			soakAmplification(s))
		return nil
	}
	if err := sample(0, 0); err != nil {
		return nil, err
	}
	log("soak: %d events/s over %d threads for %s", p.Rate, p.Threads, p.For)
	start := time.Now()
	next := p.Every
	sent, total := 0, int(float64(p.Rate)*p.For.Seconds())
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for now := start; sent < total; now = time.Now() {
		target := min(total, int(float64(p.Rate)*now.Sub(start).Seconds()))
		for ; sent < target; sent++ {
			i := sent % p.Threads
			m, err := rawMsg("conv."+tenant+"."+ids[i], events.New(tenant, ids[i], producer, message(sent/p.Threads, p.Content)))
			if err != nil {
				return nil, err
			}
			eventBytes += uint64(len(m.Data))
			if err := publishAsync(ctx, js, m); err != nil {
				return nil, err
			}
		}
		if now.Sub(start) >= next {
			if err := sample(now.Sub(start), int64(sent)); err != nil {
				return nil, err
			}
			next += p.Every
		}
		select {
		case <-tick.C:
		case err := <-readErr:
			return nil, fmt.Errorf("soak: reader: %w", err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := waitAsync(ctx, js); err != nil {
		return nil, err
	}
	if err := drained(); err != nil {
		return nil, err
	}
	stopReads()
	if err := <-readErr; err != nil {
		return nil, fmt.Errorf("soak: reader: %w", err)
	}
	if err := sample(time.Since(start), int64(sent)); err != nil {
		return nil, err
	}
	res.Errors = errs.Load()
	if st, err := js.Stream(ctx, provision.DefaultConfig().Stream); err == nil {
		if info, err := st.Info(ctx); err == nil {
			res.StreamBytes = info.State.Bytes
		}
	}
	// The base: the first sample at or after a sixth of the run.
	for i, s := range res.Samples {
		if s.At >= p.For/6 {
			res.Base = i
			break
		}
	}
	if res.Errors > 0 {
		return nil, fmt.Errorf("soak: %d publishes failed", res.Errors)
	}
	return res, nil
}

// growth is how much larger end is than base (0.1 = 10% larger; negative
// when smaller).
func growth(base, end uint64) float64 {
	if base == 0 {
		return 0
	}
	return float64(end)/float64(base) - 1
}

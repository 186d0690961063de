package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/memtune"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// LagParams size the projection lag section.
type LagParams struct {
	Rates   []int         // events/s
	For     time.Duration // measured time per rate
	Warmup  time.Duration // paced but not measured, before For
	Threads int           // threads the events are spread over, round robin
	Content int
	// Backlog is how many events are published, round robin over Threads
	// new threads, while the projector is stopped, to time its catch-up.
	Backlog int
	// SplitRates are rates run again, both kinds of publish, on a
	// deployment whose nats-server runs in a process of its own (as
	// deploy/ runs it) while the publisher and the projector stay in this
	// one: what the garbage collection of the server's heap (its block
	// cache) costs the projection when they share a process.
	SplitRates []int
}

// LagRow is one rate's figures.
type LagRow struct {
	Rate int
	// OCC is true when every event was published conditionally on its
	// thread's version (Nats-Expected-Last-Subject-Sequence), as
	// client.Append and agentd publish; false for plain publishes, as a
	// writer that bypasses the client might.
	OCC bool
	// Achieved is the publish rate reached in the measured window.
	Achieved float64
	// Published and Measured count the events of the measured window
	// published and seen projected.
	Published, Measured int
	// D is OnApply's Lag over the measured window's events.
	D Dist
	// Consumer is the limit D is judged against: the delivery lag (stream
	// timestamp to receipt) of the same window's events to a plain
	// consumer of the row's subjects (an ordered consumer on a connection
	// of its own, nothing decoded), running beside the projector.
	Consumer Dist
	// Allocs is the heap objects this process allocated per event of the
	// row (warm-up and window, until everything was projected): the
	// publisher's, the plain consumer's and the projector's, and the
	// server's unless Split
	// (runtime/metrics /gc/heap/allocs:objects).
	Allocs float64
	// MaxBehind is the most stream messages the projector's consumer had
	// not delivered yet (OnApply's Behind) in the window.
	MaxBehind uint64
	// Drain is how long after the last publish the projector needed to
	// project everything.
	Drain time.Duration
	// Errors counts failed publishes.
	Errors int
	// Split is true for a row run with the server in its own process
	// (LagParams.SplitRates).
	Split bool
	// GCCycles and GCCPU are the garbage collections of this process (the
	// publisher and the projector, and the server unless Split) during the
	// row's warm-up and window, and the CPU time they took
	// (runtime/metrics: /gc/cycles/total, /cpu/classes/gc/total).
	GCCycles uint64
	GCCPU    time.Duration
	// EventBytes are the bytes of the events published in the row
	// (warm-up and window), KV what the projector wrote to KV meanwhile
	// (until everything was projected): KV.Bytes() / EventBytes is the
	// write amplification of projection.
	EventBytes uint64
	KV         snapstore.Written
}

// Amplification is KV bytes written per byte of event.
func (r *LagRow) Amplification() float64 {
	if r.EventBytes == 0 {
		return 0
	}
	return float64(r.KV.Bytes()) / float64(r.EventBytes)
}

// LagResults are the projection lag section's rows and the catch-up.
type LagResults struct {
	Rows []*LagRow
	// CatchUp is the time the projector took, once restarted, to project
	// Backlog events (over Threads threads) published while it was stopped.
	Backlog, BacklogThreads int
	CatchUp                 time.Duration
	// Workers is the projector's Config.Workers in the run (its default;
	// 0 in the results of runs before it was recorded, which ran 8).
	Workers int
	// GOGC and MemoryLimit are the bench process's collector settings
	// during the section (memtune.Set's, as agentd serve runs; 0
	// in the results of runs before they were recorded, which ran Go's
	// defaults). MemoryLimit is in bytes.
	GOGC        int
	MemoryLimit int64
}

// workers is the projector's worker count in the run: 8 in the results of
// runs before Workers was recorded (the projector's default then).
func (l *LagResults) workers() int {
	if l == nil || l.Workers == 0 {
		return 8
	}
	return l.Workers
}

// RunLag publishes user messages at steady rates over many threads
// (paced async publishes of valid events, so the publisher is never the
// bottleneck) while the projector runs, and reports the projection lag
// each event saw (Config.OnApply: stream timestamp to head written).
//
// The section runs under agentd serve's collector settings
// (memtune.Set with its defaults: a soft memory limit and GOGC
// under it), since the projector's tail follows the collections of the
// heap it shares with the embedded server; the previous settings are put
// back when it returns.
func RunLag(ctx context.Context, e *Env, p LagParams, log func(string, ...any)) (*LagResults, error) {
	restore, err := memtune.Set(0, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	defer restore()
	res := &LagResults{Workers: projector.DefaultConfig().Workers}
	res.GOGC, res.MemoryLimit = collectorSettings()
	// Both kinds of publish at one rate before the next rate: a rate the
	// projector cannot hold (5,000/s) leaves the machine busier for a while
	// (garbage collection, the store compacting replaced heads), which
	// should not land on only one kind's figures at a lower rate.
	for _, rate := range p.Rates {
		for _, occ := range []bool{true, false} {
			how := "conditional publishes (OCC header)"
			if !occ {
				how = "plain publishes"
			}
			log("lag: %d events/s for %s (+%s warm-up) over %d threads, %s", rate, p.For, p.Warmup, p.Threads, how)
			row, err := lagAt(ctx, e, p, rate, occ, log)
			if err != nil {
				return nil, err
			}
			res.Rows = append(res.Rows, row)
		}
	}
	if p.Backlog > 0 {
		log("lag: catch-up of %d events over %d threads", p.Backlog, p.Threads)
		took, err := catchUp(ctx, e, p)
		if err != nil {
			return nil, err
		}
		res.Backlog, res.BacklogThreads, res.CatchUp = p.Backlog, p.Threads, took
	}
	if len(p.SplitRates) > 0 {
		rows, err := lagSplit(ctx, e.Dir+"-split", p, log)
		if err != nil {
			return nil, fmt.Errorf("server in its own process: %w", err)
		}
		res.Rows = append(res.Rows, rows...)
	}
	return res, nil
}

// collectorSettings reads this process's GOGC and soft memory limit in
// bytes (runtime/metrics).
func collectorSettings() (int, int64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}

// lagSplit runs p.SplitRates, both kinds of publish, on a new deployment in
// dir whose server is a child process, and removes dir afterwards.
func lagSplit(ctx context.Context, dir string, p LagParams, log func(string, ...any)) ([]*LagRow, error) {
	defer removeAll(dir)
	e, err := startEnv(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if err := e.StartProjector(ctx); err != nil {
		return nil, err
	}
	var rows []*LagRow
	for _, rate := range p.SplitRates {
		for _, occ := range []bool{true, false} {
			log("lag: %d events/s, nats-server in its own process, occ %v", rate, occ)
			row, err := lagAt(ctx, e, p, rate, occ, log)
			if err != nil {
				return nil, err
			}
			row.Split = true
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// gcSample reads this process's garbage-collection cycles and CPU time so
// far.
func gcSample() (uint64, time.Duration) {
	ms := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(ms)
	var cycles uint64
	var cpu float64
	if ms[0].Value.Kind() == metrics.KindUint64 {
		cycles = ms[0].Value.Uint64()
	}
	if ms[1].Value.Kind() == metrics.KindFloat64 {
		cpu = ms[1].Value.Float64()
	}
	return cycles, time.Duration(cpu * float64(time.Second))
}

// catchUp stops the projector, publishes p.Backlog events over p.Threads
// new threads (their thread.created first), restarts the projector and
// times it until it has projected everything.
func catchUp(ctx context.Context, e *Env, p LagParams) (time.Duration, error) {
	if err := e.StopProjector(); err != nil {
		return 0, err
	}
	js, err := jetstream.New(e.NC, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return 0, err
	}
	const tn = "backlog"
	threads := make([]string, p.Threads)
	for i := range threads {
		threads[i] = events.NewID()
		m, err := rawMsg("conv."+tn+"."+threads[i], events.New(tn, threads[i], producer, events.ThreadCreated{Replies: events.RepliesOff}))
		if err != nil {
			return 0, err
		}
		if err := publishAsync(ctx, js, m); err != nil {
			return 0, err
		}
	}
	for i := range p.Backlog - p.Threads {
		t := threads[i%p.Threads]
		m, err := rawMsg("conv."+tn+"."+t, events.New(tn, t, producer, message(i/p.Threads, p.Content)))
		if err != nil {
			return 0, err
		}
		if err := publishAsync(ctx, js, m); err != nil {
			return 0, err
		}
	}
	if err := waitAsync(ctx, js); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := e.StartProjector(ctx); err != nil {
		return 0, err
	}
	if err := e.WaitProjected(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// lagAt measures one rate. With occ, each event carries its thread's
// version (the sequence of the thread's previous event, from its publish
// ack) in Nats-Expected-Last-Subject-Sequence, as client.Append writes it;
// at these rates a thread's previous ack is back long before its next
// event is due (1,000 threads round robin), so the pacing is unchanged.
func lagAt(ctx context.Context, e *Env, p LagParams, rate int, occ bool, log func(string, ...any)) (*LagRow, error) {
	tn := fmt.Sprintf("lag%d", rate)
	if !occ {
		tn += "plain"
	}
	var errs atomic.Int64
	js, err := jetstream.New(e.NC, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { errs.Add(1) }))
	if err != nil {
		return nil, err
	}
	threads := make([]string, p.Threads)
	subjects := make([]string, p.Threads)
	acks := make([]jetstream.PubAckFuture, p.Threads)
	// send publishes m on thread i, conditionally on the thread's version
	// when occ.
	send := func(i int, m *nats.Msg) error {
		if occ {
			var version uint64
			if f := acks[i]; f != nil {
				select {
				case ack := <-f.Ok():
					version = ack.Sequence
				case err := <-f.Err():
					return fmt.Errorf("publish to %s: %w", subjects[i], err)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(version, 10))
		}
		f, err := publishAsyncF(ctx, js, m)
		acks[i] = f
		return err
	}
	for i := range threads {
		threads[i] = events.NewID()
		subjects[i] = "conv." + tn + "." + threads[i]
		m, err := rawMsg(subjects[i], events.New(tn, threads[i], producer, events.ThreadCreated{Replies: events.RepliesOff}))
		if err != nil {
			return nil, err
		}
		if err := send(i, m); err != nil {
			return nil, err
		}
	}
	if err := waitAsync(ctx, js); err != nil {
		return nil, err
	}
	if err := e.WaitProjected(ctx); err != nil {
		return nil, err
	}

	// The window's events, by id: OnApply reports each one's lag.
	var (
		window sync.Map // event id -> struct{}
		mu     sync.Mutex
		lags   []time.Duration
		behind uint64
	)
	e.SetOnApply(func(a projector.Applied) {
		if a.Tenant != tn {
			return
		}
		if _, ok := window.Load(a.EventID); !ok {
			return
		}
		mu.Lock()
		lags = append(lags, a.Lag)
		behind = max(behind, a.Behind)
		mu.Unlock()
	})
	defer e.SetOnApply(nil)
	cons, err := startLagConsumer(ctx, e, "conv."+tn+".*", &window)
	if err != nil {
		return nil, err
	}
	defer cons.stop()
	var steps, logSteps atomic.Int64
	e.SetOnStep(func(st projector.Step) {
		if st.Tenant != tn {
			return
		}
		steps.Add(1)
		if st.LogReads > 0 {
			logSteps.Add(1)
		}
	})
	defer e.SetOnStep(nil)
	defer func() {
		log("lag: %d steps, %d of them read the event log", steps.Load(), logSteps.Load())
	}()

	// The previous row's or section's garbage (the replay section folds
	// 100,000 messages three times) is collected now, not during this
	// row's window: all clients and the server share this process.
	runtime.GC()

	// Pace: every millisecond, publish what the rate says should have been
	// published by now (so a late tick catches up instead of lowering the
	// rate).
	gc0, gcCPU0 := gcSample()
	allocs0 := heapObjects()
	start := time.Now()
	measureFrom, end := start.Add(p.Warmup), start.Add(p.Warmup+p.For)
	sent, inWindow := 0, 0
	kv0, eventBytes := e.ProjectorWritten(), uint64(0)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for now := start; now.Before(end); now = time.Now() {
		target := int(float64(rate) * now.Sub(start).Seconds())
		for ; sent < target; sent++ {
			i := sent % p.Threads
			ev := events.New(tn, threads[i], producer, message(0, p.Content))
			m, err := rawMsg(subjects[i], ev)
			if err != nil {
				return nil, err
			}
			if !now.Before(measureFrom) {
				window.Store(ev.ID, struct{}{})
				inWindow++
			}
			eventBytes += uint64(len(m.Data))
			if err := send(i, m); err != nil {
				return nil, err
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	published := time.Now()
	gc1, gcCPU1 := gcSample()
	if err := waitAsync(ctx, js); err != nil {
		return nil, err
	}
	if err := e.WaitProjected(ctx); err != nil {
		return nil, err
	}
	row := &LagRow{Rate: rate, OCC: occ, Published: inWindow, Drain: time.Since(published), Errors: int(errs.Load()),
		EventBytes: eventBytes, KV: e.ProjectorWritten().Sub(kv0), GCCycles: gc1 - gc0, GCCPU: gcCPU1 - gcCPU0}
	if sent > 0 {
		row.Allocs = float64(heapObjects()-allocs0) / float64(sent)
	}
	if row.Consumer, err = cons.wait(ctx, inWindow); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	row.MaxBehind = behind
	row.Measured = len(lags)
	row.Achieved = float64(inWindow) / p.For.Seconds()
	row.D = distOf(lags)
	return row, nil
}

// waitAsync waits for every async publish of js to be acknowledged.
func waitAsync(ctx context.Context, js jetstream.JetStream) error {
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("async publishes not acknowledged after 2 minutes (%d pending)", js.PublishAsyncPending())
	}
}

// heapObjects is the count of heap objects this process allocated so far.
func heapObjects() uint64 {
	ms := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(ms)
	if ms[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return ms[0].Value.Uint64()
}

// lagConsumer is a plain consumer of a lag row's events: the delivery lag
// the projection lag is judged against.
type lagConsumer struct {
	nc   *nats.Conn
	cc   jetstream.ConsumeContext
	mu   sync.Mutex
	lags []time.Duration
}

// startLagConsumer starts an ordered consumer of the new messages of
// filter on a connection of its own; it records the delivery lag (stream
// timestamp to receipt) of every message whose Nats-Msg-Id is in window.
func startLagConsumer(ctx context.Context, e *Env, filter string, window *sync.Map) (*lagConsumer, error) {
	nc, err := nats.Connect(e.url, nats.Name("convlog-bench-lag-consumer"), e.auth)
	if err != nil {
		return nil, err
	}
	c := &lagConsumer{nc: nc}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, provision.DefaultConfig().Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.cc, err = cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		if _, ok := window.Load(m.Headers().Get(jetstream.MsgIDHeader)); !ok {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.lags = append(c.lags, now.Sub(md.Timestamp))
		c.mu.Unlock()
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// wait polls until the consumer has received n of the window's events (or
// a minute passed) and returns their delivery lags.
func (c *lagConsumer) wait(ctx context.Context, n int) (Dist, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		c.mu.Lock()
		got := len(c.lags)
		c.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			return Dist{}, fmt.Errorf("lag consumer: %d of %d events received after a minute", got, n)
		}
		select {
		case <-ctx.Done():
			return Dist{}, ctx.Err()
		case <-time.After(5 * time.Millisecond): // polling interval
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return distOf(c.lags), nil
}

// stop stops the consumer and closes its connection.
func (c *lagConsumer) stop() {
	c.cc.Stop()
	c.nc.Close()
}

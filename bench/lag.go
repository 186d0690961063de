package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
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
	Rates []int // events/s
	// For is the measured time per rate, both kinds of publish together:
	// Rounds rounds, each a window of each kind (lagPair).
	For    time.Duration
	Rounds int // rounds of For (0 means 1)
	// RoundsAt are rounds of the rates it names (p.Rates and SplitRates)
	// in place of Rounds, each window as long as Rounds' windows
	// (For / (2·Rounds)): more rounds where a window's p99 moves most,
	// since a window's p99 is its 1% worst events and one stall decides
	// it, so that the median over the rounds holds still between runs.
	RoundsAt map[int]int
	Warmup   time.Duration // paced but not measured, before each round's windows
	Threads  int           // threads the events are spread over, round robin
	Content  int
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
	// D is OnApply's Lag over the measured windows' events.
	D Dist
	// Consumer is the limit D is judged against: the delivery lag (stream
	// timestamp to receipt) of the same window's events to a plain
	// consumer of the stream's new messages (an ordered consumer with no
	// filter subject, as the projector's, on a connection of its own,
	// nothing decoded), running beside the projector.
	Consumer Dist
	// Ratio is D's p99 over Consumer's p99, round by round: each round's
	// window of this kind of publish gives one (lagPair); the report judges
	// their geometric mean (Spread.Geomean). RoundP99 is the
	// median over those windows of D's p99. Both are zero in the results
	// of runs before rounds.
	Ratio    Spread
	RoundP99 time.Duration
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
	if err := lagState(ctx, e, log); err != nil {
		return nil, err
	}
	// Both kinds of publish at one rate, interleaved (lagPair), before the
	// next rate.
	for _, rate := range p.Rates {
		log("lag: %d events/s, %d rounds of a %s warm-up and a %s window of each kind, over %d threads per kind, conditional and plain publishes alternating",
			rate, p.rounds(rate), p.Warmup, p.window(), p.Threads)
		rows, err := lagPair(ctx, e, p, rate, log)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, rows[:]...)
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

// rounds is how many rounds rate runs (RoundsAt, else Rounds, at least 1).
func (p LagParams) rounds(rate int) int {
	if n, ok := p.RoundsAt[rate]; ok {
		return max(1, n)
	}
	return max(1, p.Rounds)
}

// window is how long each kind of publish is measured in a round.
func (p LagParams) window() time.Duration { return p.For / time.Duration(2*max(1, p.Rounds)) }

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
		log("lag: %d events/s, nats-server in its own process, %d rounds, conditional and plain publishes alternating", rate, p.rounds(rate))
		pair, err := lagPair(ctx, e, p, rate, log)
		if err != nil {
			return nil, err
		}
		for _, r := range pair {
			r.Split = true
			rows = append(rows, r)
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

// lagKind is one kind of publish of a lag run: its tenant, threads and
// the OCC chaining of its events.
type lagKind struct {
	occ      bool
	tn       string
	threads  []string
	subjects []string
	acks     []jetstream.PubAckFuture
	sent     int // events published, round robin over threads
}

// lagSlots records latencies by slot: slot j is window j%2 of round j/2,
// of the kind of publish kindOf(j).
type lagSlots struct {
	mu   sync.Mutex
	lags [][]time.Duration
}

func (s *lagSlots) add(slot int, d time.Duration) {
	s.mu.Lock()
	s.lags[slot] = append(s.lags[slot], d)
	s.mu.Unlock()
}

// count is how many latencies were recorded in all slots.
func (s *lagSlots) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lags {
		n += len(l)
	}
	return n
}

// kindOf is which kind of publish (0 conditional, 1 plain) slot j of the
// measured window holds: the two alternate slot by slot, and which comes
// first alternates round by round, so that neither always follows the
// other.
func kindOf(j int) int { return (j % 2) ^ (j / 2 % 2) }

// lagPair measures one rate, both kinds of publish at once: p.rounds(rate)
// rounds, each p.Warmup unmeasured, then a window (p.window()) of
// conditional publishes and one of plain publishes at the same rate
// (kindOf), then a wait until everything is projected; so both kinds and
// the plain consumer they are judged against share the machine's load, and
// each round starts without the previous one's backlog. Each round gives
// each kind the ratio of its window's projection lag p99 to the plain
// consumer's p99 over the same events; a row pools its kind's windows and
// summarizes those ratios. Each window's figures and the collections
// during it are logged.
//
// Conditional events carry their thread's version (the sequence of the
// thread's previous event, from its publish ack) in
// Nats-Expected-Last-Subject-Sequence, as client.Append writes it; at these
// rates a thread's previous ack is back long before its next event is due
// (1,000 threads round robin), so the pacing is unchanged.
//
// The figures that are not per event (garbage collections, allocations, KV
// bytes written, drain, backlog) are of the whole run, both kinds, and are
// the same in both rows.
func lagPair(ctx context.Context, e *Env, p LagParams, rate int, log func(string, ...any)) ([2]*LagRow, error) {
	var errs atomic.Int64
	js, err := jetstream.New(e.NC, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { errs.Add(1) }))
	if err != nil {
		return [2]*LagRow{}, err
	}
	kinds := [2]*lagKind{{occ: true, tn: fmt.Sprintf("lag%d", rate)}, {tn: fmt.Sprintf("lag%dplain", rate)}}
	// send publishes m on thread i of k, conditionally on the thread's
	// version when k is conditional.
	send := func(k *lagKind, i int, m *nats.Msg) error {
		if k.occ {
			var version uint64
			if f := k.acks[i]; f != nil {
				select {
				case ack := <-f.Ok():
					version = ack.Sequence
				case err := <-f.Err():
					return fmt.Errorf("publish to %s: %w", k.subjects[i], err)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(version, 10))
		}
		f, err := publishAsyncF(ctx, js, m)
		k.acks[i] = f
		return err
	}
	for _, k := range kinds {
		k.threads, k.subjects, k.acks = make([]string, p.Threads), make([]string, p.Threads), make([]jetstream.PubAckFuture, p.Threads)
		for i := range k.threads {
			k.threads[i] = events.NewID()
			k.subjects[i] = "conv." + k.tn + "." + k.threads[i]
			m, err := rawMsg(k.subjects[i], events.New(k.tn, k.threads[i], producer, events.ThreadCreated{Replies: events.RepliesOff}))
			if err != nil {
				return [2]*LagRow{}, err
			}
			if err := send(k, i, m); err != nil {
				return [2]*LagRow{}, err
			}
		}
	}
	if err := waitAsync(ctx, js); err != nil {
		return [2]*LagRow{}, err
	}
	if err := e.WaitProjected(ctx); err != nil {
		return [2]*LagRow{}, err
	}

	rounds := p.rounds(rate)
	slots := 2 * rounds
	slot := p.window()
	var (
		window sync.Map // event id -> its slot
		proj   = &lagSlots{lags: make([][]time.Duration, slots)}
		behind atomic.Uint64
	)
	e.SetOnApply(func(a projector.Applied) {
		if a.Tenant != kinds[0].tn && a.Tenant != kinds[1].tn {
			return
		}
		j, ok := window.Load(a.EventID)
		if !ok {
			return
		}
		proj.add(j.(int), a.Lag)
		for b := behind.Load(); a.Behind > b; b = behind.Load() {
			if behind.CompareAndSwap(b, a.Behind) {
				break
			}
		}
	})
	defer e.SetOnApply(nil)
	cons, err := startLagConsumer(ctx, e, &window, slots)
	if err != nil {
		return [2]*LagRow{}, err
	}
	defer cons.stop()
	var steps, logSteps atomic.Int64
	e.SetOnStep(func(st projector.Step) {
		if st.Tenant != kinds[0].tn && st.Tenant != kinds[1].tn {
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

	// Rounds: each publishes at the rate, paced every millisecond (what
	// the rate says should have been published by now, so that a late
	// tick catches up instead of lowering the rate), p.Warmup unmeasured,
	// then its two windows; then it waits until everything is projected,
	// so that a round does not inherit the previous one's backlog.
	var (
		gcCycles, sent int
		gcCPU, drain   time.Duration
		published      [2]int
		eventBytes     uint64
	)
	allocs0, kv0 := heapObjects(), e.ProjectorWritten()
	// winGC[j] counts the collections from window j's start to the next
	// window's start, or for a round's second window to the end of the
	// round's drain (its events are still being projected then).
	winGC, winDrain := make([]uint64, slots), make([]time.Duration, rounds)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for r := range rounds {
		gc0, gcCPU0 := gcSample()
		prevJ, gcMark := -1, uint64(0)
		start := time.Now()
		measureFrom := start.Add(p.Warmup)
		end, n := measureFrom.Add(2*slot), 0
		for now := start; now.Before(end); now = time.Now() {
			j := -1
			kind := kindOf(2 * r)
			if !now.Before(measureFrom) {
				j = 2*r + min(int(now.Sub(measureFrom)/slot), 1)
				kind = kindOf(j)
				if j != prevJ {
					c, _ := gcSample()
					if prevJ >= 0 {
						winGC[prevJ] = c - gcMark
					}
					prevJ, gcMark = j, c
				}
			}
			k := kinds[kind]
			for target := int(float64(rate) * now.Sub(start).Seconds()); n < target; n++ {
				i := k.sent % p.Threads
				k.sent++
				ev := events.New(k.tn, k.threads[i], producer, message(0, p.Content))
				m, err := rawMsg(k.subjects[i], ev)
				if err != nil {
					return [2]*LagRow{}, err
				}
				if j >= 0 {
					window.Store(ev.ID, j)
					published[kind]++
				}
				eventBytes += uint64(len(m.Data))
				if err := send(k, i, m); err != nil {
					return [2]*LagRow{}, err
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return [2]*LagRow{}, ctx.Err()
			}
		}
		lastPublish := time.Now()
		gc1, gcCPU1 := gcSample()
		gcCycles, gcCPU, sent = gcCycles+int(gc1-gc0), gcCPU+gcCPU1-gcCPU0, sent+n
		if err := waitAsync(ctx, js); err != nil {
			return [2]*LagRow{}, err
		}
		if err := e.WaitProjected(ctx); err != nil {
			return [2]*LagRow{}, err
		}
		winDrain[r] = time.Since(lastPublish)
		drain = max(drain, winDrain[r])
		if c, _ := gcSample(); prevJ >= 0 {
			winGC[prevJ] = c - gcMark
		}
	}
	kv, allocs := e.ProjectorWritten().Sub(kv0), float64(heapObjects()-allocs0)/float64(max(1, sent))
	if err := cons.wait(ctx, published[0]+published[1]); err != nil {
		return [2]*LagRow{}, err
	}
	proj.mu.Lock()
	defer proj.mu.Unlock()
	cons.slots.mu.Lock()
	defer cons.slots.mu.Unlock()
	var rows [2]*LagRow
	for kind, k := range kinds {
		r := &LagRow{Rate: rate, OCC: k.occ, Published: published[kind], Drain: drain, Errors: int(errs.Load()),
			EventBytes: eventBytes, KV: kv, GCCycles: uint64(gcCycles), GCCPU: gcCPU, Allocs: allocs,
			MaxBehind: behind.Load(), Achieved: float64(published[kind]) / (float64(rounds) * slot.Seconds())}
		how := "plain"
		if k.occ {
			how = "conditional"
		}
		var pl, cl []time.Duration
		var ratios []float64
		var p99s []time.Duration
		for j := range slots {
			if kindOf(j) != kind {
				continue
			}
			pd, cd := distOf(proj.lags[j]), distOf(cons.slots.lags[j])
			log("lag: %d/s %s round %d: projection p50 %s p99 %s, consumer p50 %s p99 %s, ratio %s; %d GC; round drained in %s",
				rate, how, j/2, fmtDur(pd.P50), fmtDur(pd.P99), fmtDur(cd.P50), fmtDur(cd.P99),
				durRatio(pd.P99, cd.P99), winGC[j], fmtDur(winDrain[j/2]))
			pl, cl = append(pl, proj.lags[j]...), append(cl, cons.slots.lags[j]...)
			if pd.Measured() && cd.P99 > 0 {
				ratios = append(ratios, float64(pd.P99)/float64(cd.P99))
				p99s = append(p99s, pd.P99)
			}
		}
		r.D, r.Consumer, r.Measured = distOf(pl), distOf(cl), len(pl)
		r.Ratio, r.RoundP99 = spreadOf(ratios), medianDur(p99s)
		rows[kind] = r
	}
	return rows, nil
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

// lagConsumer is a plain consumer of a lag run's events: the delivery lag
// the projection lag is judged against.
type lagConsumer struct {
	nc    *nats.Conn
	cc    jetstream.ConsumeContext
	slots *lagSlots
}

// startLagConsumer starts an ordered consumer of the stream's new
// messages on a connection of its own; it records the delivery lag (stream
// timestamp to receipt) of every message whose Nats-Msg-Id is in window,
// by the slot window maps it to (of slots).
//
// The consumer has no filter subject, as the projector's consumer has
// none: while a row runs, its events are the only ones published to the
// stream, and others are left out by window. With the row's two tenants
// as filters, nats-server 2.15 looks for each next message of a consumer
// that is behind by more than a message block's subjects by intersecting
// all the subjects of that block with the filters
// (msgBlock.firstMatchingMulti): after a stall the consumer fell further
// behind with every delivery, its own delivery lag grew to seconds, and it
// took the CPU of the process the projector runs in (bench/NOTES.md,
// "Projection lag").
func startLagConsumer(ctx context.Context, e *Env, window *sync.Map, slots int) (*lagConsumer, error) {
	nc, err := nats.Connect(e.url, nats.Name("convlog-bench-lag-consumer"), e.auth)
	if err != nil {
		return nil, err
	}
	c := &lagConsumer{nc: nc, slots: &lagSlots{lags: make([][]time.Duration, slots)}}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, provision.DefaultConfig().Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.cc, err = cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		j, ok := window.Load(m.Headers().Get(jetstream.MsgIDHeader))
		if !ok {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			return
		}
		c.slots.add(j.(int), now.Sub(md.Timestamp))
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// wait polls until the consumer has received n of the window's events (or
// a minute passed).
func (c *lagConsumer) wait(ctx context.Context, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		got := c.slots.count()
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lag consumer: %d of %d events received after a minute", got, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond): // polling interval
		}
	}
}

// stop stops the consumer and closes its connection.
func (c *lagConsumer) stop() {
	c.cc.Stop()
	c.nc.Close()
}

// lagState logs what the section starts from, as the sections before it
// left the process and the server: the live heap after a collection, the
// goroutines, and each stream's messages, subjects, bytes and
// consumers; with -profile it writes the heap and goroutine profiles
// (lag.heap.pprof, lag.goroutine.pprof).
func lagState(ctx context.Context, e *Env, log func(string, ...any)) error {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	log("lag: starting from a live heap of %d MB, %d goroutines", ms.HeapAlloc>>20, runtime.NumGoroutine())
	names := e.JS.StreamNames(ctx)
	for name := range names.Name() {
		s, err := e.JS.Stream(ctx, name)
		if err != nil {
			return err
		}
		st := s.CachedInfo().State
		log("lag: stream %s: %d messages, %d subjects, %d MB, %d consumers", name, st.Msgs, st.NumSubjects, st.Bytes>>20, st.Consumers)
		consumers := s.ListConsumers(ctx)
		for ci := range consumers.Info() {
			log("lag:   consumer %s (durable %q, filters %q %q): %d pending, %d waiting pulls, inactive threshold %s",
				ci.Name, ci.Config.Durable, ci.Config.FilterSubject, ci.Config.FilterSubjects, ci.NumPending, ci.NumWaiting, ci.Config.InactiveThreshold)
		}
		if err := consumers.Err(); err != nil {
			return fmt.Errorf("consumers of %s: %w", name, err)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("stream names: %w", err)
	}
	if dir := os.Getenv(profileEnv); dir != "" {
		if err := writeHeapProfile(filepath.Join(dir, "lag.heap.pprof")); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(dir, "lag.goroutine.pprof"))
		if err != nil {
			return err
		}
		defer f.Close()
		return pprof.Lookup("goroutine").WriteTo(f, 0)
	}
	return nil
}

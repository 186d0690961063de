package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// System names, used as keys of the results and in the tables.
const (
	sysConvlog     = "convlog"
	sysConvlogCons = "convlog_consistent"
	sysConvlogWarm = "convlog_warm" // snapshot Get with the chunk cache warm
	sysConvlogView = "convlog_view" // snapshot GetView (no copy of the history) with the chunk cache warm
	// sysConvlogViewLocal is sysConvlogView on an in-process connection to
	// the embedded server, as agentd serve's HTTP API reads.
	sysConvlogViewLocal = "convlog_view_inproc"
	// sysConvlogViewTracked is sysConvlogViewLocal by a client with
	// TrackSnapshots, as agentd serve's: a head the watch vouches for is
	// not read again.
	sysConvlogViewTracked = "convlog_view_tracked"
	sysRaw                = "jetstream"
	sysRawEnc             = "jetstream_encoding"
	sysRawKV              = "jetstream_kv"
	sysPG                 = "postgres"
	sysPGAsync            = "postgres_async"
	sysRedis              = "redis"
)

// appendSize is the content size of the appended message; its msgpack
// event is about 600 bytes.
const appendSize = 512

// appendThread is one thread of one system with the version its (only)
// writer last saw.
type appendThread struct {
	id, subject string
	version     uint64
}

// appender appends one message to a thread of one system, conditionally on
// the thread's version where the system can (all but Redis).
type appender struct {
	name      string
	newThread func(ctx context.Context) (*appendThread, error)
	append    func(ctx context.Context, t *appendThread) error
}

// appenders returns the systems of the append section, those not
// configured left out.
func appenders(e *Env, b *Baselines) ([]appender, error) {
	payload := events.UserMessage{Content: events.Text(text(0, appendSize))}
	// The raw baselines write the bytes of an event of the same size.
	sample, err := events.Marshal(events.New(tenant, events.NewID(), "convlog-client", payload))
	if err != nil {
		return nil, err
	}
	newID := func(context.Context) (*appendThread, error) { return &appendThread{id: events.NewID()}, nil }
	as := []appender{
		{
			name: sysConvlog,
			newThread: func(ctx context.Context) (*appendThread, error) {
				_, id, v, err := e.AppendClient.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
				return &appendThread{id: id, version: v}, err
			},
			append: func(ctx context.Context, t *appendThread) error {
				res, err := e.AppendClient.Append(ctx, tenant, t.id, []events.Event{{Payload: payload}}, client.ExpectVersion(t.version))
				if err != nil {
					return err
				}
				t.version = res.Version
				return nil
			},
		},
		{
			name: sysRaw,
			newThread: func(context.Context) (*appendThread, error) {
				id := events.NewID()
				return &appendThread{id: id, subject: rawPrefix + "." + tenant + "." + id}, nil
			},
			append: func(ctx context.Context, t *appendThread) error {
				ack, err := publishRaw(ctx, e.JS.PublishMsg, &nats.Msg{Subject: t.subject, Data: sample, Header: nats.Header{
					events.HeaderType:                   {string(events.TypeUserMessage)},
					events.HeaderSchema:                 {schemaVersion},
					jetstream.MsgIDHeader:               {events.NewID()},
					jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(t.version, 10)},
					jetstream.ExpectedStreamHeader:      {rawStream},
				}})
				if err != nil {
					return err
				}
				t.version = ack.Sequence
				return nil
			},
		},
	}
	// The same raw publish, but encoding a new event for every append
	// (events.Marshal of a fresh envelope, whose id is the Nats-Msg-Id), as
	// any writer of convlog events must; not validated.
	as = append(as, appender{
		name: sysRawEnc,
		newThread: func(context.Context) (*appendThread, error) {
			id := events.NewID()
			return &appendThread{id: id, subject: rawPrefix + "." + tenant + "." + id}, nil
		},
		append: func(ctx context.Context, t *appendThread) error {
			ev := events.New(tenant, t.id, "convlog-client", payload)
			data, err := events.Marshal(ev)
			if err != nil {
				return err
			}
			ack, err := publishRaw(ctx, e.JS.PublishMsg, &nats.Msg{Subject: t.subject, Data: data, Header: nats.Header{
				events.HeaderType:                   {string(events.TypeUserMessage)},
				events.HeaderSchema:                 {schemaVersion},
				jetstream.MsgIDHeader:               {ev.ID},
				jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(t.version, 10)},
				jetstream.ExpectedStreamHeader:      {rawStream},
			}})
			if err != nil {
				return err
			}
			t.version = ack.Sequence
			return nil
		},
	})
	pgAppend := func(pool *pgxpool.Pool) func(ctx context.Context, t *appendThread) error {
		return func(ctx context.Context, t *appendThread) error {
			if _, err := pool.Exec(ctx, pgInsert, t.id, int64(t.version+1), sample); err != nil {
				return err
			}
			t.version++
			return nil
		}
	}
	if b.PG != nil {
		as = append(as, appender{name: sysPG, newThread: newID, append: pgAppend(b.PG)},
			appender{name: sysPGAsync, newThread: newID, append: pgAppend(b.PGAsync)})
	}
	if b.Redis != nil {
		rdb := b.Redis
		as = append(as, appender{name: sysRedis, newThread: newID, append: func(ctx context.Context, t *appendThread) error {
			return rdb.RPush(ctx, redisKey(t.id), sample).Err()
		}})
	}
	return as, nil
}

// AppendParams size the append section.
type AppendParams struct {
	Rounds  int           // interleaved rounds (every system once per round)
	SeqOps  int           // sequential appends per system per round
	Warmup  int           // unrecorded sequential appends per system, first round
	Writers int           // concurrent writers
	Threads int           // threads the concurrent writers share (each owned by one writer)
	ConcFor time.Duration // how long the concurrent writers run per system per round
	// ConcSlice splits ConcFor into windows of this length, the systems
	// alternating window by window (0: one window per system per round).
	ConcSlice time.Duration
}

// AppendResults are the append section's figures per system.
type AppendResults struct {
	Systems  []string
	Seq      map[string]Dist
	Conc     map[string]Dist
	ConcRate map[string]float64 // appends/s, median over rounds
	Errors   map[string]int
	// SeqRatio and ConcRatio compare convlog with each other system
	// (the key) round by round: convlog's sequential p50 over the
	// system's, and convlog's concurrent appends/s over the system's.
	SeqRatio, ConcRatio map[string]Spread
	// CPU is the CPU time of this process (getrusage: user + system) per
	// concurrent append, over every window of the system: the writers'
	// work, and the embedded server's, which runs in this process.
	// CPURatio is convlog's over the system's (the key), round by round.
	CPU      map[string]time.Duration
	CPURatio map[string]Spread
}

// appendRun is the state of one append section: each system's threads
// and what its rounds measured.
type appendRun struct {
	p           AppendParams
	as          []appender
	seqThreads  map[string]*appendThread
	concThreads map[string][]*appendThread
	seqLat      map[string][]time.Duration
	seqRounds   map[string][][]time.Duration
	concLat     map[string][]time.Duration
	rates       map[string][]float64
	// cpu is each round's CPU time per concurrent append, by system.
	cpu    map[string][]time.Duration
	errors map[string]int
}

// RunAppend measures appends of one ~600-byte event with a durable ack:
// sequential (one writer, one thread, each append conditional on the
// version the previous one returned) and concurrent (p.Writers writers over
// p.Threads threads). Systems run in rounds and alternate within each
// round, in a rotating order: sequential appends one by one, concurrent
// writers window by window (p.ConcSlice), so that the machine's background
// load falls on all of them alike. Latencies are pooled over the rounds,
// throughput and CPU per append are the median round's, and the ratios
// to convlog are taken in each round and summarized over them.
func RunAppend(ctx context.Context, e *Env, b *Baselines, p AppendParams, log func(string, ...any)) (*AppendResults, error) {
	as, err := appenders(e, b)
	if err != nil {
		return nil, err
	}
	r := &appendRun{p: p, as: as, seqThreads: map[string]*appendThread{}, concThreads: map[string][]*appendThread{},
		seqLat: map[string][]time.Duration{}, seqRounds: map[string][][]time.Duration{}, concLat: map[string][]time.Duration{},
		rates: map[string][]float64{}, cpu: map[string][]time.Duration{}, errors: map[string]int{}}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	for round := range p.Rounds {
		log("append: round %d/%d: sequential, the systems alternating append by append", round+1, p.Rounds)
		if err := r.sequential(ctx, round); err != nil {
			return nil, err
		}
		log("append: round %d/%d: %d concurrent writers, the systems alternating every %s", round+1, p.Rounds, p.Writers, p.ConcFor/time.Duration(r.windows()))
		if err := r.concurrent(ctx, round); err != nil {
			return nil, err
		}
	}
	return r.results(), nil
}

// prepare creates every system's threads and runs the warm-up appends.
func (r *appendRun) prepare(ctx context.Context) error {
	var err error
	for _, a := range r.as {
		if r.seqThreads[a.name], err = a.newThread(ctx); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		ths := make([]*appendThread, r.p.Threads)
		for i := range ths {
			if ths[i], err = a.newThread(ctx); err != nil {
				return fmt.Errorf("%s: %w", a.name, err)
			}
		}
		r.concThreads[a.name] = ths
		for range r.p.Warmup {
			if err := a.append(ctx, r.seqThreads[a.name]); err != nil {
				return fmt.Errorf("%s warm-up: %w", a.name, err)
			}
		}
	}
	return nil
}

// windows is how many windows each concurrent round is split into.
func (r *appendRun) windows() int {
	if r.p.ConcSlice > 0 {
		return max(1, int(r.p.ConcFor/r.p.ConcSlice))
	}
	return 1
}

// sequential runs round's sequential appends, the systems alternating
// append by append.
func (r *appendRun) sequential(ctx context.Context, round int) error {
	for name := range r.seqThreads {
		r.seqRounds[name] = append(r.seqRounds[name], make([]time.Duration, 0, r.p.SeqOps))
	}
	for i := range r.p.SeqOps {
		for k := range r.as {
			a := r.as[(k+i+round)%len(r.as)]
			t0 := time.Now()
			if err := a.append(ctx, r.seqThreads[a.name]); err != nil {
				return fmt.Errorf("%s sequential append: %w", a.name, err)
			}
			d := time.Since(t0)
			r.seqLat[a.name] = append(r.seqLat[a.name], d)
			r.seqRounds[a.name][round] = append(r.seqRounds[a.name][round], d)
		}
	}
	return nil
}

// concurrent runs round's concurrent writers, the systems alternating
// window by window, and records each system's rate and CPU per append.
func (r *appendRun) concurrent(ctx context.Context, round int) error {
	windows := r.windows()
	done := map[string]int{}
	took := map[string]time.Duration{}
	cpu := map[string]time.Duration{}
	for w := range windows {
		for k := range r.as {
			a := r.as[(k+w+round)%len(r.as)]
			// The window before left its garbage in this process,
			// which all the clients and the server share: collected
			// now, it is not collected during this window.
			runtime.GC()
			cpu0 := processCPU()
			lat, elapsed, errs, err := concurrentAppends(ctx, a, r.concThreads[a.name], r.p.Writers, r.p.ConcFor/time.Duration(windows))
			if err != nil {
				return err
			}
			cpu[a.name] += processCPU() - cpu0
			r.concLat[a.name] = append(r.concLat[a.name], lat...)
			done[a.name] += len(lat)
			took[a.name] += elapsed
			r.errors[a.name] += errs
		}
	}
	for _, a := range r.as {
		r.rates[a.name] = append(r.rates[a.name], float64(done[a.name])/took[a.name].Seconds())
		var per time.Duration
		if done[a.name] > 0 {
			per = cpu[a.name] / time.Duration(done[a.name])
		}
		r.cpu[a.name] = append(r.cpu[a.name], per)
	}
	return nil
}

// results summarizes the rounds.
func (r *appendRun) results() *AppendResults {
	res := &AppendResults{Seq: map[string]Dist{}, Conc: map[string]Dist{}, ConcRate: map[string]float64{}, Errors: r.errors,
		SeqRatio: map[string]Spread{}, ConcRatio: map[string]Spread{}, CPU: map[string]time.Duration{}, CPURatio: map[string]Spread{}}
	for _, a := range r.as {
		res.Systems = append(res.Systems, a.name)
		res.Seq[a.name] = distOf(r.seqLat[a.name])
		res.Conc[a.name] = distOf(r.concLat[a.name])
		res.ConcRate[a.name] = median(r.rates[a.name])
		res.CPU[a.name] = medianDur(r.cpu[a.name])
	}
	for _, a := range r.as[1:] { // as[0] is convlog
		res.SeqRatio[a.name] = p50Ratios(r.seqRounds[sysConvlog], r.seqRounds[a.name])
		conc := make([]float64, len(r.rates[a.name]))
		cpu := make([]float64, len(r.cpu[a.name]))
		for i, x := range r.rates[a.name] {
			if x > 0 {
				conc[i] = r.rates[sysConvlog][i] / x
			}
			if y := r.cpu[a.name][i]; y > 0 {
				cpu[i] = float64(r.cpu[sysConvlog][i]) / float64(y)
			}
		}
		res.ConcRatio[a.name] = spreadOf(conc)
		res.CPURatio[a.name] = spreadOf(cpu)
	}
	return res
}

// processCPU is the CPU time (user + system) this process has used so far
// (getrusage RUSAGE_SELF).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// concurrentAppends runs writers goroutines for d, writer w owning threads
// w, w+writers, ... (so no two writers share a thread and OCC never
// conflicts), and returns every latency, the time the writers took (d and
// the appends in flight at its end) and the count of errors.
func concurrentAppends(ctx context.Context, a appender, threads []*appendThread, writers int, d time.Duration) ([]time.Duration, time.Duration, int, error) {
	var (
		mu       sync.Mutex
		all      []time.Duration
		errs     int
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range writers {
		wg.Go(func() {
			var mine []*appendThread
			for i := w; i < len(threads); i += writers {
				mine = append(mine, threads[i])
			}
			lat := make([]time.Duration, 0, 4096)
			nerr := 0
			var err1 error
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				t0 := time.Now()
				if err := a.append(ctx, mine[i%len(mine)]); err != nil {
					nerr++
					if err1 == nil {
						err1 = err
					}
					if nerr > 10 {
						break
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			errs += nerr
			if firstErr == nil {
				firstErr = err1
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if errs > 10 {
		return nil, 0, errs, fmt.Errorf("%s concurrent appends: %d errors, first: %w", a.name, errs, firstErr)
	}
	return all, elapsed, errs, nil
}

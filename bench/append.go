package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
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
				ack, err := e.JS.PublishMsg(ctx, &nats.Msg{Subject: t.subject, Data: sample, Header: nats.Header{
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
			ack, err := e.JS.PublishMsg(ctx, &nats.Msg{Subject: t.subject, Data: data, Header: nats.Header{
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
}

// RunAppend measures appends of one ~600-byte event with a durable ack:
// sequential (one writer, one thread, each append conditional on the
// version the previous one returned) and concurrent (p.Writers writers over
// p.Threads threads). Systems run in rounds and alternate within each
// round, in a rotating order: sequential appends one by one, concurrent
// writers window by window (p.ConcSlice), so that the machine's background
// load falls on all of them alike. Latencies are pooled over the rounds,
// throughput is the median round's, and the ratios to convlog are taken
// in each round and summarized over them.
func RunAppend(ctx context.Context, e *Env, b *Baselines, p AppendParams, log func(string, ...any)) (*AppendResults, error) {
	as, err := appenders(e, b)
	if err != nil {
		return nil, err
	}
	res := &AppendResults{Seq: map[string]Dist{}, Conc: map[string]Dist{}, ConcRate: map[string]float64{}, Errors: map[string]int{},
		SeqRatio: map[string]Spread{}, ConcRatio: map[string]Spread{}}
	seqThreads := map[string]*appendThread{}
	concThreads := map[string][]*appendThread{}
	for _, a := range as {
		res.Systems = append(res.Systems, a.name)
		if seqThreads[a.name], err = a.newThread(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", a.name, err)
		}
		ths := make([]*appendThread, p.Threads)
		for i := range ths {
			if ths[i], err = a.newThread(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", a.name, err)
			}
		}
		concThreads[a.name] = ths
		for range p.Warmup {
			if err := a.append(ctx, seqThreads[a.name]); err != nil {
				return nil, fmt.Errorf("%s warm-up: %w", a.name, err)
			}
		}
	}
	seqLat := map[string][]time.Duration{}
	seqRounds := map[string][][]time.Duration{}
	concLat := map[string][]time.Duration{}
	rates := map[string][]float64{}
	windows := 1
	if p.ConcSlice > 0 {
		windows = max(1, int(p.ConcFor/p.ConcSlice))
	}
	for round := range p.Rounds {
		log("append: round %d/%d: sequential, the systems alternating append by append", round+1, p.Rounds)
		for name := range seqThreads {
			seqRounds[name] = append(seqRounds[name], make([]time.Duration, 0, p.SeqOps))
		}
		for i := range p.SeqOps {
			for k := range as {
				a := as[(k+i+round)%len(as)]
				t0 := time.Now()
				if err := a.append(ctx, seqThreads[a.name]); err != nil {
					return nil, fmt.Errorf("%s sequential append: %w", a.name, err)
				}
				d := time.Since(t0)
				seqLat[a.name] = append(seqLat[a.name], d)
				seqRounds[a.name][round] = append(seqRounds[a.name][round], d)
			}
		}
		log("append: round %d/%d: %d concurrent writers, the systems alternating every %s", round+1, p.Rounds, p.Writers, p.ConcFor/time.Duration(windows))
		done := map[string]int{}
		took := map[string]time.Duration{}
		for w := range windows {
			for k := range as {
				a := as[(k+w+round)%len(as)]
				// The window before left its garbage in this process,
				// which all the clients and the server share: collected
				// now, it is not collected during this window.
				runtime.GC()
				lat, elapsed, errs, err := concurrentAppends(ctx, a, concThreads[a.name], p.Writers, p.ConcFor/time.Duration(windows))
				if err != nil {
					return nil, err
				}
				concLat[a.name] = append(concLat[a.name], lat...)
				done[a.name] += len(lat)
				took[a.name] += elapsed
				res.Errors[a.name] += errs
			}
		}
		for _, a := range as {
			rates[a.name] = append(rates[a.name], float64(done[a.name])/took[a.name].Seconds())
		}
	}
	for _, a := range as {
		res.Seq[a.name] = distOf(seqLat[a.name])
		res.Conc[a.name] = distOf(concLat[a.name])
		res.ConcRate[a.name] = median(rates[a.name])
	}
	for _, a := range as[1:] { // as[0] is convlog
		res.SeqRatio[a.name] = p50Ratios(seqRounds[sysConvlog], seqRounds[a.name])
		conc := make([]float64, len(rates[a.name]))
		for i, r := range rates[a.name] {
			if r > 0 {
				conc[i] = rates[sysConvlog][i] / r
			}
		}
		res.ConcRatio[a.name] = spreadOf(conc)
	}
	return res, nil
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

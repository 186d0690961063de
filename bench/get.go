package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
)

// GetParams size the get section.
type GetParams struct {
	Sizes   []int         // thread lengths in messages
	Content int           // content bytes per message
	Iters   func(int) int `json:"-"` // measured gets per system for a thread length
	// Rounds is how many consecutive groups the measured gets of a thread
	// length are split into: each round's p50s give one ratio of convlog
	// to a baseline, and the report gives the median of those ratios.
	Rounds int
	// CollectFrom is the thread length (in messages) from which every get
	// starts after a forced garbage collection (runtime.GC), so that the
	// garbage of the system read before it (a 100,000-element LRANGE
	// leaves about 70 MB) is not collected during its read: all clients
	// share this process. 0: never.
	CollectFrom int
	// NextEvent is how many single events are appended to each thread, after
	// the gets, to time their projection.
	NextEvent int
}

// GetRow is one thread length's figures.
type GetRow struct {
	N int
	// EventBytes is the thread's size in the log (msgpack events, also
	// what Postgres, Redis and the raw KV value hold); SnapshotBytes what
	// a snapshot Get with the chunk cache off reads from KV (head and
	// chunks), HeadBytes what one with the cache warm reads (the head).
	EventBytes, SnapshotBytes, HeadBytes int
	Chunks                               int
	D                                    map[string]Dist
	// Ratios compare two systems round by round, keyed by ratioKey:
	// convlog (chunk cache off, and warm) over each baseline's p50.
	Ratios map[string]Spread
	// Got is how many messages (convlog) or events (baselines) the last
	// Get of each system returned; Want the same expected.
	Got, Want map[string]int
	// Notes say why a system has no figure.
	Notes map[string]string
	// Next is the projection of one more event appended to the thread
	// (OnApply's Lag: stream timestamp to head written); Step the
	// projection step's own duration (OnStep's Took).
	Next, Step Dist

	thread  string
	version uint64
}

// GetResults are the get section's rows, shortest thread first.
type GetResults struct {
	Systems []string
	Rows    []*GetRow
	// CollectFrom is GetParams.CollectFrom of the run.
	CollectFrom int

	// longest is the longest thread's raw log, for the replay section.
	longest *loadedThread
}

// loadedThread is a convlog thread and its raw messages (the same bytes
// the baselines hold).
type loadedThread struct {
	id      string
	version uint64
	msgs    []*jetstream.RawStreamMsg
}

// RunGet builds one thread per length in convlog (client appends of
// atomic 1,000-event turns), waits for the projector, loads the same event
// bytes into the baselines, then measures reads of the whole thread,
// systems interleaved in a shuffled order (see getOrder). convlog's snapshot Get is
// measured twice: with the chunk cache off (sysConvlog, every byte read
// from KV: the figure the targets use) and with the default cache warm
// (sysConvlogWarm: the warm-up round fills it), and as a GetView with the
// cache warm (sysConvlogView: no copy of the history), also on an
// in-process connection when the server is embedded (sysConvlogViewLocal:
// agentd serve's HTTP API reads so), and so by a client with
// TrackSnapshots (sysConvlogViewTracked: agentd serve's client).
func RunGet(ctx context.Context, e *Env, b *Baselines, p GetParams, log func(string, ...any)) (*GetResults, error) {
	res := &GetResults{Systems: []string{sysConvlog, sysConvlogWarm, sysConvlogView}, CollectFrom: p.CollectFrom}
	if e.LocalClient != nil {
		res.Systems = append(res.Systems, sysConvlogViewLocal, sysConvlogViewTracked)
	}
	res.Systems = append(res.Systems, sysConvlogCons, sysRawKV)
	if b.PG != nil {
		res.Systems = append(res.Systems, sysPG)
	}
	if b.Redis != nil {
		res.Systems = append(res.Systems, sysRedis)
	}
	for _, n := range p.Sizes {
		log("get: building a thread of %d messages", n)
		lt, err := buildThread(ctx, e, n, p.Content)
		if err != nil {
			return nil, err
		}
		row, err := loadBaselines(ctx, e, b, lt, n)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, row)
		res.longest = lt
	}
	log("get: waiting for the projector")
	if err := e.WaitProjected(ctx); err != nil {
		return nil, err
	}
	for _, row := range res.Rows {
		if err := e.WaitHead(ctx, row.thread, row.version); err != nil {
			return nil, err
		}
		snap, err := e.Snaps.Load(ctx, tenant, row.thread)
		if err != nil {
			return nil, err
		}
		row.SnapshotBytes, row.Chunks = snap.Bytes, len(snap.Chunks)
		head, err := e.Snaps.LoadHead(ctx, tenant, row.thread)
		if err != nil {
			return nil, err
		}
		row.HeadBytes = head.Bytes
	}
	for _, row := range res.Rows {
		iters := p.Iters(row.N)
		log("get: %d messages, %d gets per system", row.N, iters)
		lat := map[string][]time.Duration{}
		rounds := max(1, min(p.Rounds, iters))
		rlat := map[string][][]time.Duration{}
		for _, sys := range res.Systems {
			rlat[sys] = make([][]time.Duration, rounds)
		}
		order := getOrder(row.N)
		for i := -1; i < iters; i++ { // i == -1 warms up
			for _, k := range order(len(res.Systems)) {
				sys := res.Systems[k]
				if row.Notes[sys] != "" {
					continue
				}
				if p.CollectFrom > 0 && row.N >= p.CollectFrom {
					runtime.GC()
				}
				t0 := time.Now()
				got, err := getOnce(ctx, e, b, sys, row)
				d := time.Since(t0)
				if err != nil {
					return nil, fmt.Errorf("get %s of %d messages: %w", sys, row.N, err)
				}
				if got != row.Want[sys] {
					return nil, fmt.Errorf("get %s of %d messages: got %d, want %d", sys, row.N, got, row.Want[sys])
				}
				row.Got[sys] = got
				if i >= 0 {
					lat[sys] = append(lat[sys], d)
					r := i * rounds / iters
					rlat[sys][r] = append(rlat[sys][r], d)
				}
			}
		}
		for sys, l := range lat {
			row.D[sys] = distOf(l)
		}
		for _, pair := range getRatioPairs {
			if s := p50Ratios(rlat[pair[0]], rlat[pair[1]]); s.Measured() {
				row.Ratios[ratioKey(pair[0], pair[1])] = s
			}
		}
	}
	if p.NextEvent > 0 {
		if err := nextEvent(ctx, e, res.Rows, p, log); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// getRatioPairs are the systems whose Get times the report compares, as
// (numerator, denominator).
var getRatioPairs = [][2]string{
	{sysConvlog, sysRawKV}, {sysConvlogWarm, sysRawKV}, {sysConvlog, sysPG}, {sysConvlog, sysRedis},
	{sysConvlogCons, sysRawKV}, {sysConvlogCons, sysPG}, {sysConvlogCons, sysRedis},
}

// ratioKey names the ratio of system a's figure to system b's.
func ratioKey(a, b string) string { return a + "/" + b }

// getOrder returns the order of the systems in each round of the Get of
// an n-message thread: a new random permutation per round, from a seed
// fixed by n so that runs are repeatable. A read's time depends on what
// ran just before it (bench/NOTES.md: the raw KV get's time depends on
// its predecessor), and in a rotating order every system
// always follows the same one; shuffled, each follows every other about
// equally often.
func getOrder(n int) func(k int) []int {
	rng := rand.New(rand.NewPCG(uint64(n), 0x6765745f6f726472))
	return func(k int) []int { return rng.Perm(k) }
}

// getOnce reads row's thread from sys and returns how many messages
// (convlog) or events (baselines) it got.
func getOnce(ctx context.Context, e *Env, b *Baselines, sys string, row *GetRow) (int, error) {
	switch sys {
	case sysConvlog, sysConvlogWarm:
		c := e.UncachedClient
		if sys == sysConvlogWarm {
			c = e.Client
		}
		th, err := c.Get(ctx, tenant, row.thread)
		if err != nil {
			return 0, err
		}
		if !th.FromSnapshot {
			return 0, errors.New("not served from the snapshot")
		}
		return th.MessageCount(), nil
	case sysConvlogView, sysConvlogViewLocal, sysConvlogViewTracked:
		c := e.Client
		switch sys {
		case sysConvlogViewLocal:
			c = e.LocalClient
		case sysConvlogViewTracked:
			c = e.TrackedClient
		}
		v, err := c.GetView(ctx, tenant, row.thread)
		if err != nil {
			return 0, err
		}
		if !v.FromSnapshot {
			return 0, errors.New("not served from the snapshot")
		}
		return v.Len(), nil
	case sysConvlogCons:
		th, err := e.UncachedClient.Get(ctx, tenant, row.thread, client.Consistent())
		if err != nil {
			return 0, err
		}
		return th.MessageCount(), nil
	case sysRawKV:
		v, err := e.RawKV.Get(ctx, row.thread)
		if err != nil {
			return 0, err
		}
		if len(v.Value()) != row.EventBytes {
			return 0, fmt.Errorf("raw KV value of %d bytes, want %d", len(v.Value()), row.EventBytes)
		}
		return row.Want[sysRawKV], nil
	case sysPG:
		rows, err := pgRead(ctx, b.PG, row.thread)
		return len(rows), err
	case sysRedis:
		vs, err := b.Redis.LRange(ctx, redisKey(row.thread), 0, -1).Result()
		return len(vs), err
	}
	return 0, fmt.Errorf("unknown system %q", sys)
}

// buildThread creates a thread of n messages (alternating user and
// assistant, size bytes of content each) with atomic turns of up to
// client.MaxTurnEvents events, and reads its raw messages back.
func buildThread(ctx context.Context, e *Env, n, size int) (*loadedThread, error) {
	_, id, v, err := e.Client.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{
		Replies: events.RepliesOff, Title: fmt.Sprintf("bench thread of %d messages", n)}})
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; {
		k := min(client.MaxTurnEvents, n-i)
		evs := make([]events.Event, k)
		for j := range evs {
			evs[j] = events.Event{Payload: message(i+j, size)}
		}
		r, err := e.Client.Append(ctx, tenant, id, evs, client.ExpectVersion(v))
		if err != nil {
			return nil, fmt.Errorf("building a thread of %d messages: %w", n, err)
		}
		v, i = r.Version, i+k
	}
	msgs, err := readLog(ctx, e.JS, provision.DefaultConfig().Stream, "conv."+tenant+"."+id, 0)
	if err != nil {
		return nil, err
	}
	if len(msgs) != n+1 {
		return nil, fmt.Errorf("thread %s: read %d events back, want %d", id, len(msgs), n+1)
	}
	// convlog stores payloads sealed with the thread's key; the baselines
	// (the fold alone, raw KV, Postgres, Redis) hold the clear events, as
	// a store without encryption would, so convlog's rows include opening.
	for _, m := range msgs {
		if m.Data, err = e.Client.Keys().OpenEvent(ctx, m.Data); err != nil {
			return nil, fmt.Errorf("thread %s: open seq %d: %w", id, m.Sequence, err)
		}
	}
	return &loadedThread{id: id, version: v, msgs: msgs}, nil
}

// readLog reads a subject's messages with batched direct gets (pages of
// 1,000), up to upTo (0 = all).
func readLog(ctx context.Context, js jetstream.JetStream, stream, subject string, upTo uint64) ([]*jetstream.RawStreamMsg, error) {
	var out []*jetstream.RawStreamMsg
	from := uint64(1)
	for {
		it, err := jetstreamext.GetBatch(ctx, js, stream, 1000, jetstreamext.GetBatchSubject(subject), jetstreamext.GetBatchSeq(from))
		if err != nil {
			return nil, err
		}
		n := 0
		for m, err := range it {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			if upTo != 0 && m.Sequence > upTo {
				return out, nil
			}
			out = append(out, m)
			from = m.Sequence + 1
			n++
		}
		if n < 1000 {
			return out, nil
		}
	}
}

// loadBaselines writes lt's event bytes into the raw KV bucket (one value,
// when it fits), Postgres and Redis.
func loadBaselines(ctx context.Context, e *Env, b *Baselines, lt *loadedThread, n int) (*GetRow, error) {
	row := &GetRow{N: n, D: map[string]Dist{}, Ratios: map[string]Spread{}, Got: map[string]int{}, Want: map[string]int{}, Notes: map[string]string{},
		thread: lt.id, version: lt.version}
	var all []byte
	for _, m := range lt.msgs {
		all = append(all, m.Data...)
	}
	row.EventBytes = len(all)
	row.Want[sysConvlog], row.Want[sysConvlogWarm], row.Want[sysConvlogView], row.Want[sysConvlogCons] = n, n, n, n
	row.Want[sysConvlogViewLocal], row.Want[sysConvlogViewTracked] = n, n
	row.Want[sysRawKV], row.Want[sysPG], row.Want[sysRedis] = len(lt.msgs), len(lt.msgs), len(lt.msgs)
	// A KV value must fit in one NATS message (max_payload, 1 MiB by
	// default) with its headers.
	if limit := int(e.NC.MaxPayload()) - 1024; len(all) > limit {
		row.Notes[sysRawKV] = fmt.Sprintf("impossible: %s > max_payload", fmtBytes(uint64(len(all))))
	} else if _, err := e.RawKV.Put(ctx, lt.id, all); err != nil {
		return nil, fmt.Errorf("raw KV put: %w", err)
	}
	if b.PG != nil {
		rows := make([]pgRow, len(lt.msgs))
		for i, m := range lt.msgs {
			rows[i] = pgRow{seq: int64(m.Sequence), at: m.Time, body: m.Data}
		}
		if err := pgLoad(ctx, b.PG, lt.id, rows); err != nil {
			return nil, fmt.Errorf("postgres load: %w", err)
		}
		if _, err := b.PG.Exec(ctx, "ANALYZE "+pgTable); err != nil {
			return nil, err
		}
	}
	if b.Redis != nil {
		for i := 0; i < len(lt.msgs); i += 1000 {
			vals := make([]any, 0, 1000)
			for _, m := range lt.msgs[i:min(i+1000, len(lt.msgs))] {
				vals = append(vals, m.Data)
			}
			if err := b.Redis.RPush(ctx, redisKey(lt.id), vals...).Err(); err != nil {
				return nil, fmt.Errorf("redis load: %w", err)
			}
		}
	}
	return row, nil
}

// nextEvent appends p.NextEvent single events to each row's thread, one at
// a time and the lengths interleaved, and times each one's projection.
func nextEvent(ctx context.Context, e *Env, rows []*GetRow, p GetParams, log func(string, ...any)) error {
	type seen struct {
		lag, took time.Duration
	}
	applied := make(chan projector.Applied, 64)
	steps := make(chan projector.Step, 64)
	want := map[string]bool{}
	for _, r := range rows {
		want[r.thread] = true
	}
	e.SetOnApply(func(a projector.Applied) {
		if want[a.Thread] {
			applied <- a
		}
	})
	e.SetOnStep(func(s projector.Step) {
		if want[s.Thread] {
			steps <- s
		}
	})
	defer e.SetOnApply(nil)
	defer e.SetOnStep(nil)
	lags := map[*GetRow][]time.Duration{}
	tooks := map[*GetRow][]time.Duration{}
	log("get: timing the projection of %d single events per thread length", p.NextEvent)
	for i := range p.NextEvent {
		for _, r := range rows {
			res, err := e.Client.Append(ctx, tenant, r.thread, []events.Event{{Payload: message(r.N+i, p.Content)}}, client.ExpectVersion(r.version))
			if err != nil {
				return fmt.Errorf("next event on %d messages: %w", r.N, err)
			}
			r.version = res.Version
			var got seen
			gotApply, gotStep := false, false
			timeout := time.After(30 * time.Second)
			for !gotApply || !gotStep {
				select {
				case a := <-applied:
					if a.Thread == r.thread && a.Seq == r.version {
						got.lag, gotApply = a.Lag, true
					}
				case s := <-steps:
					if s.Thread == r.thread && s.To >= r.version {
						got.took, gotStep = s.Took, true
					}
				case <-timeout:
					return fmt.Errorf("next event on %d messages: not projected after 30s", r.N)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			lags[r] = append(lags[r], got.lag)
			tooks[r] = append(tooks[r], got.took)
		}
	}
	for _, r := range rows {
		r.Next, r.Step = distOf(lags[r]), distOf(tooks[r])
	}
	return nil
}

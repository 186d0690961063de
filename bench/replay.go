package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/events"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// ReplayResults are the replay section's figures: events per second over
// one long thread, median of Reps runs each.
type ReplayResults struct {
	Events int // events in the thread (thread.created included)
	// Rates by what was timed: convlog's replay from the log (client.Get
	// with AtSeq: batched direct gets and the fold), the fold alone over
	// the messages in memory (fold.ApplyBytes), a raw JetStream read
	// of the same messages without folding, and Postgres and Redis reads
	// of the same bytes followed by the same fold.
	Rates map[string]float64
	Order []string
	// Sealing is what sealing and opening one event of the thread cost.
	Sealing SealingCost
	// ConsumerRatio is convlog's replay rate over the consumer read's
	// (replayConsumer), taken in each run of the ways (the two run in the
	// same round) and summarized over the runs.
	ConsumerRatio Spread
}

// SealingCost is the time per event of sealing and opening the thread's
// events (threadkey's SealEvent and OpenEvent, the thread's key cached)
// and of decoding the clear bytes, median of the runs over up to
// sealSample events.
type SealingCost struct {
	Seal, Open, Decode time.Duration
}

// sealSample is how many of the thread's events the sealing figures use.
const sealSample = 2000

// measureSealing times sealing, opening and decoding the first events of
// lt, reps times each, alternated.
func measureSealing(ctx context.Context, e *Env, lt *loadedThread, reps int) (SealingCost, error) {
	msgs := lt.msgs[:min(len(lt.msgs), sealSample)]
	sealed := make([][]byte, len(msgs))
	var seal, open, decode []time.Duration
	per := func(t0 time.Time) time.Duration { return time.Since(t0) / time.Duration(len(msgs)) }
	for range max(reps, 3) {
		t0 := time.Now()
		for i, m := range msgs {
			var err error
			if sealed[i], err = e.Client.Keys().SealEvent(ctx, m.Data); err != nil {
				return SealingCost{}, err
			}
		}
		seal = append(seal, per(t0))
		t0 = time.Now()
		for _, b := range sealed {
			if _, err := e.Client.Keys().OpenEvent(ctx, b); err != nil {
				return SealingCost{}, err
			}
		}
		open = append(open, per(t0))
		t0 = time.Now()
		for _, m := range msgs {
			if _, err := events.UnmarshalNoCopy(m.Data); err != nil {
				return SealingCost{}, err
			}
		}
		decode = append(decode, per(t0))
	}
	return SealingCost{Seal: medianDur(seal), Open: medianDur(open), Decode: medianDur(decode)}, nil
}

// Replay rows.
const (
	replayConvlog = "convlog replay (client.Get AtSeq: read + fold)"
	replayFold    = "fold only (fold.ApplyBytesNoCopy, as the replay folds; messages in memory)"
	// replayFoldCopy is the fold with Unmarshal's copies of the strings
	// (fold.ApplyBytes): what the replay folded before it shared them.
	replayFoldCopy = "fold only, copying the strings (fold.ApplyBytes)"
	replayRaw      = "raw JetStream read, no fold (batched direct get)"
	replayPG       = "PostgreSQL SELECT + the same fold"
	replayRedis    = "Redis LRANGE + the same fold"
	replayVerify   = "convlog audit verify (read, leaf hashes, chain and checkpoint check)"
	// The limits the replay is compared with: decoding the same bytes in
	// memory, and reading them through a consumer (what convlog's long
	// reads use) without decoding.
	replayDecode   = "decode only (events.UnmarshalNoCopy of the same bytes in memory): the physical limit"
	replayConsumer = "raw JetStream read through an ordered consumer, no decode"
)

// foldAll folds lt's messages, in memory, with apply into a state with
// room for all of them (as the client's replay reserves it); it returns
// the messages folded.
func foldAll(tenant string, lt *loadedThread, apply func(*fold.State, uint64, time.Time, []byte) error) int {
	s := fold.NewState(tenant, lt.id)
	s.Reserve(len(lt.msgs))
	for _, m := range lt.msgs {
		_ = apply(s, m.Sequence, m.Time, m.Data)
	}
	return s.MessageCount()
}

// RunReplay replays lt from the log, reps times per way.
func RunReplay(ctx context.Context, e *Env, b *Baselines, lt *loadedThread, reps int, log func(string, ...any)) (*ReplayResults, error) {
	n := len(lt.msgs)
	want := n - 1 // messages: every event but thread.created
	res := &ReplayResults{Events: n, Rates: map[string]float64{}}
	log("replay: %d events, %d runs per way", n, reps)
	ways := []replayWay{
		{replayConvlog, func() (int, error) {
			th, err := e.Client.Get(ctx, tenant, lt.id, client.AtSeq(lt.version))
			if err != nil {
				return 0, err
			}
			return th.MessageCount(), nil
		}},
		{replayFold, func() (int, error) { return foldAll(tenant, lt, fold.ApplyBytesNoCopy), nil }},
		{replayFoldCopy, func() (int, error) { return foldAll(tenant, lt, fold.ApplyBytes), nil }},
		{replayRaw, func() (int, error) {
			msgs, err := readLog(ctx, e.JS, provision.DefaultConfig().Stream, "conv."+tenant+"."+lt.id, lt.version)
			return len(msgs) - 1, err
		}},
		{replayDecode, func() (int, error) {
			for _, m := range lt.msgs {
				if _, err := events.UnmarshalNoCopy(m.Data); err != nil {
					return 0, err
				}
			}
			return want, nil
		}},
		{replayConsumer, func() (int, error) {
			n, err := natstest.ReadOrdered(ctx, e.JS, provision.DefaultConfig().Stream, "conv."+tenant+"."+lt.id, lt.version)
			return n - 1, err
		}},
	}
	// The audit verifier over the same thread: a checkpointer covers the
	// stream first (its catch-up is not timed).
	// Up to the stream's last message, not lt.version: the get section
	// appends to the thread after it was built (its projection timing),
	// and the verifier checks every stored event of the thread.
	st, err := e.JS.Stream(ctx, provision.DefaultConfig().Stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkpointAll(ctx, e, info.State.LastSeq, log); err != nil {
		return nil, err
	}
	ways = append(ways, replayWay{replayVerify, func() (int, error) {
		rep, err := audit.Verify(ctx, e.JS, audit.Scope{Tenant: tenant, Thread: lt.id}, audit.VerifyOptions{Trusted: []ed25519.PublicKey{auditKey.Public().(ed25519.PublicKey)}})
		if err != nil {
			return 0, err
		}
		if !rep.OK || rep.Unsigned != 0 || rep.Verified < uint64(n) {
			return 0, fmt.Errorf("audit verify: ok %v, %d verified of at least %d, %d unsigned, problems %+v", rep.OK, rep.Verified, n, rep.Unsigned, rep.Problems)
		}
		// It verifies every stored event of the thread: the get section
		// may have appended a few after the version the replay reads.
		return want, nil
	}})
	if b.PG != nil {
		ways = append(ways, replayWay{replayPG, func() (int, error) {
			rows, err := pgRead(ctx, b.PG, lt.id)
			if err != nil {
				return 0, err
			}
			s := fold.NewState(tenant, lt.id)
			for _, r := range rows {
				_ = fold.ApplyBytes(s, uint64(r.seq), r.at, r.body)
			}
			return s.MessageCount(), nil
		}})
	}
	if b.Redis != nil {
		ways = append(ways, replayWay{replayRedis, func() (int, error) {
			vs, err := b.Redis.LRange(ctx, redisKey(lt.id), 0, -1).Result()
			if err != nil {
				return 0, err
			}
			s := fold.NewState(tenant, lt.id)
			now := time.Now()
			for i, v := range vs {
				// A list has no sequence or store time: use the position.
				_ = fold.ApplyBytes(s, uint64(i+1), now, []byte(v))
			}
			return s.MessageCount(), nil
		}})
	}
	// convlog's replay and the consumer read, whose ratio is the target,
	// run as a pair at the start of every round: pairRepeat reads of
	// each, one at a time in the order AB BA AB ... (A and B swapping
	// every round), each read timed alone, and the round's rate of each
	// is that of its fastest read. The load of other processes on the
	// shared cores only ever adds time to a read, and its bursts last
	// about as long as a read (0.05-0.1 s in quick mode): the fastest of
	// a few reads close together is the one it disturbed least, for
	// either way. The other ways follow in a rotating order. Every timed
	// read starts after a collection, so that none pays for the garbage
	// of the one before.
	var pair []int
	for k, w := range ways {
		if w.name == replayConvlog || w.name == replayConsumer {
			pair = append(pair, k)
		}
	}
	others := slices.DeleteFunc(slices.Clone(ways), func(w replayWay) bool {
		return w.name == replayConvlog || w.name == replayConsumer
	})
	rep := pairRepeat(n)
	rates := map[string][]float64{}
	timed := func(w replayWay, times int) error {
		runtime.GC()
		t0 := time.Now()
		for range times {
			got, err := w.run()
			if err != nil {
				return fmt.Errorf("replay %s: %w", w.name, err)
			}
			if got != want {
				return fmt.Errorf("replay %s: %d messages, want %d", w.name, got, want)
			}
		}
		rates[w.name] = append(rates[w.name], float64(times*n)/time.Since(t0).Seconds())
		return nil
	}
	for r := range reps {
		if err := timedPair(ways[pair[r%2]], ways[pair[1-r%2]], rep, n, want, rates); err != nil {
			return nil, err
		}
		for k := range others {
			if err := timed(others[(k+r)%len(others)], 1); err != nil {
				return nil, err
			}
		}
	}
	for _, w := range ways {
		res.Order = append(res.Order, w.name)
		res.Rates[w.name] = median(rates[w.name])
	}
	perRound := make([]float64, reps)
	for i := range perRound {
		if c := rates[replayConsumer][i]; c > 0 {
			perRound[i] = rates[replayConvlog][i] / c
		}
	}
	res.ConsumerRatio = spreadOf(perRound)
	if res.Sealing, err = measureSealing(ctx, e, lt, reps); err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	return res, nil
}

// timedPair times a and b, times reads of each, one read at a time in
// the order AB BA AB BA ..., each after a collection, and appends to
// rates the rate of each in its fastest read (n events per read); a read
// must return want messages.
func timedPair(a, b replayWay, times, n, want int, rates map[string][]float64) error {
	best := map[string]time.Duration{}
	read := func(w replayWay) error {
		runtime.GC()
		t0 := time.Now()
		got, err := w.run()
		if d := time.Since(t0); best[w.name] == 0 || d < best[w.name] {
			best[w.name] = d
		}
		if err != nil {
			return fmt.Errorf("replay %s: %w", w.name, err)
		}
		if got != want {
			return fmt.Errorf("replay %s: %d messages, want %d", w.name, got, want)
		}
		return nil
	}
	for i := range times {
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		if err := read(first); err != nil {
			return err
		}
		if err := read(second); err != nil {
			return err
		}
	}
	for _, w := range []replayWay{a, b} {
		rates[w.name] = append(rates[w.name], float64(n)/best[w.name].Seconds())
	}
	return nil
}

// replayWay is one way of the replay section: its row name and a run
// that returns how many messages it read.
type replayWay struct {
	name string
	run  func() (int, error)
}

// pairRepeat is how many times convlog's replay and the consumer read of
// a thread of n events each run in one round (timedPair, which keeps the
// fastest of each): about 100,000 events of each (nine reads of quick
// mode's 10,001-event thread, one of a full run's 100,001). One read of
// 10,001 events, about 0.05-0.1 s, is moved 2-4x by one burst of the
// shared machine's load.
func pairRepeat(n int) int { return max(1, 100_000/n) }

// auditKey signs the bench's checkpoints (generated per run).
var auditKey = func() ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}()

// checkpointAll runs an audit checkpointer until a checkpoint covers seq,
// then stops it.
func checkpointAll(ctx context.Context, e *Env, seq uint64, log func(string, ...any)) error {
	covered := make(chan struct{})
	var once sync.Once
	cp, err := audit.NewCheckpointer(e.JS, audit.Config{Key: auditKey, OnCheckpoint: func(c audit.Checkpoint, _ uint64) {
		if c.Seq >= seq {
			once.Do(func() { close(covered) })
		}
	}})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = cp.Run(cctx) }()
	defer func() { cancel(); <-done }()
	t0 := time.Now()
	select {
	case <-covered:
		log("replay: audit checkpoints cover the stream up to %d (%.1fs)", seq, time.Since(t0).Seconds())
		return nil
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("audit: no checkpoint covered sequence %d within 5 minutes", seq)
	case <-ctx.Done():
		return ctx.Err()
	}
}

package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/snapstore"
)

// readMaxBytes bounds one batched direct get of events.
const readMaxBytes = 16 << 20

// maxConflicts is how many compare-and-swap conflicts in a row one step
// tolerates before it gives up (and naks, to retry later).
const maxConflicts = 64

// rawEvent is one message read from a thread's subject.
type rawEvent struct {
	seq  uint64
	time time.Time
	data []byte
	// prev is the sequence of the event before it on the thread, known
	// only for some triggers (hasPrev): the sequence the writer expected
	// to be the subject's last (Nats-Expected-Last-Subject-Sequence; the
	// server stored the event only if it was), or the thread's previous
	// event in this instance's delivery window (deliveryWindow).
	prev    uint64
	hasPrev bool
}

// chainFrom returns the longest prefix of triggers (sorted by sequence)
// that continues version without a gap: the first expected version as the
// subject's last sequence, each next one the one before it.
func chainFrom(version uint64, triggers []rawEvent, limit int) []rawEvent {
	n := 0
	for n < len(triggers) && n < limit {
		t := triggers[n]
		want := version
		if n > 0 {
			want = triggers[n-1].seq
		}
		if !t.hasPrev || t.prev != want {
			break
		}
		n++
	}
	return triggers[:n]
}

// project runs steps until the thread's snapshot holds every event that
// was readable, and returns the version reached. behind is the consumer's
// pending count, for the hook.
func (p *Projector) project(ctx context.Context, ts *threadState, behind uint64, triggers []rawEvent) (uint64, error) {
	for {
		version, more, err := p.step(ctx, ts, behind, triggers)
		if err != nil && errors.Is(err, snapstore.ErrCorrupt) && !ts.rebuild {
			// Snapshots are derived data: fold the log again over what
			// cannot be read, instead of failing this thread for ever.
			p.log.Warn("projector: unreadable snapshot; rebuilding it from the log", "tenant", ts.tenant, "thread", ts.thread, "err", err)
			p.report(Failure{Tenant: ts.tenant, Thread: ts.thread, Reason: FailureSnapshotRebuilt, Err: err})
			ts.rebuild = true
			p.cache.Remove(ts.key())
			continue
		}
		if err != nil {
			return version, err
		}
		ts.rebuild = false
		if !more {
			return version, nil
		}
		triggers = nil
	}
}

// report calls Config.OnFailure when it is set.
func (p *Projector) report(f Failure) {
	if p.cfg.OnFailure != nil {
		p.cfg.OnFailure(f)
	}
}

// step reads the thread's head (from the cache when this instance wrote
// it last), folds up to MaxBatch events after its version, writes the new
// chunks, then the head with compare-and-swap, then the index entry. On a
// conflict it reloads and starts over. more is true when more events may
// be waiting.
//
// The events come from the stream (a batched direct get by subject), or,
// when the triggers continue the head's version without a gap (each one's
// previous event is known: from the OCC header, as appends through client/
// write it, or from this instance's delivery window), from the triggers
// themselves: one round trip less.
func (p *Projector) step(ctx context.Context, ts *threadState, behind uint64, triggers []rawEvent) (version uint64, more bool, err error) {
	start := time.Now()
	ctx, cancel := p.stepContext(ctx)
	defer cancel()
	key := ts.key()
	reads := 0 // reads of the event log
	for conflicts := 0; ; conflicts++ {
		if conflicts > maxConflicts {
			return 0, false, fmt.Errorf("projector: thread %s/%s: %d compare-and-swap conflicts in a row", ts.tenant, ts.thread, conflicts)
		}
		cur, err := p.head(ctx, ts)
		if err != nil {
			return 0, false, err
		}
		evs, fresh, fromTriggers, err := p.stepEvents(ctx, ts, cur, triggers, &reads)
		if err != nil {
			return cur.Version(), false, err
		}
		if len(evs) == 0 {
			// Nothing new: finish what a crashed or cancelled step may have
			// left (garbage, index) and report where the thread is.
			// Cached heads are shared (the dispatcher reads them): Tidy
			// returns a copy.
			c2 := p.store.Tidy(ctx, cur)
			if err := p.store.SyncIndex(ctx, c2); err != nil {
				return c2.Version(), false, err
			}
			p.cache.Put(key, c2, int64(c2.Cost()))
			return c2.Version(), false, nil
		}
		w := p.store.Edit(ctx, cur)
		from := cur.Version()
		applied, err := p.foldEvents(ctx, w, evs, behind)
		if err != nil {
			return from, false, err
		}
		if applied == nil {
			p.cache.Remove(key)
			continue // a chunk we needed is gone: our head is stale
		}
		c, err := p.store.Commit(ctx, cur, w)
		if errors.Is(err, snapstore.ErrConflict) {
			p.cache.Remove(key)
			continue
		}
		if err != nil {
			return from, false, err
		}
		written := time.Now()
		next := p.store.Tidy(ctx, c.Head)
		idxErr := p.store.SyncIndex(ctx, next)
		p.cache.Put(key, next, int64(next.Cost()))
		p.reportStep(ctx, ts, evs, applied, Step{Tenant: ts.tenant, Thread: ts.thread, From: from, To: next.Version(), Events: len(evs),
			ChunksWritten: c.ChunksWritten, HeadBytes: c.HeadBytes, Conflicts: conflicts, LogReads: reads}, start, written)
		if fromTriggers {
			// Events after the chain may exist (delivered to another
			// instance, or not delivered yet): only a read can tell, and
			// only if a trigger beyond the chain says there are some.
			return next.Version(), len(evs) < len(fresh), idxErr
		}
		return next.Version(), len(evs) >= p.cfg.MaxBatch, idxErr
	}
}

// stepContext is ctx bounded by Config.StepTimeout when it has no deadline
// of its own: the one budget of a step's calls to the server (nats.go
// builds a timeout context for each call whose context has none).
func (p *Projector) stepContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, p.cfg.StepTimeout)
}

// stepEvents returns the events a step folds onto cur: the chain of
// triggers that continues cur's version, or else, when there is no
// trigger or a trigger past cur's version, up to MaxBatch events read
// from the log after it. fresh are the triggers past cur's version, and
// fromTriggers tells where evs came from. Each read of the log counts in
// reads.
func (p *Projector) stepEvents(ctx context.Context, ts *threadState, cur *snapstore.Head, triggers []rawEvent, reads *int) (evs, fresh []rawEvent, fromTriggers bool, err error) {
	// Triggers at or below the head's version are folded already.
	fresh = triggers
	for len(fresh) > 0 && fresh[0].seq <= cur.Version() {
		fresh = fresh[1:]
	}
	evs = chainFrom(cur.Version(), fresh, p.cfg.MaxBatch)
	if len(evs) == 0 && len(fresh) > 0 {
		// The first trigger does not say which event came before it
		// (no OCC header, and not proven by the delivery window, e.g.
		// with several instances): ask for the subject's next event
		// after the head with a single get, which skips the pending
		// count a batched read makes the server compute; if it is the
		// trigger itself, the chain starts there. (The server finds it
		// by walking the messages stored after the head's version.)
		*reads++
		next, err := directget.Next(ctx, p.js, p.cfg.Stream, ts.subject, cur.Version()+1)
		if err == nil && next != nil && next.Sequence == fresh[0].seq {
			evs = append([]rawEvent{fresh[0]}, chainFrom(fresh[0].seq, fresh[1:], p.cfg.MaxBatch-1)...)
		}
	}
	if len(evs) > 0 {
		return evs, fresh, true, nil
	}
	if len(triggers) == 0 || len(fresh) > 0 {
		evs, err = p.read(ctx, ts.subject, cur.Version()+1, p.cfg.MaxBatch, reads)
	}
	return evs, fresh, false, err
}

// foldEvents folds evs into w and returns what each one did, or nil when
// a chunk the edit needed is gone (snapstore.ErrConflict: the head is
// stale).
func (p *Projector) foldEvents(ctx context.Context, w *snapstore.Edit, evs []rawEvent, behind uint64) ([]Applied, error) {
	applied := make([]Applied, 0, len(evs))
	for _, ev := range evs {
		a, err := p.fold(ctx, w, ev)
		if errors.Is(err, snapstore.ErrConflict) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		a.Behind = behind
		applied = append(applied, a)
	}
	return applied, nil
}

// reportStep calls OnApply for each applied event (its lag: written minus
// its stream time) and OnStep with st completed, and logs the step and
// its rejections.
func (p *Projector) reportStep(ctx context.Context, ts *threadState, evs []rawEvent, applied []Applied, st Step, start, written time.Time) {
	for _, a := range applied {
		if a.Code != "" {
			st.Rejected++
		}
	}
	if p.cfg.OnApply != nil {
		for i, a := range applied {
			a.Lag = written.Sub(evs[i].time)
			p.cfg.OnApply(a)
		}
	}
	st.Took = time.Since(start)
	if p.cfg.OnStep != nil {
		p.cfg.OnStep(st)
	}
	if p.log.Enabled(ctx, slog.LevelDebug) {
		p.log.Debug("projected", "tenant", ts.tenant, "thread", ts.thread, "seq", st.To, "events", st.Events,
			"rejected", st.Rejected, "chunks", st.ChunksWritten, "took", st.Took)
	}
	for _, a := range applied {
		if a.Code != "" {
			p.log.Info("event rejected", "tenant", ts.tenant, "thread", ts.thread, "seq", a.Seq, "event_type", a.Type, "code", a.Code)
		}
	}
}

// head returns the thread's head: the cached one when this instance wrote
// the newest head it knows of, else read from KV (a fresh empty state when
// there is none), or the empty head to rebuild over when the stored one is
// unreadable (ts.rebuild). An empty head for redelivered triggers sweeps
// (snapstore.Head.WithSweep): a step that crashed before the thread's
// first head may have left deltas.
func (p *Projector) head(ctx context.Context, ts *threadState) (*snapstore.Head, error) {
	if c, ok := p.cache.Get(ts.key()); ok {
		return c, nil
	}
	if ts.rebuild {
		return p.store.RebuildHead(ctx, ts.tenant, ts.thread)
	}
	h, err := p.store.ReadHead(ctx, ts.tenant, ts.thread)
	if err == nil && h.Version() == 0 && ts.redelivered {
		h = h.WithSweep()
	}
	return h, err
}

// firstOnSubject returns the sequence of the first message stored on the
// thread's subject (0 when it has none).
func (p *Projector) firstOnSubject(ctx context.Context, tenant, thread string) (uint64, error) {
	subject, err := p.subjects.Thread(tenant, thread)
	if err != nil {
		return 0, err
	}
	m, err := directget.Next(ctx, p.js, p.cfg.Stream, subject, 1)
	if err != nil {
		return 0, fmt.Errorf("projector: first message of %s: %w", subject, err)
	}
	if m == nil {
		return 0, nil
	}
	return m.Sequence, nil
}

// fold applies one event to w and settles the layout. A rejection is not
// an error: it is in the returned Applied.
func (p *Projector) fold(ctx context.Context, w *snapstore.Edit, ev rawEvent) (Applied, error) {
	tenant, thread := w.Thread()
	s := w.State()
	a := Applied{Tenant: tenant, Thread: thread, Seq: ev.seq}
	before := w.Mark()
	// A gone key leaves the sealed bytes (folded as undecodable); an
	// error reading the key is retried.
	data, oerr := p.keys.OpenStored(ctx, ev.data)
	if oerr != nil {
		return a, oerr
	}
	// The decoded strings share data's memory (no copy per string): data
	// is a buffer of its own that nothing modifies, the message bytes
	// nats.go copied for the trigger or the direct get, or the opened
	// event threadkey returned.
	e, derr := events.UnmarshalNoCopy(data)
	a.Type, a.EventID = e.Type, e.ID
	if e.Type == events.TypeRedacted {
		// The thread's key was rotated: read the new record now.
		p.keys.Forget(tenant, thread)
	}
	var err error
	if derr != nil {
		err = fold.ApplyBytes(s, ev.seq, ev.time, data)
	} else {
		st := events.Stored{Event: e, Seq: ev.seq, StoredAt: ev.time}
		proven := false
		if e.Type == events.TypeErased && s.Version != 0 {
			first, ferr := p.firstOnSubject(ctx, tenant, thread)
			if ferr != nil {
				return a, ferr // retried: an unproven marker would be rejected for good
			}
			proven = first == ev.seq // the events the head holds were purged
		}
		if proven {
			err = fold.ApplyErasure(s, st)
		} else {
			err = fold.Apply(s, st)
		}
		if errors.Is(err, fold.ErrNeedHistory) {
			err = p.applyWithHistory(ctx, w, st)
		}
		if errors.Is(err, fold.ErrNeedParent) {
			err = p.reader.ApplyFork(ctx, s, st)
		}
	}
	if err != nil {
		code, ok := rejection(err)
		if !ok {
			return a, err
		}
		a.Code = code
	}
	return a, w.Settle(ctx, before)
}

// rejection returns the code of the fold.RejectionError in err's chain.
// A function of its own so that the error target escapes to the heap only
// for an event that failed, not for every event folded.
func rejection(err error) (fold.Code, bool) {
	var rej *fold.RejectionError
	if errors.As(err, &rej) {
		return rej.Code, true
	}
	return "", false
}

// applyWithHistory applies an event that needs messages older than the
// tail (a compaction that cuts before it): it loads the chunks from the one
// the cut falls in, or all of them, and applies again. If the event is
// rejected the loaded messages are dropped again.
func (p *Projector) applyWithHistory(ctx context.Context, w *snapstore.Edit, st events.Stored) error {
	s := w.State()
	froms := []int{0}
	if c, ok := st.Payload.(events.Compaction); ok {
		if f := w.CompactionStart(c.UpToSeq); f > 0 {
			froms = []int{f, 0}
		}
	}
	for _, from := range froms {
		n, err := w.LoadFrom(ctx, from)
		if err != nil {
			return err
		}
		err = fold.Apply(s, st)
		if err == nil {
			return nil
		}
		// Rejected, or still not enough history: undo the load.
		s.Messages = s.Messages[n:]
		s.Base += n
		if !errors.Is(err, fold.ErrNeedHistory) {
			return err
		}
	}
	return fmt.Errorf("projector: event %d of %s/%s needs history the full history does not give", st.Seq, st.Tenant, st.Thread)
}

// read returns up to limit events of subject from sequence from on, with
// batched direct gets, and adds their number to *reads.
func (p *Projector) read(ctx context.Context, subject string, from uint64, limit int, reads *int) ([]rawEvent, error) {
	var out []rawEvent
	for len(out) < limit {
		*reads++
		msgs, pending, err := directget.Batch(ctx, p.js, p.cfg.Stream, subject, from, limit-len(out), readMaxBytes)
		for _, m := range msgs {
			out = append(out, rawEvent{seq: m.Sequence, time: m.Time, data: m.Data})
		}
		if err != nil {
			return out, fmt.Errorf("projector: read %s from seq %d: %w", subject, from, err)
		}
		if len(msgs) == 0 || pending == 0 {
			break
		}
		from = msgs[len(msgs)-1].Sequence + 1
	}
	return out, nil
}

package projector

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/snapstore"
)

// Coalesced index writes (issue 22: fewer KV writes per projection step).
//
// A thread's index entry (snapstore.Summary, what client.List reads)
// changes with every event, but a listing needs no more than a recent
// version of it. So an instance writes a thread's entry at most once per
// Config.IndexInterval: a step inside the interval writes the head and
// leaves the entry pending. The entry is written by the thread's first
// step after the interval, or by a flush that the index ticker queues on
// the thread once the interval has passed (a worker runs it, in turn with
// the thread's steps). A thread written for the first time in an interval
// is indexed at once, so a thread that gets one event now and then is
// listed with no delay.
//
// Crash safety: the triggers a step folded are acked only once an index
// write covers them; until then the instance holds them (indexState.held).
// A crash leaves them unacked, so they are delivered again after AckWait,
// and the step that gets them finds them folded and writes the index
// (step's "nothing new" path); a shutdown naks them. So an index entry is
// never left behind its head for longer than IndexInterval plus, after a
// crash, AckWait. Held triggers count against MaxAckPending: when a
// quarter of it is held, every step writes its index again until they are
// released.

// indexState is one thread's index writes by this instance.
type indexState struct {
	tenant, thread, subject string
	// written is when this instance last wrote (or found current) the
	// thread's index entry.
	written time.Time
	// pending: a step since then left the entry behind its head.
	pending bool
	// held are triggers folded into the head whose index write is
	// pending: acked when it is written.
	held []jetstream.Msg
	// queued: a flush is queued on the thread (indexTicker).
	queued bool
}

// indexNow reports whether the step that just wrote h (not shared yet)
// writes ts's index entry now; if not, the entry is marked pending (and
// the triggers of the step will be held). Always true with IndexInterval
// negative.
func (p *Projector) indexNow(ts *threadState) bool {
	if p.cfg.IndexInterval < 0 {
		return true
	}
	p.idxMu.Lock()
	defer p.idxMu.Unlock()
	st := p.idx[ts.key()]
	if st == nil || time.Since(st.written) >= p.cfg.IndexInterval || p.idxHeld >= p.heldLimit() {
		return true
	}
	st.pending = true
	return false
}

// heldLimit is how many triggers may be held before every step writes its
// index again.
func (p *Projector) heldLimit() int { return max(1, p.cfg.MaxAckPending/4) }

// syncIndex writes ts's index entry from h (a head not shared yet) when
// indexNow says so, then acks the triggers held for it. Errors: as
// snapstore.Writer.SyncIndex.
func (p *Projector) syncIndex(ctx context.Context, ts *threadState, h *snapstore.Head) error {
	if !p.indexNow(ts) {
		return nil
	}
	if err := p.store.SyncIndex(ctx, h); err != nil {
		return err
	}
	p.indexWritten(ts)
	return nil
}

// indexWritten records that ts's index entry is current and acks the
// triggers held for it.
func (p *Projector) indexWritten(ts *threadState) {
	if p.cfg.IndexInterval < 0 {
		return
	}
	p.idxMu.Lock()
	st := p.idx[ts.key()]
	if st == nil {
		st = &indexState{tenant: ts.tenant, thread: ts.thread, subject: ts.subject}
		p.idx[ts.key()] = st
	}
	st.written, st.pending = time.Now(), false
	held := st.held
	st.held = nil
	p.idxHeld -= len(held)
	p.idxMu.Unlock()
	for _, m := range held {
		_ = m.Ack()
	}
}

// holdAcks holds ms, triggers folded into ts's head, until its index entry
// is written, and reports whether it did: false when the entry is
// current, and the caller acks them.
func (p *Projector) holdAcks(ts *threadState, ms []jetstream.Msg) bool {
	if p.cfg.IndexInterval < 0 || len(ms) == 0 {
		return false
	}
	p.idxMu.Lock()
	defer p.idxMu.Unlock()
	st := p.idx[ts.key()]
	if st == nil || !st.pending {
		return false
	}
	st.held = append(st.held, ms...)
	p.idxHeld += len(ms)
	return true
}

// flushIndex writes ts's index entry from its head (cached, or read) and
// acks the triggers held for it. A failure is logged; the ticker queues
// the flush again.
func (p *Projector) flushIndex(ctx context.Context, ts *threadState) {
	cur, err := p.head(ctx, ts)
	if err == nil {
		// Cached heads are shared: Tidy returns a copy to write from.
		h := p.store.Tidy(ctx, cur)
		if err = p.store.SyncIndex(ctx, h); err == nil {
			p.cache.Put(ts.key(), h, int64(h.Cost()))
			p.indexWritten(ts)
			return
		}
	}
	if ctx.Err() == nil {
		p.log.Warn("projector: index entry not written; will retry", "tenant", ts.tenant, "thread", ts.thread, "err", err)
	}
}

// indexTicker queues a flush on every thread whose index entry has been
// pending for IndexInterval, and forgets threads not written for that
// long, every quarter of IndexInterval until ctx ends.
func (p *Projector) indexTicker(ctx context.Context) {
	if p.cfg.IndexInterval < 0 {
		return
	}
	t := time.NewTicker(max(p.cfg.IndexInterval/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var due []*indexState
		p.idxMu.Lock()
		for key, st := range p.idx {
			if time.Since(st.written) < p.cfg.IndexInterval {
				continue
			}
			switch {
			case st.pending && !st.queued:
				st.queued = true
				due = append(due, st)
			case !st.pending && len(st.held) == 0:
				delete(p.idx, key)
			}
		}
		p.idxMu.Unlock()
		for _, st := range due {
			p.queueFlush(st)
		}
	}
}

// queueFlush hands st's thread to a worker with its flush flag set (unless
// Run has closed the work queue).
func (p *Projector) queueFlush(st *indexState) {
	key := st.tenant + "." + st.thread
	p.mu.Lock()
	ts := p.threads[key]
	if ts == nil {
		ts = &threadState{tenant: st.tenant, thread: st.thread, subject: st.subject}
		p.threads[key] = ts
	}
	ts.flush = true
	start := !ts.running
	ts.running = true
	p.mu.Unlock()
	if start {
		p.sendMu.RLock()
		defer p.sendMu.RUnlock()
		if !p.workClosed {
			p.work <- ts
		}
	}
}

// takeFlush clears ts's flush flag and its index state's queued mark
// (called by the worker that runs it).
func (p *Projector) takeFlush(ts *threadState) {
	p.idxMu.Lock()
	if st := p.idx[ts.key()]; st != nil {
		st.queued = false
	}
	p.idxMu.Unlock()
}

// nakHeld naks every held trigger (Run's shutdown, after the workers
// stopped), so that the next instance gets them at once.
func (p *Projector) nakHeld() {
	p.idxMu.Lock()
	var held []jetstream.Msg
	for _, st := range p.idx {
		held = append(held, st.held...)
		st.held = nil
	}
	p.idxHeld = 0
	p.idxMu.Unlock()
	nakAll(held, 0)
}

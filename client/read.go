package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/snapstore"
)

// GetOption configures a Get.
type GetOption func(*getOptions)

type getOptions struct {
	consistent  bool
	atLeast     uint64
	atSeq       uint64
	asOf        time.Time
	withEvents  bool
	withDeleted bool
}

// Consistent makes Get fold the events past the snapshot from the stream,
// so the answer includes every acknowledged event (docs/design.md invariant 7).
func Consistent() GetOption { return func(o *getOptions) { o.consistent = true } }

// AtLeastVersion makes Get wait (until ctx ends) until the thread is at
// version v or later: read-your-writes after an append returned v.
func AtLeastVersion(v uint64) GetOption { return func(o *getOptions) { o.atLeast = v } }

// AtSeq returns the thread as it was right after the event at sequence seq
// (replay from the log).
func AtSeq(seq uint64) GetOption { return func(o *getOptions) { o.atSeq = seq } }

// AsOf returns the thread as it was at time t (events stored after t are
// not folded).
func AsOf(t time.Time) GetOption { return func(o *getOptions) { o.asOf = t } }

// WithEvents also returns the raw stored events.
func WithEvents() GetOption { return func(o *getOptions) { o.withEvents = true } }

// IncludeDeleted returns a soft-deleted thread instead of ErrThreadNotFound.
func IncludeDeleted() GetOption { return func(o *getOptions) { o.withDeleted = true } }

// loadState returns the complete state of tenant/thread (Base 0) with every
// event up to the stream's current end (or up to upTo when non-zero): the
// projector's snapshot plus the log's tail, or a fold of the whole log when
// there is no snapshot.
func (c *Client) loadState(ctx context.Context, tenant, thread string, upTo uint64) (*fold.State, error) {
	if upTo == 0 {
		probe, err := c.probeThread(ctx, tenant, thread)
		if err != nil {
			return nil, err
		}
		s, err := c.snapshotState(ctx, tenant, thread)
		if err != nil {
			return nil, err
		}
		if s != nil {
			if err := c.foldTailProbed(ctx, s, 0, probe); err != nil {
				return nil, err
			}
			return s, nil
		}
	}
	return c.foldFrom(ctx, tenant, thread, upTo)
}

// probeThread starts a lastProbe of tenant/thread's subject.
func (c *Client) probeThread(ctx context.Context, tenant, thread string) (*lastProbe, error) {
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return nil, err
	}
	return c.probeLast(ctx, subject), nil
}

// snapshotState reads the projector's complete snapshot of the thread. It
// returns nil, nil when there is no snapshot (not projected yet, or no
// projector running): callers fold the log instead. A corrupt snapshot is
// logged and ignored the same way.
func (c *Client) snapshotState(ctx context.Context, tenant, thread string) (*fold.State, error) {
	snap, err := c.snaps.Load(ctx, tenant, thread)
	switch {
	case err == nil:
		return snap.State, nil
	case errors.Is(err, snapstore.ErrNoSnapshot):
		return nil, nil
	case errors.Is(err, snapstore.ErrCorrupt), errors.Is(err, snapstore.ErrSnapshotChanged):
		c.cfg.Logger.Warn("snapshot unusable; folding the log", "tenant", tenant, "thread", thread, "err", err)
		return nil, nil
	}
	return nil, fmt.Errorf("client: snapshot of %s/%s: %w", tenant, thread, err)
}

// Get returns tenant/thread. By default it is served from the projector's
// snapshot, which may lag the log by the projection lag; use [Consistent]
// or [AtLeastVersion] for read-your-writes, [AtSeq] / [AsOf] for replay.
//
// Errors: *NotFoundError (wraps [ErrThreadNotFound]) when the thread has no
// events, was erased, or is soft-deleted (unless [IncludeDeleted]); an
// *events.IDError for bad ids; ctx errors (AtLeastVersion waiting).
func (c *Client) Get(ctx context.Context, tenant, thread string, opts ...GetOption) (*Thread, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Get(ctx, tenant, thread, opts...)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	var o getOptions
	for _, opt := range opts {
		opt(&o)
	}
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return nil, err
	}
	if o.atLeast == 0 {
		ctx2, cancel := c.withTimeout(ctx)
		defer cancel()
		ctx = ctx2
	}
	var (
		state        *fold.State
		evs          []events.Stored
		fromSnapshot bool
	)
	switch {
	case o.atSeq != 0 || !o.asOf.IsZero() || o.withEvents:
		state, evs, err = c.replayState(ctx, subject, tenant, thread, &o)
	case !o.consistent && o.atLeast == 0:
		state, fromSnapshot, err = c.latestState(ctx, tenant, thread)
	default:
		state, err = c.awaitState(ctx, subject, tenant, thread, &o)
	}
	if err != nil {
		return nil, err
	}
	t := *ThreadOf(state)
	t.Events, t.FromSnapshot = evs, fromSnapshot
	if err := threadReadable(&t, tenant, thread, o.withDeleted); err != nil {
		return nil, err
	}
	return &t, nil
}

// replayState folds tenant/thread from the log (subject) up to o.atSeq
// (0 = the end) and up to o.asOf (zero = no limit), and returns the state
// with the decoded stored events when o.withEvents (events that do not
// decode are left out). Events the fold rejects are skipped. It returns
// read errors and errors applying an event other than [fold.ErrRejected].
func (c *Client) replayState(ctx context.Context, subject, tenant, thread string, o *getOptions) (*fold.State, []events.Stored, error) {
	s := fold.NewState(tenant, thread)
	var evs []events.Stored
	for m, err := range c.readRawInto(ctx, subject, 1, o.atSeq, s) {
		if err != nil {
			return nil, nil, err
		}
		if !o.asOf.IsZero() && m.Time.After(o.asOf) {
			break
		}
		if err := c.applyRaw(ctx, s, m); err != nil && !errors.Is(err, fold.ErrRejected) {
			return nil, nil, err
		}
		if o.withEvents {
			st, err := decodeRaw(m)
			if err == nil {
				evs = append(evs, st)
			}
		}
	}
	return s, evs, nil
}

// latestState returns the projector's snapshot of tenant/thread (and true),
// or, when there is none yet, a fold of the log (and false). It returns
// the errors of [Client.snapshotState] and of folding the log.
func (c *Client) latestState(ctx context.Context, tenant, thread string) (*fold.State, bool, error) {
	s, err := c.snapshotState(ctx, tenant, thread)
	if err != nil {
		return nil, false, err
	}
	if s != nil {
		return s, true, nil
	}
	// Not projected yet: the log has the answer.
	s, err = c.foldFrom(ctx, tenant, thread, 0)
	if err != nil {
		return nil, false, err
	}
	return s, false, nil
}

// awaitState returns the complete state of tenant/thread once it is at
// version o.atLeast or later and, when o.consistent, includes every event
// the stream leader has on subject. It polls the log's tail every 10ms
// until then. It returns read errors, and ctx's error (wrapped, with the
// versions) when ctx ends first.
func (c *Client) awaitState(ctx context.Context, subject, tenant, thread string, o *getOptions) (*fold.State, error) {
	atLeast := o.atLeast
	if o.consistent && c.replicated() {
		// Direct gets may be served by a lagging replica (docs/design.md,
		// "Facts about NATS that shape the design"):
		// ask the stream leader how far the thread goes.
		last, err := c.log.leaderLastSeq(ctx, subject)
		if err != nil {
			return nil, err
		}
		atLeast = max(atLeast, last)
	}
	s, err := c.loadState(ctx, tenant, thread, 0)
	if err != nil {
		return nil, err
	}
	for s.Version < atLeast {
		// Not visible yet on the replica that answered: poll the tail.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("client: thread %s/%s at version %d, waiting for %d: %w", tenant, thread, s.Version, atLeast, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
		if err := c.foldTail(ctx, s, 0); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// threadReadable returns the *NotFoundError of a thread Get does not
// return: erased, never created (no events), or soft-deleted unless
// includeDeleted.
func threadReadable(t *Thread, tenant, thread string, includeDeleted bool) error {
	if t.Erased {
		return &NotFoundError{Tenant: tenant, Thread: thread, Reason: "erased", Cause: ErrThreadErased}
	}
	if t.Version == 0 || !t.Exists && t.Events == nil && t.RejectedCount == 0 {
		return &NotFoundError{Tenant: tenant, Thread: thread}
	}
	if t.Deleted && !includeDeleted {
		return &NotFoundError{Tenant: tenant, Thread: thread, Reason: "deleted; pass IncludeDeleted to read it", Cause: ErrThreadDeleted}
	}
	return nil
}

// Events yields the stored events of tenant/thread with from <= seq <= to
// (0 = unbounded), decoded, in stream order. Messages that do not decode
// are yielded with their sequence and the decode error, and iteration goes
// on. It reads batched direct gets; memory does not grow with the thread.
func (c *Client) Events(ctx context.Context, tenant, thread string, from, to uint64) iter.Seq2[events.Stored, error] {
	if p := c.route(tenant, thread); p != c {
		return p.Events(ctx, tenant, thread, from, to)
	}
	return func(yield func(events.Stored, error) bool) {
		subject, err := c.subjects.Thread(tenant, thread)
		if err != nil {
			yield(events.Stored{}, err)
			return
		}
		for m, err := range c.readRaw(ctx, subject, from, to) {
			if err != nil {
				yield(events.Stored{}, err)
				return
			}
			st, derr := decodeRaw(m)
			if derr != nil {
				derr = fmt.Errorf("client: thread %s/%s seq %d: %w", tenant, thread, m.Sequence, derr)
			}
			if !yield(st, derr) {
				return
			}
		}
	}
}

package client

// This file runs the attempts of one Append: read the thread's state at
// the version to append at, check the events against it with the fold,
// publish, and settle what a refusal means (a conflict, or the same
// events stored by an earlier attempt).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/convlog/convlog/fold"
)

// appendRun is one Append call's prepared events and options, shared by
// its attempts.
type appendRun struct {
	c *Client
	p *prepared
	o appendOptions
}

// attempt makes attempt number n (from 1) of the append. done is false
// when another attempt is to be made (AnyVersion: the state moved on);
// otherwise res and err are the call's answer.
func (a *appendRun) attempt(ctx context.Context, n int) (res AppendResult, done bool, err error) {
	s, res, done, err := a.state(ctx, n)
	if done {
		return res, true, err
	}
	checked, folded, err := a.c.checkAll(ctx, s, a.p.events)
	if err != nil && a.o.any && n == 1 && errors.Is(err, fold.ErrRejected) {
		return AppendResult{}, false, nil // checked on the cached state, which may be behind: read, check again
	}
	if err != nil {
		res, err := a.rejected(ctx, s, err)
		return res, true, err
	}
	if a.p.keyDestroyed {
		return AppendResult{}, true, a.keyDestroyed(ctx)
	}
	seqs, dup, maybeStored, err := a.c.publish(ctx, a.p, s.Version)
	if err == nil {
		res, err := a.stored(ctx, s, seqs, dup, checked, folded)
		return res, true, err
	}
	var sc *serverConflict
	if !errors.As(err, &sc) {
		return AppendResult{}, true, err
	}
	return a.conflict(ctx, s, sc, maybeStored, n)
}

// state reads the thread's state for attempt n and checks it against the
// expected version. done is true when that settles the call: an error, a
// conflict, or the events found stored by an earlier attempt.
func (a *appendRun) state(ctx context.Context, n int) (s *fold.State, res AppendResult, done bool, err error) {
	c, p, o := a.c, a.p, a.o
	if s, err = c.stateFor(ctx, p.tenant, p.thread, o, n); err != nil {
		return nil, AppendResult{}, true, err
	}
	if o.hasExpect && s.Version < o.expect {
		// A replica that lags served the read (R>1), or the caller
		// passed a version the thread never had.
		if s, err = c.catchUp(ctx, s, o.expect); err != nil {
			return nil, AppendResult{}, true, err
		}
	}
	if o.hasExpect && s.Version != o.expect {
		if s.Version > o.expect && !p.fresh {
			// Maybe an earlier attempt of this append moved the thread on.
			res, ok, err := c.findAfter(ctx, p, o.expect, s.Version)
			if err != nil || ok {
				return a.foundStored(ctx, "already_stored", res, err)
			}
		}
		return nil, AppendResult{}, true, &ConflictError{Tenant: p.tenant, Thread: p.thread, Expected: o.expect, Actual: s.Version}
	}
	if o.any && n == 1 && !p.fresh && c.maybeForgotten(p) {
		// Outside the duplicate window the server would store a second copy.
		res, ok, err := c.findByIDTime(ctx, p)
		if err != nil || ok {
			return a.foundStored(ctx, "id_time_scan", res, err)
		}
	}
	return s, AppendResult{}, false, nil
}

// foundStored ends the call after a search for the events: with err, or
// with the result of the events found stored (res), logged as found how.
func (a *appendRun) foundStored(ctx context.Context, how string, res AppendResult, err error) (*fold.State, AppendResult, bool, error) {
	if err != nil {
		return nil, AppendResult{}, true, err
	}
	a.c.logDuplicate(a.p, how, 0, res.Version)
	res, err = a.c.sameAsStored(ctx, a.p, res)
	return nil, res, true, err
}

// rejected answers events the fold rejected (err): the same events may be
// stored already (a retry whose first attempt landed), since a second
// answer to a call is rejected by the fold, so it looks before reporting.
// Ids this call generated cannot be stored before it published.
func (a *appendRun) rejected(ctx context.Context, s *fold.State, err error) (AppendResult, error) {
	if a.p.fresh {
		return AppendResult{}, err
	}
	res, ok, ferr := a.c.findAnywhere(ctx, a.p, s, a.o.any)
	if ferr == nil && ok {
		a.c.logDuplicate(a.p, "already_stored", 0, res.Version)
		return a.c.sameAsStored(ctx, a.p, res)
	}
	if errors.Is(ferr, ErrIdempotencyMismatch) {
		return AppendResult{}, ferr // the ids are another append's
	}
	return AppendResult{}, err
}

// keyDestroyed answers an append to a thread whose key an erasure the
// state read did not show destroyed: nothing may be stored for it. It
// answers as the server would have: a conflict when the version differs,
// else not found (erased).
func (a *appendRun) keyDestroyed(ctx context.Context) error {
	p := a.p
	actual, err := a.c.log.leaderLastSeq(ctx, p.subject)
	if err != nil {
		return err
	}
	if a.o.hasExpect && actual != a.o.expect {
		return &ConflictError{Tenant: p.tenant, Thread: p.thread, Expected: a.o.expect, Actual: actual}
	}
	return &NotFoundError{Tenant: p.tenant, Thread: p.thread, Reason: "erased", Cause: ErrThreadErased}
}

// stored is the result of a publish the server acknowledged at seqs, and
// keeps the thread's new state in the cache.
func (a *appendRun) stored(ctx context.Context, s *fold.State, seqs []uint64, dup bool, checked, folded *fold.State) (AppendResult, error) {
	res := a.p.result(seqs, nil, dup)
	if dup {
		a.c.logDuplicate(a.p, "duplicate_ack", 0, res.Version)
		return a.c.sameAsStored(ctx, a.p, res)
	}
	key := threadRef{a.p.tenant, a.p.thread}
	if folded != nil {
		// The events were folded into a copy of the window when
		// checked: give them their stored sequences and keep it.
		folded.Renumber(s.Version, seqs)
		a.c.cache.own(key, folded)
	} else {
		a.c.remember(key, checked, res.Events)
	}
	return res, nil
}

// conflict settles a publish the server refused as a conflict (sc) at the
// version of s: the events stored by an earlier attempt, a *ConflictError,
// or (AnyVersion, attempts left) done false after a short random backoff.
// The cached state stays: it is right for its version, and the next read
// catches up from it.
func (a *appendRun) conflict(ctx context.Context, s *fold.State, sc *serverConflict, maybeStored bool, n int) (AppendResult, bool, error) {
	c, p := a.c, a.p
	actual := sc.actual
	if p.fresh && !maybeStored && sc.code != errCodeBatchDuplicate {
		// Refused, and no earlier send may have stored them: new ids
		// cannot be on the thread.
		if actual == 0 && a.o.hasExpect {
			var err error
			if actual, err = c.log.leaderLastSeq(ctx, p.subject); err != nil {
				return AppendResult{}, true, err
			}
		}
	} else {
		res, ok, got, err := c.resolve(ctx, p, s.Version, sc)
		if err != nil {
			return AppendResult{}, true, err
		}
		if ok {
			c.logDuplicate(p, "read_forward", sc.code, res.Version)
			res, err := c.sameAsStored(ctx, p, res)
			return res, true, err
		}
		actual = got
	}
	conflict := &ConflictError{Tenant: p.tenant, Thread: p.thread, Expected: s.Version, Actual: actual}
	if sc.err != nil {
		conflict.Cause = sc.err
	}
	if a.o.hasExpect || n >= c.cfg.MaxAnyVersionAttempts {
		return AppendResult{}, true, conflict
	}
	c.cfg.Logger.Debug("append conflict, retrying", "tenant", p.tenant, "thread", p.thread,
		"expected", s.Version, "actual", actual, "attempt", n)
	// Contention: back off a random, growing while before retrying.
	if err := sleep(ctx, time.Duration(rand.Int64N(int64(min(n, 20))*int64(time.Millisecond)+1))); err != nil {
		return AppendResult{}, true, fmt.Errorf("client: append to %s/%s: %w (after %d conflicts)", p.tenant, p.thread, err, n)
	}
	return AppendResult{}, false, nil
}

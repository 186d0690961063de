package client

import (
	"context"
	"sync"
	"time"
)

// callContext is the context of an Append whose caller's ctx has no
// deadline: the caller's ctx with the deadline Config.Timeout gives the
// call. Its timer is started only when something waits on it (Done, Err,
// Value, a context derived from it). An append whose thread state and key
// are cached blocks only in its publish, and the publish's attempt context
// carries the call's deadline itself (attemptContext), so such an append
// starts one timer rather than one for the call and one per attempt.
//
// Safe for concurrent use, as every context.
type callContext struct {
	context.Context // the caller's, without a deadline
	deadline        time.Time
	once            sync.Once
	timed           context.Context // the caller's with deadline, from start
	cancel          context.CancelFunc
}

// withCallTimeout returns ctx when it has a deadline (and a nil
// *callContext), else ctx with a deadline Config.Timeout from now, the
// *callContext returned twice. Call the second result's stop (nil-safe)
// when the call ends; it is not a CancelFunc so that no closure is
// allocated per call.
func (c *Client) withCallTimeout(ctx context.Context) (context.Context, *callContext) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, nil
	}
	cc := &callContext{Context: ctx, deadline: time.Now().Add(c.cfg.Timeout)}
	return cc, cc
}

func (cc *callContext) start() context.Context {
	cc.once.Do(func() { cc.timed, cc.cancel = context.WithDeadline(cc.Context, cc.deadline) })
	return cc.timed
}

// stop releases the timer if one was started; a context whose timer never
// started is from then on ended (ended) without making one. Nil: nothing.
func (cc *callContext) stop() {
	if cc == nil {
		return
	}
	cc.once.Do(func() { cc.timed = ended })
	if cc.cancel != nil {
		cc.cancel()
	}
}

// ended is the context of a call that ended without starting its timer:
// canceled, with no values.
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Deadline returns the call's deadline.
func (cc *callContext) Deadline() (time.Time, bool) { return cc.deadline, true }

// Done is closed when the caller's ctx ends, the deadline passes or the
// call ends.
func (cc *callContext) Done() <-chan struct{} { return cc.start().Done() }

// Err is the caller's ctx's error, context.DeadlineExceeded after the
// deadline, or context.Canceled after the call ended.
func (cc *callContext) Err() error { return cc.start().Err() }

// Value is the caller's ctx's value (through the timed context, so that
// context.Cause sees this context's own cancellation).
func (cc *callContext) Value(key any) any { return cc.start().Value(key) }

// AfterFunc runs f when the context ends; context.WithCancel and the others
// use it to propagate cancellation without a goroutine.
func (cc *callContext) AfterFunc(f func()) func() bool {
	return context.AfterFunc(cc.start(), f)
}

// attemptContext returns a context for one publish attempt of a call
// whose context is ctx: ctx's end and at most timeout from now. Of a
// *callContext it is made from the caller's ctx with the call's deadline,
// so that the call's own timer need not start. Call release when the
// attempt ends, and use the context no more after it.
func attemptContext(ctx context.Context, timeout time.Duration) *attemptCtx {
	d := time.Now().Add(timeout)
	if cc, ok := ctx.(*callContext); ok {
		if cc.deadline.Before(d) {
			d = cc.deadline
		}
		ctx = cc.Context
	} else if pd, ok := ctx.Deadline(); ok && pd.Before(d) {
		d = pd
	}
	return newAttemptCtx(ctx, d)
}

// attemptCtx is the context of one publish attempt: it ends when its
// parent ends or at its deadline, whichever comes first, as
// context.WithDeadline's does. It is pooled: an attempt that is over
// before either (the common case) leaves its done channel open and its
// timer stopped, and a later attempt reuses both, where
// context.WithDeadline allocates a context, a channel and a timer for
// each. One that ended is not reused.
//
// Safe for concurrent use, as every context; release is called once, by
// the attempt's owner.
type attemptCtx struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	timer    *time.Timer // ends the context at the deadline
	// stopParent stops the watch of a parent that can end (nil: it
	// cannot: its Done is nil).
	stopParent func() bool
	mu         sync.Mutex
	err        error // set once, when done is closed
}

var attemptCtxs sync.Pool

// newAttemptCtx returns an attempt context on parent that ends at
// deadline (a pooled one when there is one).
func newAttemptCtx(parent context.Context, deadline time.Time) *attemptCtx {
	a, _ := attemptCtxs.Get().(*attemptCtx)
	if a == nil {
		a = &attemptCtx{done: make(chan struct{})}
		a.timer = time.AfterFunc(time.Hour, func() { a.end(context.DeadlineExceeded) })
		a.timer.Stop()
	}
	a.parent, a.deadline = parent, deadline
	if err := parent.Err(); err != nil {
		a.end(err)
		return a
	}
	if parent.Done() != nil {
		a.stopParent = context.AfterFunc(parent, func() { a.end(parent.Err()) })
	}
	a.timer.Reset(time.Until(deadline))
	return a
}

// end closes the context with err unless it is closed already.
func (a *attemptCtx) end(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
		close(a.done)
	}
}

// release stops the context's timer and parent watch, and pools it when
// neither had ended it and neither can any more.
func (a *attemptCtx) release() {
	stopped := a.timer.Stop()
	if a.stopParent != nil && !a.stopParent() {
		stopped = false
	}
	if !stopped || a.Err() != nil {
		return // ended, or about to: its channel is closed for good
	}
	a.parent, a.stopParent = nil, nil
	attemptCtxs.Put(a)
}

// Deadline returns the attempt's deadline.
func (a *attemptCtx) Deadline() (time.Time, bool) { return a.deadline, true }

// Done is closed when the parent ends or the deadline passes.
func (a *attemptCtx) Done() <-chan struct{} { return a.done }

// Err is the parent's error once it ended, context.DeadlineExceeded after
// the deadline, else nil.
func (a *attemptCtx) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Value is the parent's value.
func (a *attemptCtx) Value(key any) any { return a.parent.Value(key) }

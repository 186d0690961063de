package ag2b

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// ErrClosed is returned by the methods of a [History] that was closed, or
// whose watch of the log ended (then [History.Err] says why).
var ErrClosed = errors.New("ag2b: history closed")

// History is AG2B's history of one thread, kept live from the log: a
// goroutine follows the thread ([client.Client.Watch]) and folds every
// event into a local projection, so changes made by any writer (this
// process, another service, another client) are seen.
//
// Snapshot and Version are lock-free and safe from any goroutine;
// Subscribe, Reset, Restore and WaitVersion are safe for concurrent use.
// A History owns goroutines: Close it.
type History struct {
	c              *client.Client
	tenant, thread string
	w              *client.Watcher
	snap           atomic.Pointer[[]events.Message]
	version        atomic.Uint64
	foldDone       chan struct{}
	closeOnce      sync.Once
	listenersWG    sync.WaitGroup

	mu        sync.Mutex
	progress  chan struct{} // closed and replaced whenever version moves
	listeners map[uint64]*sub
	nextID    uint64
	closed    bool
	err       error
}

// sub is one subscription: a listener and the goroutine that calls it.
type sub struct {
	fn       func()
	wake     chan struct{} // capacity 1: pending changes coalesce
	stop     chan struct{}
	stopOnce sync.Once
	stopped  atomic.Bool
}

// halt makes the subscription's goroutine return without another call.
func (l *sub) halt() {
	l.stopOnce.Do(func() {
		l.stopped.Store(true)
		close(l.stop)
	})
}

// New loads tenant/thread (consistently: every event acknowledged before
// the call) and starts following it from there. A thread that does not
// exist yet gives an empty history that fills as events arrive. The
// returned History runs until Close; ctx bounds only the load and the
// start of the watch (its values are kept, its cancellation is not).
//
// Errors: *events.IDError for a bad tenant or thread id; read and watch
// errors (ctx, connection, a missing stream).
func New(ctx context.Context, c *client.Client, tenant, thread string) (*History, error) {
	if tenant == "" {
		tenant = events.DefaultTenant
	}
	var s *fold.State
	th, err := c.Get(ctx, tenant, thread, client.Consistent(), client.IncludeDeleted())
	switch {
	case errors.Is(err, client.ErrThreadNotFound):
		s = fold.NewState(tenant, thread)
	case err != nil:
		return nil, fmt.Errorf("ag2b: load %s/%s: %w", tenant, thread, err)
	default:
		// A copy: the fold appends to its messages, which must not share a
		// backing array with anything else.
		s = th.FoldState()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w, err := c.Watch(context.WithoutCancel(ctx), tenant, thread, client.WatchOptions{After: s.Version})
	if err != nil {
		return nil, fmt.Errorf("ag2b: watch %s/%s: %w", tenant, thread, err)
	}
	h := &History{c: c, tenant: tenant, thread: thread, w: w, foldDone: make(chan struct{}),
		progress: make(chan struct{}), listeners: map[uint64]*sub{}}
	h.publish(s)
	h.version.Store(s.Version)
	go h.fold(s)
	return h, nil
}

// fold applies the watched events to s, in stream order, until the watch
// ends. It is the only goroutine that touches s.
func (h *History) fold(s *fold.State) {
	defer close(h.foldDone)
	for u := range h.w.C {
		if u.Event == nil {
			continue
		}
		gen, count := s.Generation, s.MessageCount()
		// Rejected events are recorded in s and change no history; s holds
		// the whole history, so ErrNeedHistory cannot happen.
		_ = fold.Apply(s, *u.Event)
		if s.Generation != gen || s.MessageCount() != count {
			h.publish(s)
			h.notify()
		}
		h.mu.Lock()
		h.version.Store(s.Version)
		close(h.progress)
		h.progress = make(chan struct{})
		h.mu.Unlock()
	}
	h.mu.Lock()
	if h.err == nil {
		h.err = h.w.Err()
	}
	close(h.progress)
	h.progress = make(chan struct{})
	h.mu.Unlock()
}

// publish makes s's messages the snapshot. The fold never modifies a
// message in place and appends only past the snapshot's length (its
// capacity is clipped), so the snapshot stays immutable while the fold
// goes on.
func (h *History) publish(s *fold.State) {
	ms := s.Messages[:len(s.Messages):len(s.Messages)]
	h.snap.Store(&ms)
}

func (h *History) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.listeners {
		select {
		case l.wake <- struct{}{}:
		default: // a call is already due: it will see this change too
		}
	}
}

// Snapshot returns the history: user, assistant and tool messages (and
// system messages a restore put there) in the order they entered the
// thread, with their sequences, event ids and times. It returns the same
// slice (same backing array, same length) until the history changes, so
// comparing snapshots is cheap. The slice is shared: do not modify it or
// its messages.
//
// A snapshot is the fold of a prefix of the log: every event up to some
// version, never a mix. It may lag the log by the time the watch takes to
// deliver an event; [History.WaitVersion] waits for a version.
func (h *History) Snapshot() []events.Message { return *h.snap.Load() }

// Version returns the version of the thread the History has folded up to
// (the stream sequence of the last event seen; 0 for an empty thread).
func (h *History) Version() uint64 { return h.version.Load() }

// Subscribe calls listener after every change of the history: a message
// appended (by any writer), a reset, a restore, a compaction. The listener
// runs on a goroutine of its own, one call at a time; changes that happen
// while a call runs are coalesced into one further call, so a slow
// listener never delays the fold, other listeners or the log, and always
// ends up called after the last change (read Snapshot in it). The returned
// function unsubscribes: no call starts after it returns (one under way
// may finish). It is safe to call more than once, and from the listener.
// Subscribing to a closed History returns a no-op unsubscribe.
func (h *History) Subscribe(listener func()) (unsubscribe func()) {
	l := &sub{fn: listener, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return func() {}
	}
	id := h.nextID
	h.nextID++
	h.listeners[id] = l
	h.listenersWG.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.listenersWG.Done()
		for {
			select {
			case <-l.stop:
				return
			case <-l.wake:
				if l.stopped.Load() {
					return
				}
				l.fn()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.listeners, id)
			h.mu.Unlock()
			l.halt()
		})
	}
}

// WaitVersion waits until the History has folded the thread up to version
// v (for example the version an append returned), so that Snapshot shows
// it.
//
// Errors: ctx's error; [ErrClosed] (wrapped with the watch's error, if
// any) when the History is closed or its watch ended before v.
func (h *History) WaitVersion(ctx context.Context, v uint64) error {
	for {
		h.mu.Lock()
		progress, closed := h.progress, h.closed
		h.mu.Unlock()
		if h.version.Load() >= v {
			return nil
		}
		if closed {
			return ErrClosed
		}
		select {
		case <-progress:
		case <-h.foldDone:
			// The watch ended: the version will not move any more.
			if h.version.Load() >= v {
				return nil
			}
			if err := h.Err(); err != nil {
				return fmt.Errorf("%w: %w", ErrClosed, err)
			}
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("ag2b: waiting for %s/%s to reach version %d (at %d): %w", h.tenant, h.thread, v, h.version.Load(), ctx.Err())
		}
	}
}

// Reset clears the history with a thread.reset event (the thread's earlier
// events stay in the log; its key-value state and attributes stay) and
// returns once the History has folded it: Snapshot is then empty and the
// listeners have been woken for the change. It returns the thread's
// version after the reset. Without opts the reset is appended with
// client.AnyVersion(); pass client.ExpectVersion(v) to clear only the
// history the caller has seen. See the package doc for what happens to a
// turn in flight.
//
// Errors: [ErrClosed]; the errors of client.Append (a
// *client.ConflictError with ExpectVersion, a *fold.RejectionError
// when the thread does not exist or is deleted, ctx and connection
// errors); those of WaitVersion.
func (h *History) Reset(ctx context.Context, opts ...client.AppendOption) (uint64, error) {
	return h.append(ctx, events.Reset{Reason: "ag2b: reset"}, opts)
}

// Restore replaces the whole history with messages (a thread.restored
// event) and returns once the History has folded it, like Reset. The
// messages must form a valid history (each tool message answers a call
// pending at that point); their Seq, EventID and Time are replaced by the
// restore event's.
//
// Errors: as for Reset; a *fold.RejectionError (code
// invalid_history) for an invalid history, before anything is stored.
func (h *History) Restore(ctx context.Context, messages []events.Message, opts ...client.AppendOption) (uint64, error) {
	ms := make([]events.Message, len(messages))
	copy(ms, messages)
	return h.append(ctx, events.Restore{Messages: ms, Reason: "ag2b: restore"}, opts)
}

func (h *History) append(ctx context.Context, p events.Payload, opts []client.AppendOption) (uint64, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	if len(opts) == 0 {
		opts = []client.AppendOption{client.AnyVersion()}
	}
	res, err := h.c.Append(ctx, h.tenant, h.thread, []events.Event{{Payload: p}}, opts...)
	if err != nil {
		return 0, fmt.Errorf("ag2b: %s %s/%s: %w", p.EventType(), h.tenant, h.thread, err)
	}
	return res.Version, h.WaitVersion(ctx, res.Version)
}

// Done is closed when the History has stopped following the log: after
// Close, or when the watch failed (see Err).
func (h *History) Done() <-chan struct{} { return h.foldDone }

// Err returns why the watch ended, nil while it runs or after Close.
func (h *History) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Close stops the History and waits for its goroutines:
//
//  1. it stops the watch: no further event is folded, and Snapshot keeps
//     returning the last snapshot;
//  2. it waits for the fold goroutine to return;
//  3. it stops every listener (no call starts afterwards) and waits for
//     calls under way to return.
//
// Later calls of Reset, Restore and WaitVersion return [ErrClosed]. Close
// is safe to call more than once; it must not be called from a listener
// (it would wait for itself).
func (h *History) Close() {
	h.closeOnce.Do(func() {
		h.w.Stop()
		<-h.foldDone
		h.mu.Lock()
		h.closed = true
		ls := h.listeners
		h.listeners = map[uint64]*sub{}
		h.mu.Unlock()
		for _, l := range ls {
			l.halt()
		}
		h.listenersWG.Wait()
	})
}

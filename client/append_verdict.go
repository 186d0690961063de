package client

// This file is the fold's verdict before a publish: the thread state an
// append checks its events against, and the cached window it keeps.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// checkAll gives the fold's verdict on evs appended in order to s (which it
// does not change), and returns the state the verdict was given on: s, or
// the thread's full state when an event needs history beyond s's window.
// When every event is [fold.Renumberable], the
// verdict is given on a copy of s's cache window with the events folded in
// at provisional sequences, which checkAll returns as folded: once the
// events are stored, renumbered, it is the thread's next cached state.
func (c *Client) checkAll(ctx context.Context, s *fold.State, evs []events.Event) (checked, folded *fold.State, err error) {
	// The fold answers ErrNeedHistory when a window lacks messages it
	// needs, so any window gives the right verdict; only a compaction reads
	// past messages, so the others are checked on none (a smaller copy),
	// or on what the cache keeps when the result is kept.
	window, keep := 0, true
	for _, e := range evs {
		if _, ok := e.Payload.(events.Compaction); ok {
			window = -1
		}
		keep = keep && fold.Renumberable(e.Payload)
	}
	if keep && c.cache.max > 0 {
		w := windowCopy(s, max(windowSize-len(evs), 0), len(evs))
		if err := foldEvents(w, evs); err != nil {
			return s, nil, err // ErrNeedHistory cannot happen without a compaction
		}
		return s, w, nil
	}
	err = checkEvents(s, evs, window)
	if !errors.Is(err, fold.ErrNeedHistory) {
		return s, nil, err
	}
	// A compaction that cuts before the window: check on the whole history.
	full, ferr := c.foldFrom(ctx, s.Tenant, s.Thread, s.Version)
	if ferr != nil {
		return nil, nil, ferr
	}
	if full.Version != s.Version {
		return nil, nil, fmt.Errorf("client: thread %s/%s: history read up to version %d, expected %d", s.Tenant, s.Thread, full.Version, s.Version)
	}
	return full, nil, checkEvents(full, evs, -1)
}

// checkEvents folds evs into a copy of s's newest window messages (all of
// them when window < 0) and returns the first verdict that is not nil: a
// *fold.RejectionError or fold.ErrNeedHistory. This is
// fold.Check for a sequence of events, with one copy for all of them.
func checkEvents(s *fold.State, evs []events.Event, window int) error {
	return foldEvents(windowCopy(s, window, len(evs)), evs)
}

// foldEvents folds evs (validated by prepare) into w at the provisional
// sequences w.Version+1, ... and returns the first verdict that is not nil.
func foldEvents(w *fold.State, evs []events.Event) error {
	for _, e := range evs {
		st := events.Stored{Event: e, Seq: w.Version + 1}
		err := fold.ApplyValidated(w, st)
		if errors.Is(err, fold.ErrNeedParent) {
			// A fork by reference: its creation is checked; the history
			// it inherits is the source's, read by readers.
			err = fold.ApplyFork(w, st, nil, nil, true)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// windowCopy returns a copy of s holding its newest window messages (all
// when window < 0), with room for extra more.
// A copy that fits windowSize messages is allocated with its messages'
// array (windowState): one allocation rather than two on the append path.
func windowCopy(s *fold.State, window, extra int) *fold.State {
	keep := len(s.Messages)
	if window >= 0 {
		keep = min(keep, window)
	}
	drop := len(s.Messages) - keep
	var w *fold.State
	var msgs []events.Message
	if keep+extra <= windowSize {
		ws := new(windowState)
		w, msgs = &ws.state, ws.messages[:0]
	} else {
		w, msgs = new(fold.State), make([]events.Message, 0, keep+extra)
	}
	s.Clone0To(w)
	w.Messages = append(msgs, s.Messages[drop:]...)
	w.Base = s.Base + drop
	return w
}

// windowState is a cached window's state and its messages' array.
type windowState struct {
	state    fold.State
	messages [windowSize]events.Message
}

// remember folds appended events into a copy of s (the state they were
// checked on, which may be shared with the cache and is not changed) and
// caches the copy.
func (c *Client) remember(key threadRef, s *fold.State, stored []events.Stored) {
	// Copy only what the cache keeps (the newest windowSize messages), into
	// a slice with room for the new ones so that the fold does not grow it.
	w := windowCopy(s, max(windowSize-len(stored), 0), len(stored))
	for _, st := range stored {
		if err := fold.Apply(w, st); err != nil {
			c.cache.drop(key)
			return
		}
	}
	c.cache.own(key, w)
}

// stateFor returns the thread's state for an append: the cached state if it
// is at the expected version, or, on the first attempt of an AnyVersion
// append, whatever version it is at (the publish is conditional on it; a
// conflict makes the next attempt read) -- shared with the cache: read only;
// else the snapshot plus the stream's tail (a private copy).
func (c *Client) stateFor(ctx context.Context, tenant, thread string, o appendOptions, attempt int) (*fold.State, error) {
	key := threadRef{tenant, thread}
	if o.any && attempt == 1 {
		if s := c.cache.peek(key); s != nil {
			return s, nil
		}
	}
	if o.hasExpect {
		switch s := c.cache.peek(key); {
		case s != nil && s.Version == o.expect:
			// The hot path: a writer at the version it last wrote.
			return s, nil
		case s == nil && o.expect == 0:
			// A new thread (CreateThread, a fork, an erasure marker):
			// nothing to read. If the subject has events after all, the
			// publish is refused (OCC).
			return fold.NewState(tenant, thread), nil
		}
	}
	if s := c.cache.get(key); s != nil {
		// Catch up from the cached version: reads only the new events.
		if err := c.foldTail(ctx, s, 0); err != nil {
			return nil, err
		}
		c.cache.put(key, s)
		return trim(s), nil
	}
	s, err := c.loadState(ctx, tenant, thread, 0)
	if err != nil {
		return nil, err
	}
	c.cache.put(key, s)
	return trim(s), nil
}

// catchUp is called when s is older than the version the caller expects.
// If the stream leader says the thread is at least at expect, the read was
// served by a replica that lags (direct gets, R>1): read again until it
// shows expect. Otherwise s is returned with its version raised to the
// leader's, and the caller reports the conflict.
func (c *Client) catchUp(ctx context.Context, s *fold.State, expect uint64) (*fold.State, error) {
	subject, err := c.subjects.Thread(s.Tenant, s.Thread)
	if err != nil {
		return nil, err
	}
	last, err := c.log.leaderLastSeq(ctx, subject)
	if err != nil {
		return nil, err
	}
	if last < expect {
		if last > s.Version {
			// Only the version matters for the conflict report.
			s.Version = last
		}
		return s, nil
	}
	for wait := time.Millisecond; s.Version < expect; wait = min(2*wait, 50*time.Millisecond) {
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("client: thread %s/%s: waiting for replicas to show version %d (have %d): %w", s.Tenant, s.Thread, expect, s.Version, err)
		}
		if err := c.foldTail(ctx, s, 0); err != nil {
			return nil, err
		}
	}
	c.cache.put(threadRef{s.Tenant, s.Thread}, s)
	return trim(s), nil
}

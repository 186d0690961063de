package client

import (
	"context"
	"fmt"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/quota"
)

// MaxTurnEvents is the most events one Append can commit atomically: the
// server's atomic batch limit (nats-server 2.12+, default 1000).
const MaxTurnEvents = 1000

const (
	// inFlightRetries bounds how often a publish answered with 10164 (R>1:
	// another write to the thread is being replicated) is repeated before
	// it is reported as a conflict. The repeat settles it: the other write
	// either lands (10071 with the real version) or fails (ours lands).
	inFlightRetries = 4
	// minAttemptTimeout is the least time one publish attempt waits for its
	// ack; see attemptTimeout.
	minAttemptTimeout = 250 * time.Millisecond
	// idTimeSkew is how much earlier than its id's UUIDv7 time an event may
	// have been stored (writer clock ahead of the server's), for the search
	// by id time.
	idTimeSkew = 30 * time.Second
	// dupSettle bounds the wait for events the server reported as
	// duplicates (10201) to become readable.
	dupSettle = 2 * time.Second
)

// AppendOption configures one Append.
type AppendOption func(*appendOptions)

type appendOptions struct {
	expect    uint64
	hasExpect bool
	any       bool
	// redaction: the append of events.Redacted by Redact (refused
	// otherwise: it must follow the key rotation).
	redaction bool
}

// ExpectVersion makes the append conditional on the thread being at
// version v (the stream sequence of its last event; 0 = the thread has no
// events yet). A mismatch returns a *ConflictError (docs/design.md invariant 3).
func ExpectVersion(v uint64) AppendOption {
	return func(o *appendOptions) { o.expect, o.hasExpect, o.any = v, true, false }
}

// AnyVersion appends regardless of the version: the client reads the
// current state, validates against it and publishes conditionally on it,
// and on a conflict reloads, re-validates and retries (at most
// Config.MaxAnyVersionAttempts times). Use it for writers whose event does
// not depend on what came before (a tool runner's result, a moderation flag).
func AnyVersion() AppendOption {
	return func(o *appendOptions) { o.any, o.hasExpect = true, false }
}

// AppendResult is what an Append stored.
type AppendResult struct {
	Tenant, Thread string
	// Version is the thread version after the append: the sequence of the
	// last appended event. When Duplicate is set it is the sequence of the
	// last event as stored by the earlier attempt (the thread may have
	// moved on since).
	Version uint64
	// Events are the appended events with their sequences, ids, times and
	// producers filled in. Pass the same events to retry an ambiguous
	// failure: the ids make the retry idempotent.
	Events []events.Stored
	// Duplicate is true when the events had already been stored by an
	// earlier attempt (same event ids); nothing new was written.
	Duplicate bool
}

// Append appends evs to tenant/thread as one atomic unit: a single event is
// one conditional publish, several events are one JetStream atomic batch
// (all or nothing, docs/design.md invariant 3). One of [ExpectVersion] or
// [AnyVersion] is required.
//
// Before publishing, each event is completed (missing id = new UUIDv7,
// time = now, tenant/thread from the arguments, producer from Config,
// schema version), validated on its own (events.Validate), checked for
// size, and checked against the thread's state at the expected version with
// the projector's fold, so an event the projector would reject is refused
// here with the same *fold.RejectionError (wrapping
// fold.ErrRejected), and nothing is published.
//
// Idempotency (invariant 4): the event id is the Nats-Msg-Id. A retry of
// the same events (the same append: the same events in the same order)
// returns the original sequences with Duplicate set and stores nothing:
//   - with [ExpectVersion] (the version the first attempt used), inside or
//     outside the server's duplicate window, on R1 and replicated streams:
//     the server's duplicate ack, or its version conflict (which is what R1
//     streams answer, as they check the version before the id) resolved by
//     reading the events right after the expected version;
//   - with [AnyVersion], inside the window (the server's duplicate check),
//     and outside it when the ids are UUIDv7 (the default): an event whose
//     id is older than half the window is first looked up on the thread
//     from its id's time.
//
// Errors: [ErrInvalidAppend] (no version option, no events, more than
// [MaxTurnEvents]); *events.IDError (bad tenant or thread id);
// *events.ValidationError (bad event, including an event whose tenant or
// thread differs from the arguments); *TooLargeError;
// *fold.RejectionError; *ConflictError (not retryable as is: reload,
// re-decide, append with the new version); [ErrStorageFull] (the server
// refused it for lack of storage; nothing stored); [ErrOverloaded] (the
// server refused every attempt as busy or had no stream leader;
// retryable after a backoff); [ErrIdempotencyMismatch]
// (an event id already used by another event, or by another append: one
// of other events, or of the same events in another order; not
// retryable); [ErrClosed]; ctx errors.
//
// Transient server errors are retried with backoff, each attempt waiting
// at most a quarter of Config.Timeout (at least 250 ms) for its ack, up to
// Config.MaxRetries times: timeouts, no responders (no stream leader),
// disconnects, 10158 (same id in flight), 10163, 10167, 10176 (abandoned
// batch), 10210 (too many batches in flight) and any 503/429 answer (leader
// changes). If refusals for load persist (429, 503, 10167, 10210, no
// responders), the error wraps [ErrOverloaded]. If other errors persist,
// or ctx ends while an attempt is in flight, the error is returned and the
// outcome is ambiguous: append the same events (AppendResult.Events of the
// failed call is empty, so set event ids yourself if you need to retry) to
// learn it.
func (c *Client) Append(ctx context.Context, tenant, thread string, evs []events.Event, opts ...AppendOption) (AppendResult, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Append(ctx, tenant, thread, evs, opts...)
	}
	if err := c.check(); err != nil {
		return AppendResult{}, err
	}
	o, err := appendOptionsFor(evs, opts)
	if err != nil {
		return AppendResult{}, err
	}
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return AppendResult{}, err
	}
	ctx, cc := c.withCallTimeout(ctx)
	defer cc.stop()
	if err := c.checkQuota(ctx, tenant, evs); err != nil {
		return AppendResult{}, err
	}
	p, err := c.prepare(ctx, tenant, thread, subject, evs)
	if err != nil {
		return AppendResult{}, err
	}
	defer p.release()
	run := &appendRun{c: c, p: p, o: o}
	for attempt := 1; ; attempt++ {
		if res, done, err := run.attempt(ctx, attempt); done {
			return res, err
		}
	}
}

// appendOptionsFor applies opts and checks that an Append of evs can be
// made as written: a version option, 1 to MaxTurnEvents events, no
// redaction event unless Redact writes it. Errors wrap ErrInvalidAppend.
func appendOptionsFor(evs []events.Event, opts []AppendOption) (appendOptions, error) {
	var o appendOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if !o.hasExpect && !o.any {
		return o, fmt.Errorf("%w: pass client.ExpectVersion(v) or client.AnyVersion()", ErrInvalidAppend)
	}
	if len(evs) == 0 {
		return o, fmt.Errorf("%w: no events", ErrInvalidAppend)
	}
	for i, e := range evs {
		if (e.Type == events.TypeRedacted || e.Payload != nil && e.Payload.EventType() == events.TypeRedacted) && !o.redaction {
			return o, fmt.Errorf("%w: event %d is %s, which only Client.Redact writes (after it made the content unreadable)", ErrInvalidAppend, i, events.TypeRedacted)
		}
	}
	if len(evs) > MaxTurnEvents {
		return o, fmt.Errorf("%w: %d events, at most %d commit atomically", ErrInvalidAppend, len(evs), MaxTurnEvents)
	}
	return o, nil
}

// checkQuota returns a *QuotaError when tenant is over a limit and evs do
// more than delete, erase or redact (package quota; Config.Quotas).
func (c *Client) checkQuota(ctx context.Context, tenant string, evs []events.Event) error {
	if c.quotas == nil {
		return nil
	}
	exempt := true
	for _, e := range evs {
		t := e.Type
		if t == "" && e.Payload != nil {
			t = e.Payload.EventType()
		}
		exempt = exempt && quota.Exempt(t)
	}
	if exempt {
		return nil
	}
	if err := c.quotas.Check(ctx, tenant); err != nil {
		return fmt.Errorf("client: append to %s: %w", tenant, err)
	}
	return nil
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/directget"
)

// MaxTurnEvents is the most events one Append can commit atomically: the
// server's atomic batch limit (nats-server 2.12+, default 1000).
const MaxTurnEvents = 1000

// JetStream error codes convlog handles. Source: nats-server errors.json,
// measured on v2.15.2 (shared/research/nats_jetstream_facts.md §1.2, §3.1).
const (
	errCodeMsgNotFound          = 10037 // no message found (last_by_subj on an empty subject)
	errCodeMsgTooLarge          = 10054 // message exceeds maximum
	errCodeWrongLastSeq         = 10071 // wrong last sequence: N
	errCodeDupInProcess         = 10158 // duplicate message id is in process (R>1)
	errCodeExpectedNotReady     = 10163 // expected last seq per subject temporarily unavailable
	errCodeWrongLastSeqConstant = 10164 // wrong last sequence (R>1, a write to the subject is in flight)
	errCodeTooManyRequests      = 10167 // stream ingest queue full
	errCodeBatchIncomplete      = 10176 // atomic batch incomplete (abandoned): nothing stored
	errCodeBatchDuplicate       = 10201 // atomic batch contains duplicate message id
	errCodeBatchTooManyInflight = 10210 // too many atomic batches in flight
)

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
}

// ExpectVersion makes the append conditional on the thread being at
// version v (the stream sequence of its last event; 0 = the thread has no
// events yet). A mismatch returns a *ConflictError (DESIGN.md invariant 3).
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
// (all or nothing, DESIGN.md invariant 3). One of [ExpectVersion] or
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
// the same events returns the original sequences with Duplicate set and
// stores nothing:
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
// refused it for lack of storage; nothing stored); [ErrIdempotencyMismatch]
// (an event id already used by another event); [ErrClosed]; ctx errors.
//
// Transient server errors are retried with backoff, each attempt waiting
// at most a quarter of Config.Timeout (at least 250 ms) for its ack, up to
// Config.MaxRetries times: timeouts, no responders (no stream leader),
// disconnects, 10158 (same id in flight), 10163, 10167, 10176 (abandoned
// batch), 10210 (too many batches in flight) and any 503/429 answer (leader
// changes). If they persist, or ctx ends while an attempt is in flight, the
// error is returned and the outcome is ambiguous: append the same events
// (AppendResult.Events of the failed call is empty, so set event ids
// yourself if you need to retry) to learn it.
func (c *Client) Append(ctx context.Context, tenant, thread string, evs []events.Event, opts ...AppendOption) (AppendResult, error) {
	if err := c.check(); err != nil {
		return AppendResult{}, err
	}
	var o appendOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if !o.hasExpect && !o.any {
		return AppendResult{}, fmt.Errorf("%w: pass client.ExpectVersion(v) or client.AnyVersion()", ErrInvalidAppend)
	}
	if len(evs) == 0 {
		return AppendResult{}, fmt.Errorf("%w: no events", ErrInvalidAppend)
	}
	if len(evs) > MaxTurnEvents {
		return AppendResult{}, fmt.Errorf("%w: %d events, at most %d commit atomically", ErrInvalidAppend, len(evs), MaxTurnEvents)
	}
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return AppendResult{}, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()

	p, err := c.prepare(tenant, thread, subject, evs)
	if err != nil {
		return AppendResult{}, err
	}
	key := tenant + "." + thread

	for attempt := 1; ; attempt++ {
		s, err := c.stateFor(ctx, tenant, thread, o, attempt)
		if err != nil {
			return AppendResult{}, err
		}
		if o.hasExpect && s.Version < o.expect {
			// A replica that lags served the read (R>1), or the caller
			// passed a version the thread never had.
			if s, err = c.catchUp(ctx, s, o.expect); err != nil {
				return AppendResult{}, err
			}
		}
		if o.hasExpect && s.Version != o.expect {
			if s.Version > o.expect && !p.fresh {
				// Maybe an earlier attempt of this append moved the thread on.
				res, ok, err := c.findAfter(ctx, p, o.expect, s.Version)
				if err != nil {
					return AppendResult{}, err
				}
				if ok {
					c.logDuplicate(p, "already_stored", 0, res.Version)
					return c.sameAsStored(ctx, p, res)
				}
			}
			return AppendResult{}, &ConflictError{Tenant: tenant, Thread: thread, Expected: o.expect, Actual: s.Version}
		}
		if o.any && attempt == 1 && !p.fresh && c.maybeForgotten(p) {
			// Outside the duplicate window the server would store a second copy.
			res, ok, err := c.findByIDTime(ctx, p)
			if err != nil {
				return AppendResult{}, err
			}
			if ok {
				c.logDuplicate(p, "id_time_scan", 0, res.Version)
				return c.sameAsStored(ctx, p, res)
			}
		}
		checked, folded, err := c.checkAll(ctx, s, p.events)
		if err != nil && o.any && attempt == 1 && errors.Is(err, fold.ErrRejected) {
			continue // checked on the cached state, which may be behind: read, check again
		}
		if err != nil {
			// The same events may be stored already (a retry whose first
			// attempt landed): a second answer to a call is rejected by the
			// fold, so look before reporting. Ids this call generated
			// cannot be stored before it published.
			if p.fresh {
				return AppendResult{}, err
			}
			if res, ok, ferr := c.findAnywhere(ctx, p, s, o.any); ferr == nil && ok {
				c.logDuplicate(p, "already_stored", 0, res.Version)
				return c.sameAsStored(ctx, p, res)
			}
			return AppendResult{}, err
		}
		seqs, dup, maybeStored, err := c.publish(ctx, p, s.Version)
		if err == nil {
			res := p.result(seqs, nil, dup)
			if dup {
				c.logDuplicate(p, "duplicate_ack", 0, res.Version)
				return c.sameAsStored(ctx, p, res)
			}
			if folded != nil {
				// The events were folded into a copy of the window when
				// checked: give them their stored sequences and keep it.
				folded.Renumber(s.Version, seqs)
				c.cache.own(key, folded)
			} else {
				c.remember(key, checked, res.Events)
			}
			return res, nil
		}
		var sc *serverConflict
		if !errors.As(err, &sc) {
			return AppendResult{}, err
		}
		// The cached state stays: it is right for its version, and the next
		// read catches up from it.
		actual := sc.actual
		if p.fresh && !maybeStored && sc.code != errCodeBatchDuplicate {
			// Refused, and no earlier send may have stored them: new ids
			// cannot be on the thread.
			if actual == 0 && o.hasExpect {
				if actual, err = c.leaderLastSeq(ctx, subject); err != nil {
					return AppendResult{}, err
				}
			}
		} else {
			res, ok, a, err := c.resolve(ctx, p, s.Version, sc)
			if err != nil {
				return AppendResult{}, err
			}
			if ok {
				c.logDuplicate(p, "read_forward", sc.code, res.Version)
				return c.sameAsStored(ctx, p, res)
			}
			actual = a
		}
		conflict := &ConflictError{Tenant: tenant, Thread: thread, Expected: s.Version, Actual: actual}
		if sc.err != nil {
			conflict.Cause = sc.err
		}
		if o.hasExpect || attempt >= c.cfg.MaxAnyVersionAttempts {
			return AppendResult{}, conflict
		}
		c.cfg.Logger.Debug("append conflict, retrying", "tenant", tenant, "thread", thread,
			"expected", s.Version, "actual", actual, "attempt", attempt)
		// Contention: back off a random, growing while before retrying.
		if err := sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt, 20))*int64(time.Millisecond)+1))); err != nil {
			return AppendResult{}, fmt.Errorf("client: append to %s/%s: %w (after %d conflicts)", tenant, thread, err, attempt)
		}
	}
}

// prepared is an append ready to publish: the completed events, their
// encoded messages and ids.
type prepared struct {
	tenant, thread, subject string
	events                  []events.Event
	msgs                    []*nats.Msg
	ids                     []string
	// fresh is true when every id was generated by this call: until it
	// publishes, none of its events can be stored.
	fresh bool
}

// result builds the AppendResult for events stored at seqs (times are the
// server's when known).
func (p *prepared) result(seqs []uint64, stored []*RawEvent, dup bool) AppendResult {
	res := AppendResult{Tenant: p.tenant, Thread: p.thread, Duplicate: dup, Version: seqs[len(seqs)-1],
		Events: make([]events.Stored, len(p.events))}
	now := time.Now().UTC()
	for i, e := range p.events {
		st := events.Stored{Event: e, Seq: seqs[i], StoredAt: now}
		if stored != nil {
			st.StoredAt = stored[i].Time
			if got, err := events.Unmarshal(stored[i].Data); err == nil {
				st.Event = got // what the first attempt stored
			}
		}
		res.Events[i] = st
	}
	return res
}

// prepare completes, validates and encodes evs.
func (c *Client) prepare(tenant, thread, subject string, evs []events.Event) (*prepared, error) {
	limit := c.maxEventSize()
	now := time.Now().UTC()
	p := &prepared{tenant: tenant, thread: thread, subject: subject, fresh: true,
		events: make([]events.Event, len(evs)), msgs: make([]*nats.Msg, len(evs)), ids: make([]string, len(evs))}
	for i, e := range evs {
		if e.ID == "" {
			e.ID = events.NewID()
		} else {
			p.fresh = false
		}
		if e.Time.IsZero() {
			e.Time = now
		}
		if e.Tenant == "" {
			e.Tenant = tenant
		}
		if e.Thread == "" {
			e.Thread = thread
		}
		if e.Producer == "" {
			e.Producer = c.cfg.Producer
		}
		if e.SchemaVersion == 0 {
			e.SchemaVersion = events.SchemaVersion
		}
		if e.Type == "" && e.Payload != nil {
			e.Type = e.Payload.EventType()
		}
		if e.Tenant != tenant || e.Thread != thread {
			return nil, &events.ValidationError{EventID: e.ID, Type: e.Type, Field: "tenant/thread",
				Reason: fmt.Sprintf("event is for %s/%s but is appended to %s/%s", e.Tenant, e.Thread, tenant, thread)}
		}
		if err := e.Validate(); err != nil {
			return nil, err
		}
		if j := slices.Index(p.ids[:i], e.ID); j >= 0 {
			return nil, &events.ValidationError{EventID: e.ID, Type: e.Type, Field: "id",
				Reason: fmt.Sprintf("events %d and %d of the append have the same id", j, i)}
		}
		data, err := events.Marshal(e)
		if err != nil {
			return nil, err
		}
		if len(data) > limit {
			return nil, &TooLargeError{Tenant: tenant, Thread: thread, EventID: e.ID, Size: len(data), Limit: limit}
		}
		m := &nats.Msg{Subject: subject, Data: data, Header: eventHeader(e)}
		p.events[i], p.msgs[i], p.ids[i] = e, m, e.ID
	}
	return p, nil
}

// eventHeader returns the NATS headers of e (events.Headers: type, schema
// version, Nats-Msg-Id), with room for the OCC and stream headers.
func eventHeader(e events.Event) nats.Header {
	h := make(nats.Header, 5)
	if e.SchemaVersion == events.SchemaVersion && e.ID != "" {
		// The common case, without the map events.Headers builds.
		// One backing array for the three values (one allocation).
		v := &[3]string{string(e.Type), schemaHeader, e.ID}
		h[events.HeaderType] = v[0:1:1]
		h[events.HeaderSchema] = v[1:2:2]
		h[events.HeaderMsgID] = v[2:3:3]
		return h
	}
	for k, v := range events.Headers(e) {
		h[k] = []string{v}
	}
	return h
}

var schemaHeader = strconv.Itoa(events.SchemaVersion)

// headerAllowance is what the encoded event leaves of the message size for
// headers (type, schema, id, OCC, stream, batch).
const headerAllowance = 1024

// maxEventSize is the largest encoded event the server accepts: its max
// payload, or the stream's MaxMsgSize when smaller, less headerAllowance.
func (c *Client) maxEventSize() int {
	limit := int(c.nc.MaxPayload())
	if c.st != nil {
		if info := c.st.CachedInfo(); info != nil && info.Config.MaxMsgSize > 0 && int(info.Config.MaxMsgSize) < limit {
			limit = int(info.Config.MaxMsgSize)
		}
	}
	return limit - headerAllowance
}

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
		if err := fold.ApplyValidated(w, events.Stored{Event: e, Seq: w.Version + 1}); err != nil {
			return err
		}
	}
	return nil
}

// windowCopy returns a copy of s holding its newest window messages (all
// when window < 0), with room for extra more.
func windowCopy(s *fold.State, window, extra int) *fold.State {
	keep := len(s.Messages)
	if window >= 0 {
		keep = min(keep, window)
	}
	drop := len(s.Messages) - keep
	w := s.Clone0()
	w.Messages = append(make([]events.Message, 0, keep+extra), s.Messages[drop:]...)
	w.Base = s.Base + drop
	return w
}

// remember folds appended events into a copy of s (the state they were
// checked on, which may be shared with the cache and is not changed) and
// caches the copy.
func (c *Client) remember(key string, s *fold.State, stored []events.Stored) {
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
	key := tenant + "." + thread
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
	last, err := c.leaderLastSeq(ctx, subject)
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
	c.cache.put(s.Tenant+"."+s.Thread, s)
	return trim(s), nil
}

// serverConflict is a publish answered with a version conflict (10071,
// 10164) or, for a batch, a duplicate id (10201). actual is the thread's
// version when the server said it (10071).
type serverConflict struct {
	code   int
	actual uint64
	err    *jetstream.APIError // the server's answer
}

func (e *serverConflict) Error() string {
	return fmt.Sprintf("client: server conflict %d (last sequence %d)", e.code, e.actual)
}

// publish sends p conditionally on the thread being at version expect and
// returns the sequences. dup is true when the server acknowledged the event
// as already stored (a duplicate within the window). maybeStored is true
// when a send whose outcome is unknown (no answer, a lost connection, an id
// in flight) was repeated: that send may have stored the events. A version
// conflict returns *serverConflict. Transient errors are retried.
func (c *Client) publish(ctx context.Context, p *prepared, expect uint64) (seqs []uint64, dup, maybeStored bool, err error) {
	backoff := c.cfg.RetryBackoff
	inFlight := 0
	for attempt := 0; ; {
		seqs, dup, err = c.publishOnce(ctx, p, expect)
		if err == nil {
			return seqs, dup, maybeStored, nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			switch apiErr.ErrorCode {
			case errCodeWrongLastSeq:
				return nil, false, maybeStored, &serverConflict{code: errCodeWrongLastSeq, actual: parseLastSeq(apiErr.Description), err: apiErr}
			case errCodeWrongLastSeqConstant:
				// Refused while another write to the thread is replicated:
				// send again once it has settled.
				if inFlight < inFlightRetries && ctx.Err() == nil {
					inFlight++
					if err := sleep(ctx, time.Duration(rand.Int64N(int64(time.Millisecond)<<inFlight))); err == nil {
						continue
					}
				}
				return nil, false, maybeStored, &serverConflict{code: errCodeWrongLastSeqConstant, err: apiErr}
			case errCodeBatchDuplicate:
				return nil, false, maybeStored, &serverConflict{code: errCodeBatchDuplicate, err: apiErr}
			case errCodeInsufficientResources, errCodeStorageResourcesExceeded:
				return nil, false, maybeStored, storageFull(p.tenant, p.thread, err)
			case errCodeMsgTooLarge:
				i := largest(p.msgs)
				return nil, false, maybeStored, &TooLargeError{Tenant: p.tenant, Thread: p.thread, EventID: p.ids[i],
					Size: len(p.msgs[i].Data), Limit: c.maxEventSize()}
			}
		}
		unknown := "(the outcome is unknown: append the same events again to learn it)"
		if ctx.Err() != nil {
			return nil, false, true, fmt.Errorf("client: append to %s/%s: %w %s", p.tenant, p.thread, ctx.Err(), unknown)
		}
		if !retryable(err) {
			return nil, false, true, fmt.Errorf("client: append to %s/%s: %w", p.tenant, p.thread, err)
		}
		if attempt >= c.cfg.MaxRetries {
			return nil, false, true, fmt.Errorf("client: append to %s/%s: %w (after %d attempts) %s", p.tenant, p.thread, err, attempt+1, unknown)
		}
		// A server's error answer, or no responders, stored nothing; other
		// failures may have.
		if apiErr == nil || apiErr.ErrorCode == errCodeDupInProcess {
			maybeStored = maybeStored || !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders)
		}
		attempt++
		c.cfg.Logger.Debug("retrying append", "tenant", p.tenant, "thread", p.thread, "attempt", attempt, "err", err)
		if err := sleep(ctx, backoff/2+time.Duration(rand.Int64N(int64(backoff/2)+1))); err != nil {
			return nil, false, true, fmt.Errorf("client: append to %s/%s: %w %s", p.tenant, p.thread, err, unknown)
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// attemptTimeout is how long one publish attempt waits for its ack: a
// quarter of Config.Timeout, at least minAttemptTimeout, so that a lost ack
// is retried (with the same ids) within the call.
func (c *Client) attemptTimeout() time.Duration {
	return max(c.cfg.Timeout/4, minAttemptTimeout)
}

func (c *Client) publishOnce(ctx context.Context, p *prepared, expect uint64) ([]uint64, bool, error) {
	timeout := c.attemptTimeout()
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exp := strconv.FormatUint(expect, 10)
	if len(p.msgs) == 1 {
		m := p.msgs[0]
		// Headers set here rather than with publish options: the message is
		// reused as is by retries.
		m.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{exp}
		m.Header[jetstream.ExpectedStreamHeader] = []string{c.stream}
		ack, err := c.js.PublishMsg(actx, m)
		if err != nil {
			return nil, false, err
		}
		return []uint64{ack.Sequence}, ack.Duplicate, nil
	}
	batch := make([]*nats.Msg, len(p.msgs))
	for i, m := range p.msgs {
		batch[i] = copyMsg(m)
	}
	// OCC on the first message only: a second expected-sequence check on
	// the same subject in one batch is refused (10164).
	batch[0].Header.Set(jetstream.ExpectedLastSubjSeqHeader, exp)
	batch[0].Header.Set(jetstream.ExpectedStreamHeader, c.stream)
	ack, err := jetstreamext.PublishMsgBatch(actx, c.js, batch,
		jetstreamext.BatchFlowControl{AckFirst: true, AckTimeout: timeout})
	if err != nil {
		return nil, false, err
	}
	// An atomic batch is stored at consecutive stream sequences.
	seqs := make([]uint64, len(p.msgs))
	for i := range seqs {
		seqs[i] = ack.Sequence - uint64(len(p.msgs)-1-i)
	}
	return seqs, false, nil
}

func copyMsg(m *nats.Msg) *nats.Msg {
	n := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: make(nats.Header, len(m.Header)+4)}
	for k, v := range m.Header {
		n.Header[k] = append([]string(nil), v...)
	}
	return n
}

func largest(msgs []*nats.Msg) int {
	j := 0
	for i, m := range msgs {
		if len(m.Data) > len(msgs[j].Data) {
			j = i
		}
	}
	return j
}

// retryable reports whether err is a transient publish error: the same
// publish (same ids, same expected version) may be sent again.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeDupInProcess, errCodeExpectedNotReady, errCodeTooManyRequests,
			errCodeBatchIncomplete, errCodeBatchTooManyInflight:
			return true
		}
		return apiErr.Code == 503 || apiErr.Code == 429
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, jetstreamext.ErrInvalidBatchAck) || errors.Is(err, jetstream.ErrInvalidJSAck)
}

// parseLastSeq reads N from "wrong last sequence: N"; 0 if absent.
func parseLastSeq(desc string) uint64 {
	i := strings.LastIndex(desc, ":")
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(desc[i+1:]), 10, 64)
	return n
}

// resolve settles a publish conflict at version expect: were the events
// stored by an earlier attempt (lost ack; on R1 the server checks the
// version before the id, so a plain retry gets 10071), or did another
// writer move the thread on? It returns the stored events when they are
// found, else the thread's actual version.
func (c *Client) resolve(ctx context.Context, p *prepared, expect uint64, sc *serverConflict) (AppendResult, bool, uint64, error) {
	if sc.code != errCodeBatchDuplicate {
		res, ok, err := c.findAfter(ctx, p, expect, sc.actual)
		if err != nil || ok {
			return res, ok, 0, err
		}
		actual := sc.actual
		if actual == 0 {
			if actual, err = c.leaderLastSeq(ctx, p.subject); err != nil {
				return AppendResult{}, false, 0, err
			}
		}
		return AppendResult{}, false, actual, nil
	}
	// 10201: the server knows at least one of the ids (stored, or being
	// stored). Usually right after expect (a retry of the same append);
	// else earlier in the thread (a retry with a newer version).
	deadline := time.Now().Add(dupSettle)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		res, ok, err := c.findAfter(ctx, p, expect, 0)
		if err != nil || ok {
			return res, ok, 0, err
		}
		if res, ok, err = c.findByIDTime(ctx, p); err != nil || ok {
			return res, ok, 0, err
		}
		if time.Now().After(deadline) {
			return AppendResult{}, false, 0, fmt.Errorf("client: append to %s/%s: the server reports event ids %s as already stored (10201) but they are not on the thread; the thread may have been erased within the duplicate window: use new event ids",
				p.tenant, p.thread, strings.Join(p.ids, ","))
		}
		if err := sleep(ctx, wait); err != nil {
			return AppendResult{}, false, 0, fmt.Errorf("client: append to %s/%s: %w (the events are being stored by an earlier attempt)", p.tenant, p.thread, err)
		}
	}
}

// findAfter reports whether p's events are the events right after version
// from on the thread: where an earlier attempt of an append conditional on
// from must have stored them. atLeast is the thread's version when known
// (0 = unknown): a read that shows less came from a replica that lags, and
// is repeated.
func (c *Client) findAfter(ctx context.Context, p *prepared, from, atLeast uint64) (AppendResult, bool, error) {
	n := len(p.ids)
	askedLeader := false
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		msgs, err := c.readAfter(ctx, p.subject, from, n, p.ids[0])
		if err != nil {
			return AppendResult{}, false, err
		}
		if len(msgs) > 0 && msgs[0].Header.Get(jetstream.MsgIDHeader) != p.ids[0] {
			return AppendResult{}, false, nil // another writer's event
		}
		if len(msgs) == n {
			seqs := make([]uint64, n)
			for i, m := range msgs {
				if m.Header.Get(jetstream.MsgIDHeader) != p.ids[i] {
					return AppendResult{}, false, nil
				}
				seqs[i] = m.Sequence
			}
			return p.result(seqs, msgs, true), true, nil
		}
		// Less than the whole append is visible after from.
		if atLeast == 0 && !askedLeader {
			askedLeader = true
			if atLeast, err = c.leaderLastSeq(ctx, p.subject); err != nil {
				return AppendResult{}, false, err
			}
		}
		var seen uint64
		if len(msgs) > 0 {
			seen = msgs[len(msgs)-1].Sequence
		}
		if atLeast <= max(from, seen) {
			return AppendResult{}, false, nil
		}
		if err := sleep(ctx, wait); err != nil {
			return AppendResult{}, false, fmt.Errorf("client: thread %s/%s: waiting for replicas to show version %d: %w", p.tenant, p.thread, atLeast, err)
		}
	}
}

// readAfter returns up to n messages of subject after sequence from. The
// first is read with a single direct get; the others, when the first has id
// firstID, with one batched direct get.
func (c *Client) readAfter(ctx context.Context, subject string, from uint64, n int, firstID string) ([]*RawEvent, error) {
	first, err := c.st.GetMsg(ctx, from+1, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: read %s after seq %d: %w", subject, from, err)
	}
	if n == 1 || first.Header.Get(jetstream.MsgIDHeader) != firstID {
		return []*RawEvent{first}, nil
	}
	out, _, err := directget.Batch(ctx, c.js, c.stream, subject, from+1, n, 0)
	if err != nil {
		return nil, fmt.Errorf("client: read %s after seq %d: %w", subject, from, err)
	}
	return out, nil
}

// findAnywhere looks for p's events on the thread without knowing the
// version they were appended at: among the newest messages of s, then, if
// scan, from the time of the first event's id (appends without a version;
// with one, the events can only be after it, which the caller checked).
func (c *Client) findAnywhere(ctx context.Context, p *prepared, s *fold.State, scan bool) (AppendResult, bool, error) {
	for _, m := range s.Messages {
		if m.EventID == p.ids[0] && m.Seq > 0 {
			return c.findAfter(ctx, p, m.Seq-1, m.Seq)
		}
	}
	if !scan {
		return AppendResult{}, false, nil
	}
	return c.findByIDTime(ctx, p)
}

// maybeForgotten reports whether the server may have forgotten p's first
// id: its UUIDv7 time is more than half the duplicate window ago.
func (c *Client) maybeForgotten(p *prepared) bool {
	t, ok := idTime(p.ids[0])
	return ok && time.Since(t) > c.dupWindow()/2
}

func (c *Client) dupWindow() time.Duration {
	if c.st != nil {
		if info := c.st.CachedInfo(); info != nil && info.Config.Duplicates > 0 {
			return info.Config.Duplicates
		}
	}
	return 2 * time.Minute
}

// findByIDTime looks for p's events among the thread's events stored since
// the time of the first event's id (UUIDv7; other ids are not searched).
func (c *Client) findByIDTime(ctx context.Context, p *prepared) (AppendResult, bool, error) {
	t, ok := idTime(p.ids[0])
	if !ok {
		// Not a UUIDv7 (e.g. ids derived from an Idempotency-Key): the
		// server said the id is in its duplicate window, so it was stored
		// within that window.
		t = time.Now().Add(-c.dupWindow())
	}
	want := make(map[string]int, len(p.ids))
	for i, id := range p.ids {
		want[id] = i
	}
	seqs := make([]uint64, len(p.ids))
	stored := make([]*RawEvent, len(p.ids))
	found := 0
	opt := jetstreamext.GetBatchStartTime(t.Add(-idTimeSkew))
	for {
		it, err := jetstreamext.GetBatch(ctx, c.js, c.stream, pageSize, jetstreamext.GetBatchSubject(p.subject), opt)
		if err != nil {
			return AppendResult{}, false, fmt.Errorf("client: search %s for event %s: %w", p.subject, p.ids[0], err)
		}
		n := 0
		var last uint64
		for m, err := range it {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				break
			}
			if err != nil {
				return AppendResult{}, false, fmt.Errorf("client: search %s for event %s: %w", p.subject, p.ids[0], err)
			}
			n++
			last = m.Sequence
			if i, ok := want[m.Header.Get(jetstream.MsgIDHeader)]; ok && seqs[i] == 0 {
				seqs[i], stored[i] = m.Sequence, m
				if found++; found == len(p.ids) {
					return p.result(seqs, stored, true), true, nil
				}
			}
		}
		if n < pageSize {
			return AppendResult{}, false, nil
		}
		opt = jetstreamext.GetBatchSeq(last + 1)
	}
}

// idTime returns the time of a UUIDv7 id.
func idTime(id string) (time.Time, bool) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		return time.Time{}, false
	}
	sec, nsec := u.Time().UnixTime()
	return time.Unix(sec, nsec), true
}

// leaderLastSeq returns the sequence of subject's last message as the
// stream leader has it (a non-direct get: direct gets may be answered by a
// replica that lags), 0 if the subject is empty.
func (c *Client) leaderLastSeq(ctx context.Context, subject string) (uint64, error) {
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return 0, err
	}
	msg, err := c.nc.RequestWithContext(ctx, c.apiPrefix()+"STREAM.MSG.GET."+c.stream, req)
	if err != nil {
		return 0, fmt.Errorf("client: last sequence of %s: %w", subject, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("client: last sequence of %s: %w", subject, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == errCodeMsgNotFound {
			return 0, nil
		}
		return 0, fmt.Errorf("client: last sequence of %s: %w", subject, resp.Error)
	}
	if resp.Message == nil {
		return 0, fmt.Errorf("client: last sequence of %s: empty answer", subject)
	}
	return resp.Message.Seq, nil
}

// apiPrefix is the JetStream API subject prefix of c.js, ending in ".".
func (c *Client) apiPrefix() string {
	o := c.js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}

func (c *Client) logDuplicate(p *prepared, how string, code int, version uint64) {
	c.cfg.Logger.Debug("append was already stored", "tenant", p.tenant, "thread", p.thread,
		"how", how, "code", code, "seq", version, "events", len(p.ids))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

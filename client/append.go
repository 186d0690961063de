package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
)

// MaxTurnEvents is the most events one Append can commit atomically: the
// server's atomic batch limit (nats-server 2.12+, default 1000).
const MaxTurnEvents = 1000

// JetStream error codes convlog handles. Source: nats-server errors.json,
// measured on v2.15.2 (shared/research/nats_jetstream_facts.md §1.2, §3.1).
const (
	errCodeWrongLastSeq         = 10071 // wrong last sequence: N
	errCodeWrongLastSeqConstant = 10164 // wrong last sequence (R>1, write in flight)
	errCodeDupInProcess         = 10158 // duplicate message id is in process
	errCodeExpectedNotReady     = 10163 // expected last seq per subject temporarily unavailable
	errCodeTooManyRequests      = 10167 // stream ingest queue full
	errCodeBatchDuplicate       = 10201 // atomic batch contains duplicate message id
	errCodeMsgTooLarge          = 10054 // message exceeds maximum
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
	// Version is the thread version after the append (the sequence of its
	// last event).
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
// here with the same *projector.RejectionError (wrapping
// projector.ErrRejected), and nothing is published.
//
// Idempotency (invariant 4): the event id is the Nats-Msg-Id. A retry of
// the same events, inside or outside the server's duplicate window, on R1 or
// replicated streams, returns the original sequences with Duplicate set.
//
// Errors: *events.ValidationError / *events.IDError (bad event or id),
// *TooLargeError, *projector.RejectionError, *ConflictError, [ErrClosed],
// ctx errors. Transient server errors (timeouts, no responders, 10158,
// 10163, 10167, leader changes) are retried with backoff up to
// Config.MaxRetries; if they persist the error is returned and the outcome
// is ambiguous: retry with the same events (AppendResult is not available
// then, but evs with ids you set are).
func (c *Client) Append(ctx context.Context, tenant, thread string, evs []events.Event, opts ...AppendOption) (AppendResult, error) {
	if err := c.check(); err != nil {
		return AppendResult{}, err
	}
	var o appendOptions
	for _, opt := range opts {
		opt(&o)
	}
	if !o.hasExpect && !o.any {
		return AppendResult{}, errors.New("client: Append needs client.ExpectVersion(v) or client.AnyVersion()")
	}
	if len(evs) == 0 {
		return AppendResult{}, errors.New("client: Append of no events")
	}
	if len(evs) > MaxTurnEvents {
		return AppendResult{}, fmt.Errorf("client: Append of %d events: at most %d commit atomically", len(evs), MaxTurnEvents)
	}
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return AppendResult{}, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()

	msgs, filled, err := c.prepare(tenant, thread, subject, evs)
	if err != nil {
		return AppendResult{}, err
	}
	key := tenant + "." + thread
	ids := make([]string, len(filled))
	for i, e := range filled {
		ids[i] = e.ID
	}

	attempts := 0
	for {
		attempts++
		s, err := c.stateFor(ctx, tenant, thread, o)
		if err != nil {
			return AppendResult{}, err
		}
		if o.hasExpect && s.Version != o.expect {
			if s.Version > o.expect {
				// Maybe our own earlier attempt moved the thread on.
				if res, ok, err := c.findStored(ctx, subject, tenant, thread, o.expect, filled); err != nil {
					return AppendResult{}, err
				} else if ok {
					return res, nil
				}
			}
			return AppendResult{}, &ConflictError{Tenant: tenant, Thread: thread, Expected: o.expect, Actual: s.Version}
		}
		if err := checkAll(s, filled); err != nil {
			// The same events may already be stored (a retry after the
			// duplicate window with AnyVersion): a double answer would be
			// rejected by the fold, so look before reporting.
			if res, ok, ferr := c.findIDsInWindow(ctx, subject, tenant, thread, s, filled); ferr == nil && ok {
				return res, nil
			}
			return AppendResult{}, err
		}
		seqs, dup, err := c.publish(ctx, subject, s.Version, msgs, ids)
		if err == nil {
			res := AppendResult{Tenant: tenant, Thread: thread, Duplicate: dup}
			for i, e := range filled {
				res.Events = append(res.Events, events.Stored{Event: e, Seq: seqs[i], StoredAt: time.Now().UTC()})
			}
			res.Version = seqs[len(seqs)-1]
			if !dup {
				ns := s
				for _, st := range res.Events {
					_ = projector.Apply(ns, st)
				}
				c.cache.put(key, ns)
			} else {
				c.cache.drop(key)
			}
			return res, nil
		}
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			return AppendResult{}, err
		}
		// Was it our own earlier attempt (lost ack, R1 check order)?
		res, ok, ferr := c.findStored(ctx, subject, tenant, thread, s.Version, filled)
		if ferr != nil {
			return AppendResult{}, ferr
		}
		if ok {
			c.cache.drop(key)
			return res, nil
		}
		c.cache.drop(key)
		conflict.Tenant, conflict.Thread, conflict.Expected = tenant, thread, s.Version
		if conflict.Actual == 0 {
			conflict.Actual, _ = c.lastSeq(ctx, subject)
		}
		if o.hasExpect || attempts >= c.cfg.MaxAnyVersionAttempts {
			return AppendResult{}, conflict
		}
		// Contention: back off a random, growing while before retrying.
		wait := time.Duration(rand.Int64N(int64(min(attempts, 20))*int64(time.Millisecond) + 1))
		select {
		case <-ctx.Done():
			return AppendResult{}, fmt.Errorf("client: append to %s/%s: %w (after %d conflicts)", tenant, thread, ctx.Err(), attempts)
		case <-time.After(wait):
		}
	}
}

// prepare completes, validates and encodes evs.
func (c *Client) prepare(tenant, thread, subject string, evs []events.Event) ([]*nats.Msg, []events.Event, error) {
	limit := int(c.nc.MaxPayload()) - 1024 // headers (ids, batch, OCC) fit in 1 KiB
	now := time.Now().UTC()
	msgs := make([]*nats.Msg, len(evs))
	filled := make([]events.Event, len(evs))
	for i, e := range evs {
		if e.ID == "" {
			e.ID = events.NewID()
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
			return nil, nil, &events.ValidationError{EventID: e.ID, Type: e.Type, Field: "tenant/thread",
				Reason: fmt.Sprintf("event is for %s/%s but is appended to %s/%s", e.Tenant, e.Thread, tenant, thread)}
		}
		if err := e.Validate(); err != nil {
			return nil, nil, err
		}
		data, err := events.Marshal(e)
		if err != nil {
			return nil, nil, err
		}
		if len(data) > limit {
			return nil, nil, &TooLargeError{Tenant: tenant, Thread: thread, EventID: e.ID, Size: len(data), Limit: limit}
		}
		m := nats.NewMsg(subject)
		m.Data = data
		for k, v := range events.Headers(e) {
			m.Header.Set(k, v)
		}
		msgs[i], filled[i] = m, e
	}
	return msgs, filled, nil
}

// checkAll runs the fold's verdict on each event in order, on a copy of s.
func checkAll(s *projector.State, evs []events.Event) error {
	w := s.Clone()
	for i, e := range evs {
		st := events.Stored{Event: e, Seq: w.Version + 1}
		if err := projector.Check(w, st); err != nil {
			if errors.Is(err, projector.ErrNeedHistory) {
				return fmt.Errorf("client: event %d (%s): %w", i, e.ID, err)
			}
			return err
		}
		_ = projector.Apply(w, st)
	}
	return nil
}

// stateFor returns the thread's state for an append: the cached state if it
// is at the expected version, else the snapshot plus the stream's tail.
func (c *Client) stateFor(ctx context.Context, tenant, thread string, o appendOptions) (*projector.State, error) {
	key := tenant + "." + thread
	if s := c.cache.get(key); s != nil {
		if o.hasExpect && s.Version == o.expect {
			return s, nil
		}
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

// publish sends msgs conditionally on the thread being at version expect and
// returns the sequences. dup is true when the server reported the events as
// already stored. A version mismatch returns *ConflictError (Actual set when
// the server said it). Transient errors are retried.
func (c *Client) publish(ctx context.Context, subject string, expect uint64, msgs []*nats.Msg, ids []string) (seqs []uint64, dup bool, err error) {
	backoff := c.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		seqs, dup, err = c.publishOnce(ctx, expect, msgs, ids)
		if err == nil {
			return seqs, dup, nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			switch apiErr.ErrorCode {
			case errCodeWrongLastSeq:
				return nil, false, &ConflictError{Expected: expect, Actual: parseLastSeq(apiErr.Description)}
			case errCodeWrongLastSeqConstant:
				return nil, false, &ConflictError{Expected: expect}
			case errCodeBatchDuplicate:
				// An earlier attempt committed this batch.
				return nil, false, &ConflictError{Expected: expect}
			case errCodeMsgTooLarge:
				return nil, false, &TooLargeError{EventID: ids[0], Size: len(msgs[0].Data), Limit: int(c.nc.MaxPayload())}
			}
		}
		if !retryable(err) || attempt >= c.cfg.MaxRetries || ctx.Err() != nil {
			if ctx.Err() != nil {
				return nil, false, fmt.Errorf("client: append to %s: %w (the outcome is unknown: retry with the same event ids)", subject, ctx.Err())
			}
			return nil, false, fmt.Errorf("client: append to %s: %w", subject, err)
		}
		c.cfg.Logger.Debug("retrying append", "subject", subject, "attempt", attempt+1, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, fmt.Errorf("client: append to %s: %w (the outcome is unknown: retry with the same event ids)", subject, ctx.Err())
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func (c *Client) publishOnce(ctx context.Context, expect uint64, msgs []*nats.Msg, ids []string) ([]uint64, bool, error) {
	if len(msgs) == 1 {
		m := copyMsg(msgs[0])
		ack, err := c.js.PublishMsg(ctx, m, jetstream.WithMsgID(ids[0]),
			jetstream.WithExpectLastSequencePerSubject(expect), jetstream.WithExpectStream(c.stream))
		if err != nil {
			return nil, false, err
		}
		return []uint64{ack.Sequence}, ack.Duplicate, nil
	}
	batch := make([]*nats.Msg, len(msgs))
	for i, m := range msgs {
		batch[i] = copyMsg(m)
		batch[i].Header.Set(jetstream.MsgIDHeader, ids[i])
	}
	batch[0].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect, 10))
	batch[0].Header.Set(jetstream.ExpectedStreamHeader, c.stream)
	ack, err := jetstreamext.PublishMsgBatch(ctx, c.js, batch)
	if err != nil {
		return nil, false, err
	}
	seqs := make([]uint64, len(msgs))
	for i := range seqs {
		seqs[i] = ack.Sequence - uint64(len(msgs)-1-i)
	}
	return seqs, false, nil
}

func copyMsg(m *nats.Msg) *nats.Msg {
	n := nats.NewMsg(m.Subject)
	n.Data = m.Data
	for k, v := range m.Header {
		n.Header[k] = append([]string(nil), v...)
	}
	return n
}

// retryable reports whether err is a transient publish error: the same
// publish (same ids, same expected version) may be sent again.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeDupInProcess, errCodeExpectedNotReady, errCodeTooManyRequests:
			return true
		}
		return apiErr.Code == 503
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstreamext.ErrBatchPublishIncomplete) ||
		errors.Is(err, jetstreamext.ErrInvalidBatchAck)
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

// findStored looks for filled's first event id among the thread's events
// after version from (DESIGN.md invariant 4: a retry after a lost ack, after
// the duplicate window, or on R1 where the version is checked before the id).
// It returns the stored sequences when every event is found.
func (c *Client) findStored(ctx context.Context, subject, tenant, thread string, from uint64, filled []events.Event) (AppendResult, bool, error) {
	want := make(map[string]int, len(filled))
	for i, e := range filled {
		want[e.ID] = i
	}
	seqs := make([]uint64, len(filled))
	found := 0
	for m, err := range c.readRaw(ctx, subject, from+1, 0) {
		if err != nil {
			return AppendResult{}, false, err
		}
		if i, ok := want[m.Header.Get(jetstream.MsgIDHeader)]; ok && seqs[i] == 0 {
			seqs[i] = m.Sequence
			found++
			if found == len(filled) {
				break
			}
		}
	}
	if found != len(filled) {
		return AppendResult{}, false, nil
	}
	res := AppendResult{Tenant: tenant, Thread: thread, Duplicate: true, Version: seqs[len(seqs)-1]}
	for i, e := range filled {
		res.Events = append(res.Events, events.Stored{Event: e, Seq: seqs[i]})
	}
	return res, true, nil
}

// findIDsInWindow checks whether the events are already among the newest
// messages of s (their ids), and if so where.
func (c *Client) findIDsInWindow(ctx context.Context, subject, tenant, thread string, s *projector.State, filled []events.Event) (AppendResult, bool, error) {
	for _, m := range s.Messages {
		if m.EventID == filled[0].ID && m.Seq > 0 {
			return c.findStored(ctx, subject, tenant, thread, m.Seq-1, filled)
		}
	}
	return AppendResult{}, false, nil
}

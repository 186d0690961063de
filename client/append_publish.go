package client

// This file publishes an append (one message, or an atomic batch) and maps
// the server's answers: the JetStream error codes, retries and conflicts.

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
)

// JetStream error codes convlog handles. Source: nats-server's
// errors.json (v2.15.2).
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
			final, again := c.answered(ctx, p, err, apiErr, &inFlight)
			if again {
				continue
			}
			if final != nil {
				return nil, false, maybeStored, final
			}
		}
		if err := c.giveUp(ctx, p, err, attempt, maybeStored); err != nil {
			return nil, false, true, err
		}
		// A server's error answer, or no responders, stored nothing; other
		// failures may have.
		if apiErr == nil || apiErr.ErrorCode == errCodeDupInProcess {
			maybeStored = maybeStored || !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders)
		}
		attempt++
		c.cfg.Logger.Debug("retrying append", "tenant", p.tenant, "thread", p.thread, "attempt", attempt, "err", err)
		if serr := sleep(ctx, backoff/2+time.Duration(rand.Int64N(int64(backoff/2)+1))); serr != nil {
			if overloaded(err) {
				return nil, false, true, overloadError(p, fmt.Errorf("%w, then %w", err, serr), attempt, maybeStored)
			}
			return nil, false, true, fmt.Errorf("client: append to %s/%s: %w %s", p.tenant, p.thread, serr, outcomeUnknown)
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// outcomeUnknown ends the error of a publish that may have stored the events.
const outcomeUnknown = "(the outcome is unknown: append the same events again to learn it)"

// answered maps the server's error answers (err, as apiErr) that end or
// repeat a publish at once: final is the call's error (a *serverConflict,
// ErrStorageFull, a *TooLargeError); again is true when the publish is to
// be sent again now (10164, at most inFlightRetries times, counted in
// *inFlight). Neither: the answer is left to giveUp and the retries.
func (c *Client) answered(ctx context.Context, p *prepared, err error, apiErr *jetstream.APIError, inFlight *int) (final error, again bool) {
	switch apiErr.ErrorCode {
	case errCodeWrongLastSeq:
		return &serverConflict{code: errCodeWrongLastSeq, actual: parseLastSeq(apiErr.Description), err: apiErr}, false
	case errCodeWrongLastSeqConstant:
		// Refused while another write to the thread is replicated: send
		// again once it has settled.
		if *inFlight < inFlightRetries && ctx.Err() == nil {
			*inFlight++
			if err := sleep(ctx, time.Duration(rand.Int64N(int64(time.Millisecond)<<*inFlight))); err == nil {
				return nil, true
			}
		}
		return &serverConflict{code: errCodeWrongLastSeqConstant, err: apiErr}, false
	case errCodeBatchDuplicate:
		return &serverConflict{code: errCodeBatchDuplicate, err: apiErr}, false
	case errCodeInsufficientResources, errCodeStorageResourcesExceeded, errCodeAccountResourcesExceeded:
		return storageFull(p.tenant, p.thread, err), false
	case errCodeMsgTooLarge:
		i := largest(p.msgs)
		return &TooLargeError{Tenant: p.tenant, Thread: p.thread, EventID: p.ids[i],
			Size: len(p.msgs[i].Data), Limit: c.maxEventSize()}, false
	}
	return nil, false
}

// giveUp returns the error that ends a publish whose attempt number
// attempt (from 0) failed with err, or nil when it is to be retried: ctx
// ended, err is not transient, or the retries are spent. Refusals for load
// end as [ErrOverloaded].
func (c *Client) giveUp(ctx context.Context, p *prepared, err error, attempt int, maybeStored bool) error {
	switch {
	case ctx.Err() != nil && overloaded(err):
		return overloadError(p, fmt.Errorf("%w, then %w", err, ctx.Err()), attempt+1, maybeStored)
	case ctx.Err() != nil:
		return fmt.Errorf("client: append to %s/%s: %w %s", p.tenant, p.thread, ctx.Err(), outcomeUnknown)
	case !retryable(err):
		return fmt.Errorf("client: append to %s/%s: %w", p.tenant, p.thread, err)
	case attempt >= c.cfg.MaxRetries && overloaded(err):
		return overloadError(p, err, attempt+1, maybeStored)
	case attempt >= c.cfg.MaxRetries:
		return fmt.Errorf("client: append to %s/%s: %w (after %d attempts) %s", p.tenant, p.thread, err, attempt+1, outcomeUnknown)
	}
	return nil
}

// attemptTimeout is how long one publish attempt waits for its ack: a
// quarter of Config.Timeout, at least minAttemptTimeout, so that a lost ack
// is retried (with the same ids) within the call.
func (c *Client) attemptTimeout() time.Duration {
	return max(c.cfg.Timeout/4, minAttemptTimeout)
}

func (c *Client) publishOnce(ctx context.Context, p *prepared, expect uint64) ([]uint64, bool, error) {
	timeout := c.attemptTimeout()
	actx := attemptContext(ctx, timeout)
	defer actx.release()
	exp := strconv.FormatUint(expect, 10)
	if len(p.msgs) == 1 {
		m := p.msgs[0]
		// Headers set here rather than with publish options: the message is
		// reused as is by retries. In place when eventHeader made room.
		setHeader(m.Header, jetstream.ExpectedLastSubjSeqHeader, exp)
		setHeader(m.Header, jetstream.ExpectedStreamHeader, c.stream)
		seq, dup, err := c.publishMsg(actx, m)
		if err != nil {
			return nil, false, err
		}
		p.one.seqs[0] = seq
		return p.one.seqs[:], dup, nil
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

// setHeader sets h's key to the one value v, in place when h has one
// value for key already.
func setHeader(h nats.Header, key, v string) {
	if old := h[key]; len(old) == 1 {
		old[0] = v
		return
	}
	h[key] = []string{v}
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

// overloaded reports whether err is the server refusing a publish for
// load or for want of a stream leader: it stored nothing, and the same
// publish may be sent again later ([ErrOverloaded]).
func overloaded(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeTooManyRequests, errCodeBatchTooManyInflight:
			return true
		}
		return apiErr.Code == 503 || apiErr.Code == 429
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// overloadError is the error of an append whose attempts, the last one
// refused with err, ended refused for load: it wraps [ErrOverloaded] and
// err, and says whether an earlier attempt may have stored the events.
func overloadError(p *prepared, err error, attempts int, maybeStored bool) error {
	outcome := "nothing was stored; append the same events again after a backoff"
	if maybeStored {
		outcome = "an earlier attempt timed out, so the outcome is unknown: append the same events again after a backoff to learn it"
	}
	return fmt.Errorf("%w (%s/%s): %w (after %d attempts); %s",
		ErrOverloaded, p.tenant, p.thread, err, attempts, outcome)
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

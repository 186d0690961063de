package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/convlog/convlog/events"
)

// IdempotencyMismatchError reports an append whose event id was already
// stored with a different event: another thread, another type or another
// payload. The id makes a retry idempotent only for the same event (as an
// idempotency key is valid only with the same request: Stripe's API, and
// the IETF Idempotency-Key draft, draft-ietf-httpapi-idempotency-key-header,
// which answers 422). Nothing was stored by the call; the stored event is
// unchanged. Envelope fields a retry may fill differently (time, producer)
// do not count.
type IdempotencyMismatchError struct {
	Tenant, Thread string
	// EventID is the reused id; Index its position in the append.
	EventID string
	Index   int
	// Seq is the stream sequence of the event stored under that id.
	Seq uint64
	// Field is what differs: "thread", "type" or "payload".
	Field string
	// Stored and Sent describe the difference (thread ids or event types;
	// for a payload, the two types, which are equal).
	Stored, Sent string
}

// Error implements error.
func (e *IdempotencyMismatchError) Error() string {
	what := e.Field
	switch e.Field {
	case "thread":
		what = fmt.Sprintf("it is stored on thread %s, this append is for %s", e.Stored, e.Sent)
	case "type":
		what = fmt.Sprintf("it is stored as a %s event, this append sends a %s event", e.Stored, e.Sent)
	case "payload":
		what = fmt.Sprintf("the stored %s event has a different payload", e.Stored)
	}
	return fmt.Sprintf("client: event id %s (event %d) is already used at sequence %d by a different event: %s; use a new id for a new event",
		e.EventID, e.Index, e.Seq, what)
}

// Unwrap returns ErrIdempotencyMismatch.
func (e *IdempotencyMismatchError) Unwrap() error { return ErrIdempotencyMismatch }

// sameAsStored checks that the events res reports as stored by an earlier
// attempt (a duplicate) are the events p sends: same thread, type and
// payload. It returns res with the stored events, or an
// *IdempotencyMismatchError for the first that differs. It reads each
// stored event by sequence: only duplicates pay for it.
func (c *Client) sameAsStored(ctx context.Context, p *prepared, res AppendResult) (AppendResult, error) {
	for i := range res.Events {
		seq := res.Events[i].Seq
		raw, err := c.log.at(ctx, p.subject, seq)
		if err == nil {
			err = c.openRaw(ctx, raw)
		}
		if err != nil {
			return AppendResult{}, fmt.Errorf("client: append to %s/%s: read the stored event %s at sequence %d: %w", p.tenant, p.thread, p.ids[i], seq, err)
		}
		sent := p.events[i]
		mismatch := func(field, stored, sentDesc string) error {
			return &IdempotencyMismatchError{Tenant: p.tenant, Thread: p.thread, EventID: sent.ID, Index: i, Seq: seq,
				Field: field, Stored: stored, Sent: sentDesc}
		}
		if raw.Subject != p.subject {
			stored := raw.Subject
			if t, th, err := c.subjects.Parse(raw.Subject); err == nil {
				stored = t + "/" + th
			}
			return AppendResult{}, mismatch("thread", stored, p.tenant+"/"+p.thread)
		}
		got, err := events.Unmarshal(raw.Data)
		if err != nil {
			return AppendResult{}, mismatch("type", "undecodable", string(sent.Type))
		}
		if got.Type != sent.Type {
			return AppendResult{}, mismatch("type", string(got.Type), string(sent.Type))
		}
		same, err := samePayload(got, sent)
		if err != nil {
			return AppendResult{}, err
		}
		if !same {
			return AppendResult{}, mismatch("payload", string(got.Type), string(sent.Type))
		}
		res.Events[i].Event = got
		res.Events[i].StoredAt = raw.Time.UTC()
	}
	return res, nil
}

// samePayload compares the payloads of stored (decoded from the log) and
// sent, after sending sent through the same encoding, so that what the
// codec does not distinguish (a nil and an empty list) does not count.
func samePayload(stored, sent events.Event) (bool, error) {
	b, err := events.Marshal(sent)
	if err != nil {
		return false, err
	}
	norm, err := events.Unmarshal(b)
	if err != nil {
		return false, err
	}
	x, err := json.Marshal(stored.Payload)
	if err != nil {
		return false, err
	}
	y, err := json.Marshal(norm.Payload)
	if err != nil {
		return false, err
	}
	return string(x) == string(y), nil
}

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/convlog/convlog/events"
)

// IdempotencyMismatchError reports an append whose event id was already
// stored with a different event: another thread, another type or another
// payload, or by another append (one of other events, or of the same events
// in another order: a multi-event append is one atomic unit, stored
// whole or not at all, so a retry sends the same events in the same
// order). The id makes a retry idempotent only for the same append (as an
// idempotency key is valid only with the same request: Stripe's API, and
// the IETF Idempotency-Key draft, draft-ietf-httpapi-idempotency-key-header,
// which answers 422). Nothing was stored by the call; the stored events are
// unchanged. Envelope fields a retry may fill differently (time, producer)
// do not count.
type IdempotencyMismatchError struct {
	Tenant, Thread string
	// EventID is the reused id; Index its position in the append.
	EventID string
	Index   int
	// Seq is the stream sequence of the event stored under that id.
	Seq uint64
	// Field is what differs: "thread", "type", "payload" or "events" (the
	// id's event was stored by another append).
	Field string
	// Stored and Sent describe the difference: thread ids or event types;
	// for a payload, the two types, which are equal; for "events", how the
	// stored event was appended ("alone", "as event 2 of an atomic
	// append") and the number of events this append sends (decimal).
	Stored, Sent string
}

// Error implements error.
func (e *IdempotencyMismatchError) Error() string {
	if e.Field == "events" {
		return fmt.Sprintf("client: event id %s (event %d) is already used at sequence %d by another append, which stored it %s; this append of %s events is not that append: use new ids for a new append",
			e.EventID, e.Index, e.Seq, e.Stored, e.Sent)
	}
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

// otherAppend is the *IdempotencyMismatchError for p's event i, found
// stored as m by an append that is not p (Field "events").
func (p *prepared) otherAppend(i int, m *RawEvent) error {
	return &IdempotencyMismatchError{Tenant: p.tenant, Thread: p.thread, EventID: p.ids[i], Index: i, Seq: m.Sequence,
		Field: "events", Stored: storedAs(m), Sent: strconv.Itoa(len(p.ids))}
}

// storedAs says how m was appended, from the headers the server keeps on
// the messages of an atomic batch (Nats-Batch-Id, Nats-Batch-Sequence,
// and Nats-Batch-Commit on the last).
func storedAs(m *RawEvent) string {
	if m.Header.Get(jetstreamext.BatchIDHeader) == "" {
		return "alone"
	}
	k := m.Header.Get(jetstreamext.BatchSeqHeader)
	if m.Header.Get(jetstreamext.BatchCommitHeader) != "" {
		return fmt.Sprintf("as the last event of an atomic append of %s", k)
	}
	return fmt.Sprintf("as event %s of an atomic append", k)
}

// sameUnit returns the index of the first of stored, the messages holding
// p's events in order, that another append stored (-1 when none): p's
// events are one unit, a message alone when p has one event, else one
// atomic batch holding exactly them, in order.
func (p *prepared) sameUnit(stored []*RawEvent) int {
	if len(stored) == 1 && stored[0].Header.Get(jetstreamext.BatchIDHeader) == "" {
		return -1
	}
	batch := stored[0].Header.Get(jetstreamext.BatchIDHeader)
	for i, m := range stored {
		last := i == len(stored)-1
		if batch == "" || m.Header.Get(jetstreamext.BatchIDHeader) != batch ||
			m.Header.Get(jetstreamext.BatchSeqHeader) != strconv.Itoa(i+1) ||
			(m.Header.Get(jetstreamext.BatchCommitHeader) != "") != last {
			return i
		}
	}
	return -1
}

// sameAsStored checks that the events res reports as stored by an earlier
// attempt (a duplicate) are the events p sends: same thread, type and
// payload, stored by one append of exactly them (p.sameUnit). It returns
// res with the stored events, or an *IdempotencyMismatchError for the
// first that differs. It reads each stored event by sequence: only
// duplicates pay for it.
func (c *Client) sameAsStored(ctx context.Context, p *prepared, res AppendResult) (AppendResult, error) {
	raws := make([]*RawEvent, len(res.Events))
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
		raws[i] = raw
	}
	if i := p.sameUnit(raws); i >= 0 {
		return AppendResult{}, p.otherAppend(i, raws[i])
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

package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/snapstore"
	"github.com/convlog/convlog/threadkey"
)

// ErrNotRedactable is returned (wrapped) by [Client.Redact] for an event
// that cannot be redacted: stored in the clear (written without a key),
// of a type without content, already unreadable, or not on the thread.
var ErrNotRedactable = errors.New("client: event cannot be redacted")

// RedactionReport is what [Client.Redact] did.
type RedactionReport struct {
	Tenant, Thread string
	// Seq, EventID and Type are the redacted event's.
	Seq     uint64
	EventID string
	Type    events.Type
	// Fields are the payload fields replaced by events.RedactedText.
	Fields []string
	// Version is the stream sequence of the event.redacted event.
	Version uint64
	// SnapshotKeys are the snapshot and index keys purged (the projector
	// writes them again from the log, under the thread's new value key).
	SnapshotKeys []string
}

// redactTimeout bounds a Redact whose ctx has no deadline: it waits
// threadkey.RotationWait and threadkey.KeyTTL and reads the whole thread.
const redactTimeout = 2 * time.Minute

// Redact makes the content of one event of tenant/thread (the event at
// stream sequence seq) unreadable everywhere, keeping the event and the
// rest of the thread (docs/erasure-design.md): fields
// names the payload fields to replace (events.RedactableFields; every
// content field of the event when empty), reason is recorded in the clear.
//
// How: the thread's key is rotated (threadkey.Rotation): after
// threadkey.RotationWait, every event sealed with the old key gets its
// own derived key in the key record's table, the redacted event gets its
// replacement (the same event with the fields set to
// events.RedactedText), and every older revision of the key record is
// secure-deleted, so the redacted event's key is in no file. After
// threadkey.KeyTTL (every process has read the new record) the thread's
// snapshots are purged (the projector writes them again from the log,
// where the event now reads redacted) and an event.redacted event is
// appended. The stored bytes of the event do not change: the audit chain
// still verifies, and audit verify reports the redaction.
//
// It takes at least RotationWait+KeyTTL (7 s). Errors: *NotFoundError;
// [ErrNotRedactable] (wrapped) for an event stored in the clear, of a
// type without content (events.RedactPayload's error), or not of this
// thread; an error from the rotation (the thread keeps every key then:
// nothing is lost, Redact may be called again); append errors.
func (c *Client) Redact(ctx context.Context, tenant, thread string, seq uint64, fields []string, reason string) (RedactionReport, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Redact(ctx, tenant, thread, seq, fields, reason)
	}
	rep := RedactionReport{Tenant: tenant, Thread: thread, Seq: seq}
	ctx, cancel, subject, err := c.startRedaction(ctx, tenant, thread)
	if err != nil {
		return rep, err
	}
	defer cancel()
	m, err := c.st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || err == nil && m.Subject != subject {
		return rep, fmt.Errorf("%w: seq %d is not an event of %s/%s", ErrNotRedactable, seq, tenant, thread)
	}
	if err != nil {
		return rep, fmt.Errorf("client: redact %s/%s seq %d: %w", tenant, thread, seq, err)
	}
	pm, err := events.LocatePayload(m.Data)
	if err != nil {
		return rep, fmt.Errorf("%w: seq %d: %v", ErrNotRedactable, seq, err)
	}
	if !pm.Sealed {
		return rep, fmt.Errorf("%w: seq %d was stored in the clear (by a writer without the thread's key): only erasing the thread removes it", ErrNotRedactable, seq)
	}
	opened, err := c.keys.OpenEvent(ctx, m.Data)
	if err != nil {
		return rep, fmt.Errorf("%w: seq %d: %v", ErrNotRedactable, seq, err)
	}
	ev, err := events.Unmarshal(opened)
	if err != nil {
		return rep, fmt.Errorf("%w: seq %d: %v", ErrNotRedactable, seq, err)
	}
	rep.EventID, rep.Type = ev.ID, ev.Type
	rp, used, err := replacementOf(ev, fields)
	if err != nil {
		return rep, fmt.Errorf("%w: seq %d: %v", ErrNotRedactable, seq, err)
	}
	rep.Fields = used
	rep.Version, rep.SnapshotKeys, err = c.redact(ctx, tenant, thread, subject, map[string][]byte{ev.ID: rp},
		events.Redacted{Seq: seq, EventID: ev.ID, Fields: used, Reason: reason})
	return rep, err
}

// startRedaction checks the client and the ids of a redaction, and bounds
// ctx by redactTimeout when it has no deadline. It returns the thread's
// subject.
func (c *Client) startRedaction(ctx context.Context, tenant, thread string) (context.Context, context.CancelFunc, string, error) {
	if err := c.check(); err != nil {
		return ctx, func() {}, "", err
	}
	if err := c.scopedErr("redact"); err != nil {
		return ctx, func() {}, "", err
	}
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return ctx, func() {}, "", err
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}, subject, nil
	}
	ctx, cancel := context.WithTimeout(ctx, redactTimeout)
	return ctx, cancel, subject, nil
}

// replacementOf is the payload (msgpack map) ev reads as once fields are
// redacted (events.RedactPayload), and the fields replaced.
func replacementOf(ev events.Event, fields []string) ([]byte, []string, error) {
	p, used, err := events.RedactPayload(ev.Payload, fields)
	if err != nil {
		return nil, nil, err
	}
	ev.Payload = p
	b, err := events.Marshal(ev)
	if err != nil {
		return nil, nil, err
	}
	pm, err := events.LocatePayload(b)
	if err != nil {
		return nil, nil, err
	}
	return pm.Value, used, nil
}

// redact rotates the thread's key so that the events named in
// replacements read as their replacement (payload msgpack) and nothing
// else of them can be opened, purges the thread's snapshot and appends
// rec. It returns rec's sequence and the snapshot keys purged.
func (c *Client) redact(ctx context.Context, tenant, thread, subject string, replacements map[string][]byte, rec events.Redacted) (uint64, []string, error) {
	rot, err := c.keys.BeginRotation(ctx, tenant, thread)
	if err != nil {
		return 0, nil, fmt.Errorf("client: redact %s/%s: %w", tenant, thread, err)
	}
	if err := sleep(ctx, threadkey.RotationWait); err != nil {
		return 0, nil, err
	}
	stored, err := c.readStored(ctx, subject, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("client: redact %s/%s: %w", tenant, thread, err)
	}
	datas := make([][]byte, len(stored))
	for i, m := range stored {
		datas[i] = m.Data
	}
	if err := rot.Finish(ctx, datas, replacements); err != nil {
		return 0, nil, fmt.Errorf("client: redact %s/%s: %w", tenant, thread, err)
	}
	// Every process reads the new record within KeyTTL: after it, nothing
	// can open the original or write a snapshot under a retired key.
	if err := sleep(ctx, threadkey.KeyTTL); err != nil {
		return 0, nil, err
	}
	// The snapshot and the index entry were sealed with a retired value
	// key: purged, the projector writes them again when it folds rec.
	p, err := snapstore.PurgeThread(ctx, c.js, c.snapshots, c.index, tenant, thread)
	if err != nil {
		return 0, nil, fmt.Errorf("client: redact %s/%s: purge snapshot: %w", tenant, thread, err)
	}
	purged := append(p.SnapshotKeys, p.IndexKeys...)
	c.cache.drop(threadRef{tenant, thread})
	res, err := c.Append(ctx, tenant, thread, []events.Event{{Payload: rec}},
		AnyVersion(), func(o *appendOptions) { o.redaction = true })
	if err != nil {
		return 0, purged, fmt.Errorf("client: redact %s/%s: the content is redacted; recording it failed: %w", tenant, thread, err)
	}
	return res.Version, purged, nil
}

// RangeRedactionReport is what [Client.RedactThrough] did.
type RangeRedactionReport struct {
	Tenant, Thread string
	// UpToSeq is the last sequence covered.
	UpToSeq uint64
	// Redacted counts the events whose content was redacted; Clear those
	// stored in the clear (no key: they keep their content); Without those
	// with no content (e.g. thread.reset, state.deleted) or kept (the
	// thread's attributes and state: thread.created, thread.updated,
	// state.set).
	Redacted, Clear, Without int
	// Version is the stream sequence of the event.redacted event (0 when
	// there was nothing to redact).
	Version      uint64
	SnapshotKeys []string
}

// RedactThrough redacts every event of tenant/thread with content up to
// and including upToSeq (all their content fields; events.RedactPayload),
// in one key rotation, and records it with one event.redacted naming the
// range. A retention policy that keeps only recent events uses it after
// a thread.compacted summary (agentd/retention). thread.created,
// thread.updated and state.set are kept (the thread's attributes and its
// key-value state, which later events build on). Events already redacted
// are redacted again (the same result). Errors as [Client.Redact]; the
// key record must hold a replacement of every event redacted (about
// 14,000 at the default max payload).
func (c *Client) RedactThrough(ctx context.Context, tenant, thread string, upToSeq uint64, reason string) (RangeRedactionReport, error) {
	if p := c.route(tenant, thread); p != c {
		return p.RedactThrough(ctx, tenant, thread, upToSeq, reason)
	}
	rep := RangeRedactionReport{Tenant: tenant, Thread: thread, UpToSeq: upToSeq}
	ctx, cancel, subject, err := c.startRedaction(ctx, tenant, thread)
	if err != nil {
		return rep, err
	}
	defer cancel()
	stored, err := c.readStored(ctx, subject, upToSeq)
	if err != nil {
		return rep, fmt.Errorf("client: redact %s/%s: %w", tenant, thread, err)
	}
	if len(stored) == 0 {
		return rep, &NotFoundError{Tenant: tenant, Thread: thread}
	}
	replacements := map[string][]byte{}
	for _, m := range stored {
		pm, err := events.LocatePayload(m.Data)
		if err != nil {
			continue // not an event: nothing to open either
		}
		switch t := pm.Envelope.Type; {
		case !events.HasContent(t), t == events.TypeThreadCreated, t == events.TypeThreadUpdated, t == events.TypeStateSet:
			rep.Without++ // nothing to redact, or the thread's attributes and state, which are kept
			continue
		case !pm.Sealed:
			rep.Clear++
			continue
		}
		opened, err := c.keys.OpenEvent(ctx, m.Data)
		if err != nil {
			return rep, fmt.Errorf("client: redact %s/%s seq %d: %w", tenant, thread, m.Sequence, err)
		}
		ev, err := events.Unmarshal(opened)
		if err != nil {
			rep.Without++
			continue
		}
		rp, _, err := replacementOf(ev, nil)
		if err != nil {
			return rep, err
		}
		replacements[ev.ID] = rp
		rep.Redacted++
	}
	if len(replacements) == 0 {
		return rep, nil
	}
	rep.Version, rep.SnapshotKeys, err = c.redact(ctx, tenant, thread, subject, replacements, events.Redacted{UpToSeq: upToSeq, Reason: reason})
	return rep, err
}

// readStored returns the messages of subject up to upTo (0 = all) as
// stored (sealed payloads are not opened).
func (c *Client) readStored(ctx context.Context, subject string, upTo uint64) ([]*RawEvent, error) {
	var out []*RawEvent
	for from := uint64(1); ; {
		msgs, pending, err := c.log.batch(ctx, subject, from, pageSize, pageBytes)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if upTo != 0 && m.Sequence > upTo {
				return out, nil
			}
			out = append(out, m)
		}
		if len(msgs) == 0 || pending == 0 {
			return out, nil
		}
		from = msgs[len(msgs)-1].Sequence + 1
	}
}

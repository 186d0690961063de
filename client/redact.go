package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/directget"
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
	// SnapshotKeys are the snapshot keys purged (the projector writes the
	// snapshot again from the log, under the thread's new value key).
	SnapshotKeys []string
}

// redactTimeout bounds a Redact whose ctx has no deadline: it waits
// threadkey.RotationWait and threadkey.KeyTTL and reads the whole thread.
const redactTimeout = 2 * time.Minute

// Redact makes the content of one event of tenant/thread (the event at
// stream sequence seq) unreadable everywhere, keeping the event and the
// rest of the thread (issue 20 item 4; docs/erasure-design.md): fields
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
	rep := RedactionReport{Tenant: tenant, Thread: thread, Seq: seq}
	if err := c.check(); err != nil {
		return rep, err
	}
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return rep, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, redactTimeout)
		defer cancel()
	}
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
	redacted, used, err := events.RedactPayload(ev.Payload, fields)
	if err != nil {
		return rep, fmt.Errorf("%w: seq %d: %v", ErrNotRedactable, seq, err)
	}
	rep.Fields = used
	ev.Payload = redacted
	b, err := events.Marshal(ev)
	if err != nil {
		return rep, err
	}
	rpm, err := events.LocatePayload(b)
	if err != nil {
		return rep, err
	}

	rot, err := c.keys.BeginRotation(ctx, tenant, thread)
	if err != nil {
		return rep, fmt.Errorf("client: redact %s/%s: %w", tenant, thread, err)
	}
	if err := sleep(ctx, threadkey.RotationWait); err != nil {
		return rep, err
	}
	stored, err := c.readStored(ctx, subject)
	if err != nil {
		return rep, fmt.Errorf("client: redact %s/%s: %w", tenant, thread, err)
	}
	if err := rot.Finish(ctx, stored, map[string][]byte{ev.ID: rpm.Value}); err != nil {
		return rep, fmt.Errorf("client: redact %s/%s: %w", tenant, thread, err)
	}
	// Every process reads the new record within KeyTTL: after it, nothing
	// can open the original or write a snapshot under a retired key.
	if err := sleep(ctx, threadkey.KeyTTL); err != nil {
		return rep, err
	}
	if rep.SnapshotKeys, err = snapstore.PurgeSnapshot(ctx, c.snapshots, tenant, thread); err != nil {
		return rep, fmt.Errorf("client: redact %s/%s: purge snapshot: %w", tenant, thread, err)
	}
	c.cache.drop(tenant + "." + thread)
	res, err := c.Append(ctx, tenant, thread, []events.Event{{Payload: events.Redacted{Seq: seq, EventID: ev.ID, Fields: used, Reason: reason}}},
		AnyVersion(), func(o *appendOptions) { o.redaction = true })
	if err != nil {
		return rep, fmt.Errorf("client: redact %s/%s: the event is redacted; recording it failed: %w", tenant, thread, err)
	}
	rep.Version = res.Version
	return rep, nil
}

// readStored returns the stored bytes of every message of subject, as
// stored (sealed payloads are not opened).
func (c *Client) readStored(ctx context.Context, subject string) ([][]byte, error) {
	var out [][]byte
	for from := uint64(1); ; {
		msgs, pending, err := directget.Batch(ctx, c.js, c.stream, subject, from, pageSize, pageBytes)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			out = append(out, m.Data)
		}
		if len(msgs) == 0 || pending == 0 {
			return out, nil
		}
		from = msgs[len(msgs)-1].Sequence + 1
	}
}

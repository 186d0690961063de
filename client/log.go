package client

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/projector"
)

// pageSize is the number of events one batched direct get returns at most,
// and pageBytes about how many bytes (the server stops after the message
// that reaches it).
const (
	pageSize  = 1000
	pageBytes = 8 << 20
)

// RawEvent is one message of a thread's subject as stored: its sequence,
// server time and bytes. Data may not decode (a foreign writer); the fold
// records such events as rejections.
type RawEvent = jetstream.RawStreamMsg

// readRaw yields the messages of tenant/thread with from <= seq <= upTo
// (upTo 0 = no bound), in stream order, using batched direct gets (server
// 2.11+), one page of at most pageSize events and about pageBytes at a time. Each page is read-isolated from
// writes, so an atomic batch is seen whole or not at all.
func (c *Client) readRaw(ctx context.Context, subject string, from, upTo uint64) iter.Seq2[*RawEvent, error] {
	return func(yield func(*RawEvent, error) bool) {
		if from == 0 {
			from = 1
		}
		for {
			if upTo != 0 && from > upTo {
				return
			}
			msgs, pending, err := directget.Batch(ctx, c.js, c.stream, subject, from, pageSize, pageBytes)
			if err != nil {
				yield(nil, fmt.Errorf("client: read %s from seq %d: %w", subject, from, err))
				return
			}
			for _, m := range msgs {
				if upTo != 0 && m.Sequence > upTo {
					return
				}
				from = m.Sequence + 1
				if !yield(m, nil) {
					return
				}
			}
			if len(msgs) == 0 || pending == 0 {
				return
			}
		}
	}
}

// readTail yields the messages of subject after version (up to upTo, 0 =
// no bound) like readRaw, but first asks the subject's last sequence (a
// last_by_subj get, answered from the server's per-subject index): when
// nothing is past version, which is the common case of a consistent read
// or a writer catching up, it reads nothing more. A batched read from an
// older sequence makes nats-server 2.15 load and walk a whole message
// block to count the pending messages (milliseconds on an old thread);
// the probe costs one small get. When the only new message is the last
// one (a next_by_subj get from version+1 tells), it is yielded without a
// batch.
func (c *Client) readTail(ctx context.Context, subject string, version, upTo uint64) iter.Seq2[*RawEvent, error] {
	return func(yield func(*RawEvent, error) bool) {
		last, err := directget.Last(ctx, c.js, c.stream, subject)
		if err != nil {
			yield(nil, fmt.Errorf("client: read %s after seq %d: %w", subject, version, err))
			return
		}
		if last == nil || last.Sequence <= version || upTo != 0 && upTo <= version {
			return
		}
		if upTo == 0 || last.Sequence <= upTo {
			next, err := directget.Next(ctx, c.js, c.stream, subject, version+1)
			if err != nil {
				yield(nil, fmt.Errorf("client: read %s after seq %d: %w", subject, version, err))
				return
			}
			if next != nil && next.Sequence == last.Sequence {
				yield(next, nil)
				return
			}
		}
		for m, err := range c.readRaw(ctx, subject, version+1, upTo) {
			if !yield(m, err) || err != nil {
				return
			}
		}
	}
}

// foldTail folds the thread's events after s.Version (up to upTo, 0 = all)
// into s. Windowed states are completed with the full history when an event
// needs it (projector.ErrNeedHistory).
func (c *Client) foldTail(ctx context.Context, s *projector.State, upTo uint64) error {
	subject, err := c.subjects.Thread(s.Tenant, s.Thread)
	if err != nil {
		return err
	}
	for m, err := range c.readTail(ctx, subject, s.Version, upTo) {
		if err != nil {
			return err
		}
		err := projector.ApplyBytes(s, m.Sequence, m.Time, m.Data)
		if errors.Is(err, projector.ErrNeedHistory) {
			full, ferr := c.foldFrom(ctx, s.Tenant, s.Thread, m.Sequence-1)
			if ferr != nil {
				return ferr
			}
			*s = *full
			err = projector.ApplyBytes(s, m.Sequence, m.Time, m.Data)
		}
		_ = err // rejections are recorded in s
	}
	return nil
}

// foldFrom folds tenant/thread from its first event up to upTo (0 = all)
// into a fresh, complete state.
func (c *Client) foldFrom(ctx context.Context, tenant, thread string, upTo uint64) (*projector.State, error) {
	s := projector.NewState(tenant, thread)
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return nil, err
	}
	for m, err := range c.readRaw(ctx, subject, 1, upTo) {
		if err != nil {
			return nil, err
		}
		_ = projector.ApplyBytes(s, m.Sequence, m.Time, m.Data)
	}
	return s, nil
}

// decodeRaw turns a raw message into a stored event; ok is false (with the
// decode error) when the bytes are not an event of this version.
func decodeRaw(m *RawEvent) (events.Stored, error) {
	ev, err := events.Unmarshal(m.Data)
	return events.Stored{Event: ev, Seq: m.Sequence, StoredAt: m.Time}, err
}

// lastSeq returns the sequence of the last event of subject, 0 if none.
func (c *Client) lastSeq(ctx context.Context, subject string) (uint64, error) {
	m, err := c.st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}

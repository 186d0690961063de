package client

// This file resolves duplicates: finds the events of an append the server
// already stored (a retry, or an ack lost in transit), so a retry returns
// what was stored.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/convlog/convlog/fold"
)

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
			if actual, err = c.log.leaderLastSeq(ctx, p.subject); err != nil {
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
// is repeated. p's first event stored right after from but not followed by
// the rest of p (another event, or none on the leader either) was stored by
// another append: an *IdempotencyMismatchError.
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
		for i, m := range msgs {
			if m.Header.Get(jetstream.MsgIDHeader) != p.ids[i] {
				// An atomic batch is stored at consecutive sequences: p's
				// first event is followed by another's.
				return AppendResult{}, false, p.otherAppend(0, msgs[0])
			}
		}
		if len(msgs) == n {
			seqs := make([]uint64, n)
			for i, m := range msgs {
				seqs[i] = m.Sequence
			}
			return p.result(seqs, msgs, true), true, nil
		}
		// Less than the whole append is visible after from.
		if atLeast == 0 && !askedLeader {
			askedLeader = true
			if atLeast, err = c.log.leaderLastSeq(ctx, p.subject); err != nil {
				return AppendResult{}, false, err
			}
		}
		var seen uint64
		if len(msgs) > 0 {
			seen = msgs[len(msgs)-1].Sequence
		}
		if atLeast <= max(from, seen) {
			if len(msgs) > 0 {
				// The thread ends before the rest of p.
				return AppendResult{}, false, p.otherAppend(0, msgs[0])
			}
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
	first, err := c.log.next(ctx, subject, from+1)
	if err == nil && first == nil {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: read %s after seq %d: %w", subject, from, err)
	}
	if n == 1 || first.Header.Get(jetstream.MsgIDHeader) != firstID {
		return []*RawEvent{first}, c.openRaw(ctx, first)
	}
	out, _, err := c.log.batch(ctx, subject, from+1, n, 0)
	if err == nil {
		err = c.openAll(ctx, out)
	}
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
// Some of them found, not all, is an *IdempotencyMismatchError naming the
// first found.
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
			for i, m := range stored {
				if m != nil {
					// Some of p's ids are on the thread, not all: an
					// atomic batch is visible whole or not at all, so
					// another append stored them.
					return AppendResult{}, false, p.otherAppend(i, m)
				}
			}
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

func (c *Client) logDuplicate(p *prepared, how string, code int, version uint64) {
	c.cfg.Logger.Debug("append was already stored", "tenant", p.tenant, "thread", p.thread,
		"how", how, "code", code, "seq", version, "events", len(p.ids))
}

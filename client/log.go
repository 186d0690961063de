package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/directget"
)

// pageSize is the number of events one batched direct get returns at most,
// and pageBytes about how many bytes (the server stops after the message
// that reaches it). BenchmarkBatch (internal/directget: 10,000 messages of
// 700 bytes) finds no page size between 250 and 10,000 messages, nor a
// max_bytes, faster than another beyond the noise: the cost is per
// message, in the server and in nats.go. Larger pages are not free
// either: the server holds the stream's isolation lock for a whole page,
// and appends to the stream wait for it.
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
// 2.11+), one page of at most c.pageSize events and about pageBytes at a
// time. Each page is read-isolated from writes, so an atomic batch is seen
// whole or not at all.
//
// A long read (more than Config.ConsumerReadThreshold messages left after
// the first page) reads the rest through a consumer instead, and falls
// back to pages when it cannot (see longread.go).
//
// Read-ahead: when the first page says more messages are pending, a
// goroutine reads the following pages while the caller works through the
// current one (so reading the log and folding it overlap). It runs at
// most two pages ahead, so at most three pages are in memory. It is
// stopped and waited for before the iterator returns, also when the
// caller stops early. What the caller sees is what reading page by page
// would give: the same messages in the same order, an error in place of
// the page whose read failed (after every message before it), and, when
// ctx ends, an error wrapping ctx.Err() at the next page boundary, pages
// read ahead being dropped.
func (c *Client) readRaw(ctx context.Context, subject string, from, upTo uint64) iter.Seq2[*RawEvent, error] {
	return c.readRawInto(ctx, subject, from, upTo, nil)
}

// maxReserve bounds the messages readRawInto reserves room for (about
// 264 bytes each).
const maxReserve = 1 << 20

// readRawInto is readRaw for a fold into s: after the first page, when it
// knows at most how many events will come (the page, the server's pending
// count, and upTo), it reserves room for them in s (fold.State.Reserve),
// so that the fold does not grow its message slice by doubling.
func (c *Client) readRawInto(ctx context.Context, subject string, from, upTo uint64, s *fold.State) iter.Seq2[*RawEvent, error] {
	return func(yield func(*RawEvent, error) bool) {
		if from == 0 {
			from = 1
		}
		if upTo != 0 && from > upTo {
			return
		}
		p := c.readPageN(ctx, subject, from, upTo, c.firstPageSize())
		reserveFor(s, p, upTo)
		var ahead <-chan page
		triedConsumer := false
		for {
			if p.err != nil {
				yield(nil, fmt.Errorf("client: read %s from seq %d: %w", subject, p.from, p.err))
				return
			}
			next, more := p.next(upTo)
			if more && ahead == nil && !triedConsumer && c.wantConsumer(p.pending, next, upTo) {
				if !p.yield(upTo, yield) {
					return
				}
				triedConsumer = true
				var over bool
				if next, over = c.readByConsumer(ctx, subject, next, upTo, yield); over {
					return
				}
				// The consumer could not be used: on with direct gets.
				p = c.readPage(ctx, subject, next, upTo)
				continue
			}
			if more && ahead == nil {
				var stop func()
				ahead, stop = c.startReadAhead(ctx, subject, next, upTo)
				defer stop()
			}
			if !p.yield(upTo, yield) || !more {
				return
			}
			var ok bool
			if ctx.Err() == nil {
				p, ok = <-ahead
			}
			if !ok {
				// readAhead stops early only when ctx ended.
				yield(nil, fmt.Errorf("client: read %s from seq %d: %w", subject, next, ctx.Err()))
				return
			}
		}
	}
}

// reserveFor reserves room in s (nil: none) for the events a read whose
// first page is p can yield at most: the page and the server's pending
// count, bounded by upTo (0 = no bound) and maxReserve.
func reserveFor(s *fold.State, p page, upTo uint64) {
	if s == nil || p.err != nil || len(p.msgs) == 0 {
		return
	}
	n := uint64(len(p.msgs)) + p.pending
	if first := p.msgs[0].Sequence; upTo != 0 && upTo >= first {
		n = min(n, upTo-first+1) // sequences of one subject grow by at least 1
	}
	s.Reserve(int(min(n, maxReserve)))
}

// startReadAhead runs readAhead from next in a goroutine and returns the
// channel of its pages and the function that stops it and waits for it.
func (c *Client) startReadAhead(ctx context.Context, subject string, next, upTo uint64) (<-chan page, func()) {
	ch := make(chan page, 1)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.readAhead(rctx, subject, next, upTo, ch) })
	return ch, func() {
		cancel()
		wg.Wait()
	}
}

// page is the result of one batched read of a subject from a sequence.
type page struct {
	from    uint64
	msgs    []*RawEvent
	pending uint64 // messages of the subject after the page
	err     error
}

// firstPage is the most events a read's first page asks for when the
// rest may be read through a consumer. The first page's pending count
// decides how the rest is read, and a batched direct get costs the server
// several times a consumer's delivery per event (longread.go): with a
// first page of 1,000 events a 10,000-event replay spent a quarter of its
// time on it. A read of more events than firstPage costs one more round
// trip, which the read-ahead overlaps with the caller's work on the first
// page.
const firstPage = 32

// firstPageSize is the size of a read's first page: firstPage when a
// consumer may read the rest, else c.pageSize.
func (c *Client) firstPageSize() int {
	if c.consumerMin < 0 {
		return c.pageSize
	}
	return min(c.pageSize, firstPage)
}

// readPage reads the page of subject starting at from. With a bound upTo,
// it asks for no more messages than [from, upTo] can hold.
func (c *Client) readPage(ctx context.Context, subject string, from, upTo uint64) page {
	return c.readPageN(ctx, subject, from, upTo, c.pageSize)
}

// readPageN is readPage with pages of at most n events.
func (c *Client) readPageN(ctx context.Context, subject string, from, upTo uint64, n int) page {
	if upTo != 0 && upTo-from < uint64(n) {
		n = int(upTo-from) + 1
	}
	msgs, pending, err := c.log.batch(ctx, subject, from, n, pageBytes)
	if err == nil {
		err = c.openAll(ctx, msgs)
	}
	return page{from: from, msgs: msgs, pending: pending, err: err}
}

// yield yields p's messages up to upTo (0 = no bound) and reports
// whether the read goes on: false when yield stopped it or a message is
// past upTo.
func (p page) yield(upTo uint64, yield func(*RawEvent, error) bool) bool {
	for _, m := range p.msgs {
		if upTo != 0 && m.Sequence > upTo {
			return false
		}
		if !yield(m, nil) {
			return false
		}
	}
	return true
}

// next returns where the page after p starts, and false when p is the
// last one to read: it failed, the subject has nothing after it, or the
// next message would be past upTo (0 = no bound).
func (p page) next(upTo uint64) (uint64, bool) {
	if p.err != nil || len(p.msgs) == 0 || p.pending == 0 {
		return 0, false
	}
	from := p.msgs[len(p.msgs)-1].Sequence + 1
	if upTo != 0 && from > upTo {
		return 0, false
	}
	return from, true
}

// readAhead reads the pages of subject from from on into out, in order,
// until the last one (see page.next) has been sent or ctx ends; it closes
// out when it returns.
func (c *Client) readAhead(ctx context.Context, subject string, from, upTo uint64, out chan<- page) {
	defer close(out)
	for {
		p := c.readPage(ctx, subject, from, upTo)
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
		next, more := p.next(upTo)
		if !more {
			return
		}
		from = next
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
//
// probe, when not nil, is that last_by_subj get already under way (see
// probeLast), started before the state at version was read.
func (c *Client) readTail(ctx context.Context, subject string, version, upTo uint64, probe *lastProbe) iter.Seq2[*RawEvent, error] {
	return func(yield func(*RawEvent, error) bool) {
		var last *RawEvent
		var err error
		if probe != nil {
			last, err = probe.wait(ctx)
		} else {
			last, err = directget.Last(ctx, c.js, c.stream, subject)
		}
		if err != nil {
			yield(nil, fmt.Errorf("client: read %s after seq %d: %w", subject, version, err))
			return
		}
		if last == nil || last.Sequence <= version || upTo != 0 && upTo <= version {
			return
		}
		if upTo == 0 || last.Sequence <= upTo {
			next, err := c.log.next(ctx, subject, version+1)
			if err == nil {
				err = c.openRaw(ctx, next)
			}
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

// lastProbe is a last_by_subj direct get of a thread's subject running in
// the background, so that it overlaps the snapshot read that precedes the
// tail: a consistent Get costs the longer of the two round trips instead of
// their sum. Started before the snapshot is read, the last sequence it
// reports covers every event acknowledged before the read began, which is
// all that read-your-writes needs; events it misses are newer than the
// read.
type lastProbe struct {
	done chan struct{}
	last *RawEvent
	err  error
}

// probeLast starts a lastProbe of subject; its goroutine ends with the get
// (bounded by ctx) whether or not anyone waits for it.
func (c *Client) probeLast(ctx context.Context, subject string) *lastProbe {
	p := &lastProbe{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.last, p.err = directget.Last(ctx, c.js, c.stream, subject)
	}()
	return p
}

// wait returns the probe's answer: the subject's last message, nil if it
// has none.
func (p *lastProbe) wait(ctx context.Context) (*RawEvent, error) {
	select {
	case <-p.done:
		return p.last, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// foldTail folds the thread's events after s.Version (up to upTo, 0 = all)
// into s. Windowed states are completed with the full history when an event
// needs it (fold.ErrNeedHistory).
func (c *Client) foldTail(ctx context.Context, s *fold.State, upTo uint64) error {
	return c.foldTailProbed(ctx, s, upTo, nil)
}

// foldTailProbed is foldTail with a lastProbe of the thread's subject
// started before s was read (nil: probe now).
func (c *Client) foldTailProbed(ctx context.Context, s *fold.State, upTo uint64, probe *lastProbe) error {
	subject, err := c.subjects.Thread(s.Tenant, s.Thread)
	if err != nil {
		return err
	}
	for m, err := range c.readTail(ctx, subject, s.Version, upTo, probe) {
		if err != nil {
			return err
		}
		if s.Version != 0 && m.Header.Get(events.HeaderType) == string(events.TypeErased) {
			// Over events read before it, a marker is an erasure only if
			// they were purged (it is the subject's first message now);
			// else the fold rejects it (a marker published by hand).
			if err := c.foldMarker(ctx, s, subject, m); err != nil {
				return err
			}
			continue
		}
		err := c.applyRaw(ctx, s, m)
		if errors.Is(err, fold.ErrNeedHistory) {
			full, ferr := c.foldFrom(ctx, s.Tenant, s.Thread, m.Sequence-1)
			if ferr != nil {
				return ferr
			}
			*s = *full
			err = c.applyRaw(ctx, s, m)
		}
		var rej *fold.RejectionError
		if err != nil && !errors.As(err, &rej) && !errors.Is(err, fold.ErrNeedHistory) {
			return err // reading a fork's source failed
		}
	}
	return nil
}

// foldMarker folds the erasure marker m over s, a state of events stored
// before it: with fold.ApplyErasure when m is the first message now
// stored on subject (the events s holds were purged, as Erase does), else
// with fold.Apply, which rejects it.
func (c *Client) foldMarker(ctx context.Context, s *fold.State, subject string, m *RawEvent) error {
	first, err := c.log.next(ctx, subject, 1)
	if err != nil {
		return fmt.Errorf("client: first message of %s: %w", subject, err)
	}
	st, derr := decodeRaw(m)
	if derr != nil {
		_ = fold.ApplyBytes(s, m.Sequence, m.Time, m.Data) // recorded as rejected
		return nil
	}
	if first != nil && first.Sequence == m.Sequence {
		_ = fold.ApplyErasure(s, st)
	} else {
		_ = fold.Apply(s, st) // rejections are recorded in s
	}
	return nil
}

// foldFrom folds tenant/thread from its first event up to upTo (0 = all)
// into a fresh, complete state.
func (c *Client) foldFrom(ctx context.Context, tenant, thread string, upTo uint64) (*fold.State, error) {
	s := fold.NewState(tenant, thread)
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return nil, err
	}
	for m, err := range c.readRawInto(ctx, subject, 1, upTo, s) {
		if err != nil {
			return nil, err
		}
		if err := c.applyRaw(ctx, s, m); err != nil && !errors.Is(err, fold.ErrRejected) {
			return nil, err
		}
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
	m, err := directget.Last(ctx, c.js, c.stream, subject)
	if err != nil || m == nil {
		return 0, err
	}
	return m.Sequence, nil
}

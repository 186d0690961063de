package client

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Long reads through a consumer.
//
// A batched direct get costs nats-server 2.15 several times the CPU per
// message of a consumer's delivery for convlog's events: every event
// is stored with headers (Convlog-Type, Convlog-Schema, Nats-Msg-Id), and
// for such a message the server adds the six direct get headers one by
// one through net/http.Header.Write, and the client parses nine headers
// instead of three (internal/directget's BenchmarkBatch and
// BenchmarkOrderedConsumer compare the two). So a read with many events left after its first page reads them through
// an ephemeral consumer (memory storage, one replica, no acks), created
// for the read and deleted after it.
//
// The consumer is an accelerator, never the only way: if it cannot be
// created (permissions, limits), or it fails or skips a message while
// delivering, the read goes on with batched direct gets from the first
// message not yet yielded, so the caller sees the same messages either
// way. After a failed creation the client does not try again for
// consumerRetryAfter.

// consumerCreateTimeout bounds creating the read's consumer. A client
// whose NATS user may not create consumers gets no reply (a permissions
// violation is reported asynchronously), so this is what such a read
// waits once before falling back; Config.ConsumerReadThreshold < 0 avoids
// it.
const consumerCreateTimeout = 2 * time.Second

// consumerDeleteTimeout bounds deleting the read's consumer; if the delete
// does not get through, the server removes the consumer after
// consumerInactive.
const (
	consumerDeleteTimeout = time.Second
	consumerInactive      = time.Minute
)

// consumerPullExpiry is how long one pull request of the read waits at
// most; the server sends a heartbeat every quarter of it, so a consumer
// that went away (deleted, its server restarted) is noticed after about
// half of it, and the read goes on with direct gets.
const consumerPullExpiry = 2 * time.Second

// consumerRetryAfter is how long a client reads with direct gets only
// after it failed to create a consumer.
const consumerRetryAfter = 5 * time.Minute

// wantConsumer reports whether the read of subject from next (up to upTo,
// 0 = no bound), after a first page that left pending messages, should
// use a consumer.
func (c *Client) wantConsumer(pending, next, upTo uint64) bool {
	if c.consumerMin < 0 {
		return false
	}
	left := pending
	if upTo != 0 {
		left = min(left, upTo-next+1)
	}
	return left > uint64(c.consumerMin) && time.Now().UnixNano() >= c.consumerOffUntil.Load()
}

// readByConsumer yields the messages of subject from from up to upTo (0 =
// no bound) and up to the subject's last message when it starts, as the
// stream leader has it (so that
// what it reads is committed: an atomic batch is whole), through an
// ephemeral consumer. It returns the sequence to go on from and whether
// the read is over: finished, stopped by yield, or ended by ctx (the
// error yielded). Not over means the consumer could not be used or
// failed: the caller reads on with direct gets from the returned sequence.
// Everything it starts is stopped and deleted before it returns.
func (c *Client) readByConsumer(ctx context.Context, subject string, from, upTo uint64, yield func(*RawEvent, error) bool) (uint64, bool) {
	// The leader's last sequence, not a direct get's: on a replicated
	// stream a lagging follower may answer a direct get with an older
	// last message, and the read would end early.
	last, err := c.log.leaderLastSeq(ctx, subject)
	if err != nil {
		return from, false
	}
	if last < from {
		return from, true // purged meanwhile: nothing more
	}
	end := last
	if upTo != 0 {
		end = min(end, upTo)
	}
	cons, ok := c.startReadConsumer(ctx, subject, from)
	if !ok {
		return from, false
	}
	name := cons.CachedInfo().Name
	defer c.deleteConsumer(ctx, name)
	if cons.CachedInfo().NumPending == 0 {
		return from, true
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(c.pageSize), jetstream.PullExpiry(consumerPullExpiry),
		jetstream.PullHeartbeat(consumerPullExpiry/4))
	if err != nil {
		return from, false
	}
	// Stop ends the iterator's pulls; its goroutines (nats.go's) end on
	// their own. (Its Closed channel, not in the interface, did not close
	// after Stop in nats.go v1.55.0: nothing waits for it.)
	defer it.Stop()
	return c.drainConsumer(ctx, it, subject, from, end, yield)
}

// startReadConsumer creates the ephemeral consumer of one read of subject
// from sequence from (in memory, one replica, no acks). It reports false
// when the consumer cannot be created; then, unless ctx has ended, it logs
// a warning and turns consumers off for consumerRetryAfter.
func (c *Client) startReadConsumer(ctx context.Context, subject string, from uint64) (jetstream.Consumer, bool) {
	cctx, cancel := context.WithTimeout(ctx, consumerCreateTimeout)
	cons, err := c.createConsumer(cctx, c.stream, jetstream.ConsumerConfig{
		Description:       "convlog client: one read of " + subject,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		FilterSubject:     subject,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: consumerInactive,
	})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			c.consumerOffUntil.Store(time.Now().Add(consumerRetryAfter).UnixNano())
			c.cfg.Logger.Warn("cannot create a consumer for a long read; reading with direct gets",
				"subject", subject, "retry_in", consumerRetryAfter, "err", err)
		}
		return nil, false
	}
	return cons, true
}

// drainConsumer yields the messages it pulls from a read's consumer, from
// sequence from up to end, opened as [Client.openRaw] does (in place). It returns the
// sequence to go on from and whether the read is over, as
// [Client.readByConsumer] does: a failed pull or a skipped delivery is not
// over; ctx's end and an open error are yielded (wrapped for ctx) and over.
func (c *Client) drainConsumer(ctx context.Context, it jetstream.MessagesContext, subject string, from, end uint64, yield func(*RawEvent, error) bool) (uint64, bool) {
	var delivered uint64
	next := jetstream.NextContext(ctx) // one option for every Next: none allocated per message
	for {
		m, err := it.Next(next)
		if ctx.Err() != nil {
			yield(nil, fmt.Errorf("client: read %s from seq %d: %w", subject, from, ctx.Err()))
			return from, true
		}
		if err != nil {
			c.cfg.Logger.Debug("consumer read failed; reading on with direct gets", "subject", subject, "seq", from, "err", err)
			return from, false
		}
		md, err := m.Metadata()
		if err != nil || md.Sequence.Consumer != delivered+1 {
			c.cfg.Logger.Debug("consumer read skipped a message; reading on with direct gets", "subject", subject, "seq", from, "err", err)
			return from, false
		}
		delivered++
		seq := md.Sequence.Stream
		if seq > end {
			return from, true
		}
		raw := &RawEvent{Subject: m.Subject(), Sequence: seq, Header: m.Headers(), Time: md.Timestamp.UTC()}
		// The message's bytes are its own (nats.go copies every message
		// out of its read buffer) and nothing else holds them: opened in
		// place, without a copy.
		data, err := c.keys.OpenStoredInPlace(ctx, m.Data())
		if err != nil {
			yield(nil, fmt.Errorf("client: open event at seq %d: %w", seq, err))
			return from, true
		}
		raw.Data = data
		if !yield(raw, nil) {
			return seq + 1, true
		}
		from = seq + 1
		if seq == end {
			return from, true
		}
		if md.NumPending == 0 {
			// The consumer may run on a replica that lags the leader:
			// done only if the leader has nothing more up to end (an
			// erasure purged the rest), else wait for the replica.
			if last, err := c.log.leaderLastSeq(ctx, subject); err != nil || last < from {
				return from, err == nil
			}
		}
	}
}

// deleteConsumer deletes a read's consumer, also when ctx has ended.
func (c *Client) deleteConsumer(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), consumerDeleteTimeout)
	defer cancel()
	if err := c.js.DeleteConsumer(dctx, c.stream, name); err != nil {
		c.cfg.Logger.Debug("cannot delete a read's consumer; the server removes it when inactive",
			"consumer", name, "inactive_threshold", consumerInactive, "err", err)
	}
}

package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// pagedLog is a client reading pages of 4 messages, and a subject of 23
// messages interleaved with another subject's (as threads share the
// stream), with their sequences.
func pagedLog(t *testing.T) (*Client, *natstest.Server, string, []uint64) {
	t.Helper()
	s := natstest.Run(t)
	c, subject, seqs := pagedLogOn(t, s.NC, provision.Config{})
	return c, s, subject, seqs
}

// pagedLogOn is pagedLog on nc, with the stream provisioned by res.
func pagedLogOn(t *testing.T, nc *nats.Conn, res provision.Config) (*Client, string, []uint64) {
	t.Helper()
	ctx := context.Background()
	c, err := New(ctx, nc, Config{Provision: true, Resources: res,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	c.pageSize = 4
	subject, err := c.subjects.Thread("default", "paged")
	require.NoError(t, err)
	other, err := c.subjects.Thread("default", "other")
	require.NoError(t, err)
	var seqs []uint64
	for i := range 23 {
		ack, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: fmt.Appendf(nil, "m%d", i),
			Header: nats.Header{jetstream.MsgIDHeader: {fmt.Sprint("id-", i)}}})
		require.NoError(t, err)
		seqs = append(seqs, ack.Sequence)
		if i%3 == 0 {
			_, err := c.js.Publish(ctx, other, []byte("noise"))
			require.NoError(t, err)
		}
	}
	return c, subject, seqs
}

// requireNoReadAhead fails if a read-ahead goroutine is running: readRaw
// stops and waits for its goroutine before it returns, so none may be
// left, not even briefly.
func requireNoReadAhead(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	require.NotContains(t, string(buf), "client.(*Client).readAhead", "a read-ahead goroutine outlived its iterator")
	require.False(t, strings.Contains(string(buf), "directget.Batch"), "a batched read outlived its iterator")
}

// readAll collects what readRaw yields: sequences, and the error if any
// (nothing may follow an error).
func readAll(t *testing.T, c *Client, ctx context.Context, subject string, from, upTo uint64) ([]uint64, error) {
	t.Helper()
	return readAllThen(t, c, ctx, subject, from, upTo, nil)
}

// readAllThen is readAll calling after(n) once the n-th message is in.
func readAllThen(t *testing.T, c *Client, ctx context.Context, subject string, from, upTo uint64, after func(n int)) ([]uint64, error) {
	t.Helper()
	var got []uint64
	var rerr error
	for m, err := range c.readRaw(ctx, subject, from, upTo) {
		require.NoError(t, rerr, "a message or error after the error")
		if err != nil {
			rerr = err
			continue
		}
		got = append(got, m.Sequence)
		if after != nil {
			after(len(got))
		}
	}
	return got, rerr
}

// readModes are the two ways readRaw reads past its first page: pages of
// batched direct gets read ahead, and a consumer (every read that has a
// second page uses one).
var readModes = []struct {
	name        string
	consumerMin int
}{{"pages", -1}, {"consumer", 0}}

// requireNoConsumers fails if a read left a consumer on the stream. (On
// a replicated stream the count follows a delete shortly after.)
func requireNoConsumers(t *testing.T, c *Client) {
	t.Helper()
	var n int
	require.Eventually(t, func() bool {
		info, err := c.st.Info(context.Background())
		require.NoError(t, err)
		n = info.State.Consumers
		return n == 0
	}, 5*time.Second, 5*time.Millisecond, "a read left its consumer behind")
}

// Reading yields exactly the subject's messages in [from, upTo], in
// order, for every bound (page-aligned or not, inside a page, past the
// end, before the start), either way, and leaves no goroutine or
// consumer behind.
func TestReadRawYieldsExactlyTheBoundedRange(t *testing.T) {
	for _, mode := range readModes {
		t.Run(mode.name, func(t *testing.T) {
			c, _, subject, seqs := pagedLog(t)
			c.consumerMin = mode.consumerMin
			defer requireNoReadAhead(t)
			ctx := context.Background()
			last := seqs[len(seqs)-1]
			var bounds []uint64
			for s := uint64(0); s <= last+2; s++ {
				bounds = append(bounds, s)
			}
			for _, from := range bounds {
				for _, upTo := range bounds {
					var want []uint64
					for _, s := range seqs {
						if s >= max(from, 1) && (upTo == 0 || s <= upTo) {
							want = append(want, s)
						}
					}
					got, err := readAll(t, c, ctx, subject, from, upTo)
					require.NoError(t, err)
					require.Equal(t, want, got, "from %d up to %d", from, upTo)
				}
			}
			requireNoConsumers(t, c)
		})
	}
}

// A caller that stops early, at any message, stops the read-ahead
// goroutine (or the consumer) before the iterator returns.
func TestReadRawStopsReadingWhenTheCallerStops(t *testing.T) {
	for _, mode := range readModes {
		t.Run(mode.name, func(t *testing.T) {
			c, _, subject, seqs := pagedLog(t)
			c.consumerMin = mode.consumerMin
			ctx := context.Background()
			for stop := 1; stop <= len(seqs); stop++ {
				func() {
					defer requireNoReadAhead(t)
					n := 0
					for m, err := range c.readRaw(ctx, subject, 1, 0) {
						require.NoError(t, err)
						require.Equal(t, seqs[n], m.Sequence)
						n++
						if n == stop {
							break
						}
					}
					require.Equal(t, stop, n)
				}()
				requireNoConsumers(t, c)
			}
		})
	}
}

// A ctx that ends while the caller works ends the read with an error
// wrapping the ctx's error, and nothing after it. Reading pages, the rest
// of the current page comes first; reading through a consumer (past the
// first page), no message comes after the ctx ended.
func TestReadRawEndsWithTheCtxError(t *testing.T) {
	for _, mode := range readModes {
		t.Run(mode.name, func(t *testing.T) {
			c, _, subject, seqs := pagedLog(t)
			c.consumerMin = mode.consumerMin
			for cancelAt := 1; cancelAt <= len(seqs); cancelAt++ {
				func() {
					defer requireNoReadAhead(t)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					got, rerr := readAllThen(t, c, ctx, subject, 1, 0, func(n int) {
						if n == cancelAt {
							cancel()
						}
					})
					end := min((cancelAt+c.pageSize-1)/c.pageSize*c.pageSize, len(seqs))
					if mode.consumerMin >= 0 && cancelAt > c.pageSize {
						end = cancelAt
					}
					require.Equal(t, seqs[:end], got, "cancelled at message %d", cancelAt)
					if end == len(seqs) {
						require.NoError(t, rerr, "nothing was left to read")
						return
					}
					require.ErrorIs(t, rerr, context.Canceled)
					require.Contains(t, rerr.Error(), fmt.Sprintf("client: read %s from seq %d", subject, seqs[end-1]+1))
				}()
				requireNoConsumers(t, c)
			}
		})
	}
}

// A page whose read fails yields an error after every message before it,
// and nothing after it.
func TestReadRawReportsAFailedPageInOrder(t *testing.T) {
	for _, mode := range readModes {
		t.Run(mode.name, func(t *testing.T) {
			c, s, subject, seqs := pagedLog(t)
			c.consumerMin = mode.consumerMin
			defer requireNoReadAhead(t)
			ctx := context.Background()
			got, rerr := readAllThen(t, c, ctx, subject, 1, 0, func(n int) {
				if n == 1 {
					// No stream, no direct get: later pages fail (the pages
					// already read ahead still come, in order).
					require.NoError(t, s.JS.DeleteStream(ctx, c.stream))
				}
			})
			require.Error(t, rerr)
			require.Less(t, len(got), len(seqs))
			require.Equal(t, seqs[:len(got)], got)
			require.Zero(t, len(got)%c.pageSize, "a failed read replaces a whole page")
			require.Contains(t, rerr.Error(), fmt.Sprintf("client: read %s from seq %d", subject, seqs[len(got)-1]+1))
			require.False(t, errors.Is(rerr, context.Canceled))
		})
	}
}

// When no consumer can be created, a long read reads on with direct gets
// (the same messages), and the client does not try again for a while.
func TestReadRawFallsBackWhenNoConsumerCanBeCreated(t *testing.T) {
	c, _, subject, seqs := pagedLog(t)
	c.consumerMin = 0
	defer requireNoReadAhead(t)
	tries := 0
	c.createConsumer = func(context.Context, string, jetstream.ConsumerConfig) (jetstream.Consumer, error) {
		tries++
		return nil, errors.New("nats: permissions violation")
	}
	for range 3 {
		got, err := readAll(t, c, context.Background(), subject, 1, 0)
		require.NoError(t, err)
		require.Equal(t, seqs, got)
	}
	require.Equal(t, 1, tries, "no second try within consumerRetryAfter")
	require.Greater(t, c.consumerOffUntil.Load(), time.Now().Add(consumerRetryAfter-time.Minute).UnixNano())
}

// A consumer that goes away in the middle of a read (deleted, its server
// restarted) makes the read go on with direct gets from the first message
// not yet yielded: no gap, no duplicate.
func TestReadRawFallsBackWhenTheConsumerFails(t *testing.T) {
	c, s, subject, seqs := pagedLog(t)
	c.consumerMin = 0
	defer requireNoReadAhead(t)
	ctx := context.Background()
	var got []uint64
	for m, err := range c.readRaw(ctx, subject, 1, 0) {
		require.NoError(t, err)
		got = append(got, m.Sequence)
		if len(got) == c.pageSize+1 { // the consumer's first message
			for name := range c.st.ConsumerNames(ctx).Name() {
				require.NoError(t, s.JS.DeleteConsumer(ctx, c.stream, name))
			}
		}
	}
	require.Equal(t, seqs, got)
	requireNoConsumers(t, c)
}

// On a replicated stream (3 nodes, R3) a long read through a consumer
// gives the same messages, and deletes its consumer.
func TestReadRawThroughAConsumerOnAReplicatedStream(t *testing.T) {
	cl := natstest.RunCluster(t, 3)
	nc, _ := cl.Connect(t)
	c, subject, seqs := pagedLogOn(t, nc, provision.Config{Replicas: 3})
	c.consumerMin = 0
	// Direct gets may be answered by a follower that lags (either way of
	// reading): wait until every answer has the last message.
	require.Eventually(t, func() bool {
		for range 20 {
			m, err := directget.Last(context.Background(), c.js, c.stream, subject)
			if err != nil || m == nil || m.Sequence != seqs[len(seqs)-1] {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	tries := 0
	create := c.createConsumer
	c.createConsumer = func(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
		tries++
		return create(ctx, stream, cfg)
	}
	for _, upTo := range []uint64{0, seqs[9], seqs[len(seqs)-1]} {
		got, err := readAll(t, c, context.Background(), subject, 1, upTo)
		require.NoError(t, err)
		want := seqs
		if upTo != 0 {
			want = nil
			for _, s := range seqs {
				if s <= upTo {
					want = append(want, s)
				}
			}
		}
		require.Equal(t, want, got, "up to %d", upTo)
		requireNoConsumers(t, c)
	}
	require.Equal(t, 3, tries, "every read went through a consumer")
	require.Zero(t, c.consumerOffUntil.Load(), "no consumer creation failed")
}

// Both ways give the same messages: subject, sequence, store time (UTC),
// data and the stored headers.
func TestReadRawGivesTheSameMessagesEitherWay(t *testing.T) {
	c, _, subject, seqs := pagedLog(t)
	read := func(consumerMin int) []*RawEvent {
		c.consumerMin = consumerMin
		var out []*RawEvent
		for m, err := range c.readRaw(context.Background(), subject, 1, 0) {
			require.NoError(t, err)
			out = append(out, m)
		}
		require.Len(t, out, len(seqs))
		return out
	}
	pages, cons := read(-1), read(0)
	for i := range pages {
		p, q := pages[i], cons[i]
		require.Equal(t, p.Subject, q.Subject)
		require.Equal(t, p.Sequence, q.Sequence)
		require.Equal(t, p.Data, q.Data)
		require.Equal(t, p.Time, q.Time)
		require.Equal(t, time.UTC, q.Time.Location())
		require.Equal(t, fmt.Sprint("id-", i), q.Header.Get(jetstream.MsgIDHeader))
		require.Equal(t, p.Header.Get(jetstream.MsgIDHeader), q.Header.Get(jetstream.MsgIDHeader))
	}
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/directget"
)

// errNoBudget: the server's StreamTotalBytes budget had no room for a page
// within the wait allowed.
var errNoBudget = errors.New("httpapi: no room in the stream memory budget")

// pageMsgs is the most messages one page of a stream or an events page
// reads (fewer when StreamBufferBytes is reached first).
const pageMsgs = 500

// headerSlack is added to a message's size bound for its headers (the
// event's own and the six the direct get API adds).
const headerSlack = 4 << 10

// logReader reads one thread's log a page at a time, each page within the
// stream's share of StreamBufferBytes and taken from the server's
// StreamTotalBytes budget before it is read. Used by one goroutine.
type logReader struct {
	s  *Server
	js jetstream.JetStream
	// pc is the client of the thread's partition.
	pc      *client.Client
	stream  string
	subject string
	hold    holding
	// maxMsg bounds one message's bytes (the connection's max payload).
	maxMsg int64
}

func (s *Server) newLogReader(tenant, id string) (*logReader, error) {
	pc := s.c.For(tenant, id) // the thread's partition
	subject, err := pc.Subjects().Thread(tenant, id)
	if err != nil {
		return nil, err
	}
	js := s.c.JetStream()
	return &logReader{s: s, pc: pc, js: js, stream: pc.Config().Resources.Stream, subject: subject,
		hold: holding{b: s.streams}, maxMsg: js.Conn().MaxPayload()}, nil
}

// close gives back everything the reader holds.
func (lr *logReader) close() { lr.hold.releaseAll() }

// plan returns how many bytes a page may take (its reservation), the
// max_bytes to ask the server for, and the batch size. The server stops a
// page after the message that reaches max_bytes, so a page holds less than
// max_bytes plus one message: the reservation covers that. When half the
// stream buffer cannot hold a message more, pages are one message each.
func (lr *logReader) plan(n int) (reserve int64, maxBytes, batch int) {
	half := lr.s.cfg.StreamBufferBytes / 2
	one := lr.maxMsg + headerSlack
	if half-one >= 64<<10 {
		return half, int(half - one), n
	}
	return max(half, one), 0, 1
}

// page reads up to n messages of the thread from sequence from. It first
// takes the page's reservation from the server's budget, waiting at most
// until wctx ends (then errNoBudget); it keeps the bytes the page holds
// (lr.hold) and gives the rest back. It returns the messages and how many
// more the thread had after them. Read errors are returned as they are
// (callers log them and answer without their details: they name
// internal subjects).
func (lr *logReader) page(ctx, wctx context.Context, from uint64, n int) ([]*jetstream.RawStreamMsg, uint64, error) {
	reserve, maxBytes, batch := lr.plan(n)
	if err := lr.hold.acquire(wctx, reserve); err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, errNoBudget
	}
	msgs, pending, err := directget.Batch(ctx, lr.js, lr.stream, lr.subject, from, batch, maxBytes)
	if err == nil {
		err = lr.open(ctx, msgs)
	}
	var size int64
	for _, m := range msgs {
		size += msgSize(m)
	}
	if size < reserve {
		lr.hold.give(reserve - size)
	} else {
		lr.hold.force(size - reserve)
	}
	if err != nil {
		return nil, 0, err
	}
	return msgs, pending, nil
}

// open opens the sealed payloads of msgs in place with the thread's key
// (threadkey). One whose key is gone (erased, or a redaction's retired
// key without a table entry) keeps its sealed bytes and is sent as
// undecodable; an error reading the key is returned (the read fails and
// the reader retries or resumes).
func (lr *logReader) open(ctx context.Context, msgs []*jetstream.RawStreamMsg) error {
	for _, m := range msgs {
		data, err := lr.pc.Keys().OpenStored(ctx, m.Data)
		if err != nil {
			return err
		}
		m.Data = data
	}
	return nil
}

// last reads the thread's last message (nil when it has none), taking one
// message's bytes from the budget while it does (waiting at most until
// wctx ends, then errNoBudget). The message is not kept: its bytes are
// given back before last returns.
func (lr *logReader) last(ctx, wctx context.Context) (*jetstream.RawStreamMsg, error) {
	reserve := lr.maxMsg + headerSlack
	if err := lr.hold.acquire(wctx, reserve); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errNoBudget
	}
	defer lr.hold.give(reserve)
	return directget.Last(ctx, lr.js, lr.stream, lr.subject)
}

// msgSize is the bytes a read message holds: data and headers.
func msgSize(m *jetstream.RawStreamMsg) int64 {
	n := int64(len(m.Data) + len(m.Subject))
	for k, vs := range m.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

// tailNotifier announces new events of a thread once a stream has caught
// up with its log: a headers-only ordered consumer (no event bodies cross
// the connection, at most 64 announcements are pulled ahead) whose
// goroutine records the highest sequence announced and wakes the stream.
// The stream then reads the events from the log itself, within its
// budget. A slow stream therefore never makes anything queue: it reads the
// log when it is ready to write.
type tailNotifier struct {
	seen atomic.Uint64
	// wake has room for one signal; more signals coalesce.
	wake chan struct{}
	// done is closed when the notifier stopped; err says why.
	done chan struct{}
	it   jetstream.MessagesContext
	mu   sync.Mutex
	err  error
}

// startTail starts a notifier of the events of lr's thread from sequence
// from on. Stop it with stop.
func (lr *logReader) startTail(ctx context.Context, from uint64) (*tailNotifier, error) {
	cons, err := lr.js.OrderedConsumer(ctx, lr.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{lr.subject}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: from, HeadersOnly: true, InactiveThreshold: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(64))
	if err != nil {
		return nil, err
	}
	n := &tailNotifier{wake: make(chan struct{}, 1), done: make(chan struct{}), it: it}
	go func() {
		defer close(n.done)
		for {
			m, err := it.Next()
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgIteratorClosed) || lr.js.Conn().IsClosed() {
					n.mu.Lock()
					n.err = err
					n.mu.Unlock()
				}
				return
			}
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if md.Sequence.Stream > n.seen.Load() {
				n.seen.Store(md.Sequence.Stream)
			}
			select {
			case n.wake <- struct{}{}:
			default:
			}
		}
	}()
	return n, nil
}

// stop ends the notifier and waits for its goroutine.
func (n *tailNotifier) stop() {
	n.it.Stop()
	<-n.done
}

// failure is why the notifier stopped on its own (nil after stop).
func (n *tailNotifier) failure() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// deltaQueue is how many live deltas a stream queues; more are dropped
// (deltas are best effort).
const deltaQueue = 64

// subscribeDeltas subscribes to the live deltas of tenant/thread. The
// callback never blocks: a delta that finds the queue full is dropped, and
// the subscription's pending limits (deltaQueue messages, 1 MiB) bound what
// nats.go may hold for it, so a slow stream can never make the shared
// connection a slow consumer.
func (s *Server) subscribeDeltas(tenant, id string) (*nats.Subscription, <-chan *nats.Msg, error) {
	subj, err := s.c.For(tenant, id).Subjects().Delta(tenant, id)
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan *nats.Msg, deltaQueue)
	sub, err := s.c.JetStream().Conn().Subscribe(subj, func(m *nats.Msg) {
		select {
		case ch <- m:
		default:
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("subscribing to the deltas of thread %s: %w", id, err)
	}
	if err := sub.SetPendingLimits(deltaQueue, 1<<20); err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, err
	}
	return sub, ch, nil
}

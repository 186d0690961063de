package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
)

// WatchOptions configure [Client.Watch]. The zero value watches durable
// events from the thread's first event, without deltas.
type WatchOptions struct {
	// After is the last sequence the reader already has: delivery starts
	// with the first event of the thread after it (0 = from the start).
	// A reader that resumes after a disconnect passes the Seq of the last
	// event it received and gets no gap and no duplicate.
	After uint64
	// Deltas also delivers live token deltas (events.Delta) published while
	// the agent generates. Deltas are best effort: dropped when the reader
	// is slow, never replayed.
	Deltas bool
	// Buffer is the channel capacity. Default 256.
	Buffer int
	// MaxBytes bounds the stored events the watch fetches ahead of its
	// reader (the ordered consumer's pull buffer, jetstream.PullMaxBytes):
	// a reader that does not read costs at most MaxBytes there, plus what
	// C holds (Buffer updates). Default, and minimum, twice the server's
	// max payload (2 MiB with the NATS default), so that any one event fits.
	MaxBytes int
}

// Update is one item of a watch: a durable event or a live delta.
type Update struct {
	// Event is set for durable events. Event.Payload is nil and Err set
	// when the stored bytes do not decode.
	Event *events.Stored
	// Delta is set for live deltas.
	Delta *events.Delta
	// Err is a decode error for this event (the watch goes on).
	Err error
}

// Watcher is a live subscription to a thread. Updates are delivered in
// stream order on C; durable events are never dropped (a slow reader slows
// only its own ordered consumer, never the writers), deltas are dropped
// when C is full (counted by DroppedDeltas).
type Watcher struct {
	// C delivers updates. It is closed after Stop or when the watch fails;
	// then Err says why (nil after Stop).
	C <-chan Update

	c       chan Update
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	err     error
	closed  bool
	dropped atomic.Int64
}

// Stop ends the watch and waits for its goroutines. Buffered updates not
// yet read are discarded. Safe to call more than once.
func (w *Watcher) Stop() {
	w.cancel()
	<-w.done
}

// Done is closed when the watch has ended.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Err returns why the watch ended: nil if it was stopped (Stop or its
// context) or still runs; an error wrapping nats.ErrConnectionClosed when
// its connection closed; the consumer's error otherwise.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// DroppedDeltas counts deltas dropped because the reader was slow.
func (w *Watcher) DroppedDeltas() int64 { return w.dropped.Load() }

// Watch follows tenant/thread live: every durable event after opts.After
// in order, then new ones as they are appended, through an ordered
// consumer (re-created by nats.go on gaps, so delivery has no gap and no
// duplicate), and optionally live deltas. The watch runs until Stop or ctx
// ends. Errors: *events.IDError for bad ids; consumer creation errors.
func (c *Client) Watch(ctx context.Context, tenant, thread string, opts WatchOptions) (*Watcher, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Watch(ctx, tenant, thread, opts)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	subject, err := c.subjects.Thread(tenant, thread)
	if err != nil {
		return nil, err
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 256
	}
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan Update, opts.Buffer)
	w := &Watcher{C: ch, c: ch, cancel: cancel, done: make(chan struct{})}

	var deltaSub *nats.Subscription
	if opts.Deltas {
		dsubj, _ := c.subjects.Delta(tenant, thread)
		deltaSub, err = c.nc.Subscribe(dsubj, func(m *nats.Msg) {
			var d events.Delta
			if json.Unmarshal(m.Data, &d) != nil {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.closed {
				return
			}
			select {
			case ch <- Update{Delta: &d}:
			default:
				w.dropped.Add(1)
			}
		})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("client: watch deltas of %s: %w", subject, err)
		}
	}
	stopDeltas := func() {
		if deltaSub != nil {
			_ = deltaSub.Unsubscribe()
		}
	}
	var source func() // delivers the stored events until ctx ends or the watch fails
	if c.caller != nil {
		if source, err = c.pollSource(ctx, w, subject, opts.After); err != nil {
			stopDeltas()
			cancel()
			return nil, err
		}
	} else if source, err = c.consumerSource(ctx, w, subject, opts); err != nil {
		stopDeltas()
		cancel()
		return nil, err
	}
	go func() {
		defer close(w.done)
		defer func() {
			w.mu.Lock()
			w.closed = true
			close(ch)
			w.mu.Unlock()
		}()
		defer stopDeltas()
		source()
	}()
	return w, nil
}

// consumerSource returns the source of a watch that reads through an
// ordered consumer: no gap, no duplicate (nats.go re-creates the consumer
// on a gap).
func (c *Client) consumerSource(ctx context.Context, w *Watcher, subject string, opts WatchOptions) (func(), error) {
	// The server removes the ordered consumer 5 s after its reader stops.
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy,
		InactiveThreshold: 5 * time.Second}
	if opts.After > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = opts.After + 1
	}
	cons, err := c.js.OrderedConsumer(ctx, c.stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("client: watch %s: %w", subject, err)
	}
	return func() {
		maxBytes := max(opts.MaxBytes, 2*int(c.nc.MaxPayload()), 2<<20)
		it, err := cons.Messages(jetstream.PullMaxBytes(maxBytes))
		if err != nil {
			w.setErr(err)
			return
		}
		go func() { <-ctx.Done(); it.Stop() }()
		for {
			m, err := it.Next()
			if err != nil {
				// Only Stop (ctx) ends a watch without an error. nats.go
				// closes the iterator itself when the connection closes,
				// and then Next may return ErrMsgIteratorClosed rather
				// than the connection error.
				if ctx.Err() == nil {
					if errors.Is(err, jetstream.ErrMsgIteratorClosed) && c.nc.IsClosed() {
						err = fmt.Errorf("%w (%w)", nats.ErrConnectionClosed, err)
					}
					w.setErr(fmt.Errorf("client: watch %s: %w", subject, err))
				}
				return
			}
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if !c.deliverStored(ctx, w, md.Sequence.Stream, md.Timestamp, m.Data()) {
				return
			}
		}
	}, nil
}

// pollWait bounds how long a polling watch waits for a live message
// before it reads the thread again (a lost wake-up costs at most this).
const pollWait = 2 * time.Second

// pollSource returns the source of a tenant-scoped client's watch, which
// may create no consumer: it reads the thread's events after the last it
// delivered through the tenant service, and when it has caught up waits
// for a live message on the thread's subject (its NATS user may subscribe
// to its threads; the subscription is made before the first read, so no
// append is missed) or pollWait. A failed read is retried with backoff
// (up to pollWait) until ctx ends. No gap and no duplicate: it reads by
// sequence.
func (c *Client) pollSource(ctx context.Context, w *Watcher, subject string, after uint64) (func(), error) {
	wake := make(chan struct{}, 1)
	sub, err := c.nc.Subscribe(subject, func(*nats.Msg) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, fmt.Errorf("client: watch %s: %w", subject, err)
	}
	return func() {
		defer func() { _ = sub.Unsubscribe() }()
		next, backoff := after+1, c.cfg.RetryBackoff
		for {
			msgs, pending, err := c.log.batch(ctx, subject, next, pageSize, pageBytes)
			if ctx.Err() != nil {
				return
			}
			wait := pollWait
			switch {
			case err != nil:
				c.cfg.Logger.Warn("watch: read failed; retrying", "subject", subject, "from", next, "err", err)
				wait, backoff = backoff, min(2*backoff, pollWait)
			case len(msgs) > 0:
				backoff = c.cfg.RetryBackoff
				for _, m := range msgs {
					if !c.deliverStored(ctx, w, m.Sequence, m.Time, m.Data) {
						return
					}
				}
				next = msgs[len(msgs)-1].Sequence + 1
				if pending > 0 {
					continue
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-wake:
			case <-time.After(wait):
			}
		}
	}, nil
}

// deliverStored opens and decodes one stored event and sends it on w's
// channel; false when ctx ended first.
func (c *Client) deliverStored(ctx context.Context, w *Watcher, seq uint64, at time.Time, raw []byte) bool {
	data, oerr := c.keys.OpenStored(ctx, raw)
	if oerr != nil {
		data = raw // the key could not be read: delivered undecodable, with why
	}
	ev, derr := events.Unmarshal(data)
	if oerr != nil && derr != nil {
		derr = fmt.Errorf("%w (its key could not be read: %v)", derr, oerr)
	}
	select {
	case w.c <- Update{Event: &events.Stored{Event: ev, Seq: seq, StoredAt: at}, Err: derr}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *Watcher) setErr(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

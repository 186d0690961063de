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

	// The server removes the ordered consumer 5 s after its reader stops.
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy,
		InactiveThreshold: 5 * time.Second}
	if opts.After > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = opts.After + 1
	}
	cons, err := c.js.OrderedConsumer(ctx, c.stream, cfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("client: watch %s: %w", subject, err)
	}
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
	go func() {
		defer close(w.done)
		defer func() {
			w.mu.Lock()
			w.closed = true
			close(ch)
			w.mu.Unlock()
		}()
		defer func() {
			if deltaSub != nil {
				_ = deltaSub.Unsubscribe()
			}
		}()
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
			data, oerr := c.keys.OpenStored(ctx, m.Data())
			if oerr != nil {
				data = m.Data() // the key could not be read: delivered undecodable, with why
			}
			ev, derr := events.Unmarshal(data)
			if oerr != nil && derr != nil {
				derr = fmt.Errorf("%w (its key could not be read: %v)", derr, oerr)
			}
			st := &events.Stored{Event: ev, Seq: md.Sequence.Stream, StoredAt: md.Timestamp}
			select {
			case ch <- Update{Event: st, Err: derr}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return w, nil
}

func (w *Watcher) setErr(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

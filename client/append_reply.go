package client

// This file receives publish acks on inboxes of the client's own, straight
// from the connection's reader.

import (
	"context"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// maxReplyInboxes bounds the inboxes a client keeps: appends in flight
// beyond that many wait for their acks through nats.go's request.
const maxReplyInboxes = 64

// replyInboxLen is the capacity of an inbox's channel: room for the acks
// of earlier attempts that were given up (which are dropped when read)
// besides the one awaited.
const replyInboxLen = 8

// replyInbox is where one append at a time waits for its publish ack: a
// subscription of the client's connection to "<inbox>.*" (nc.NewInbox: the
// connection's inbox prefix, which a tenant-scoped user may subscribe to)
// that nats.go delivers to ch from the connection's reader goroutine. An
// ack so reaches the waiting append directly, where nats.go's request
// passes it through the goroutine of its response subscription first: one
// goroutine wake-up less per append, and no per-request channel, token or
// map entry.
type replyInbox struct {
	sub    *nats.Subscription
	ch     chan *nats.Msg
	prefix string // "<inbox>."
	// n numbers the requests made on the inbox: request n's reply
	// subject is prefix+n, so an ack of an earlier request (an attempt
	// given up on its deadline) is told apart and dropped.
	n uint64
	// subClosed is closed when the subscription closes: when the
	// connection closes (nats.go closes no channel of a channel
	// subscription; it calls the subscription's closed handler).
	subClosed <-chan struct{}
}

// replyInboxes are a client's idle inboxes. Safe for concurrent use.
type replyInboxes struct {
	mu     sync.Mutex
	idle   []*replyInbox
	made   int // inboxes subscribed and not yet unsubscribed
	closed bool
}

// take returns an idle inbox, or a new one, or nil when the client has
// maxReplyInboxes in use, is closed, or cannot subscribe.
func (rs *replyInboxes) take(nc *nats.Conn) *replyInbox {
	rs.mu.Lock()
	if n := len(rs.idle); n > 0 {
		r := rs.idle[n-1]
		rs.idle = rs.idle[:n-1]
		rs.mu.Unlock()
		return r
	}
	if rs.closed || rs.made >= maxReplyInboxes {
		rs.mu.Unlock()
		return nil
	}
	rs.made++
	rs.mu.Unlock()
	closed := make(chan struct{})
	r := &replyInbox{ch: make(chan *nats.Msg, replyInboxLen), subClosed: closed}
	inbox := nc.NewInbox()
	sub, err := nc.ChanSubscribe(inbox+".*", r.ch)
	if err != nil {
		rs.mu.Lock()
		rs.made--
		rs.mu.Unlock()
		return nil
	}
	// nats.go calls a channel subscription's closed handler when the
	// connection closes (and when it is unsubscribed), once.
	var once sync.Once
	sub.SetClosedHandler(func(string) { once.Do(func() { close(closed) }) })
	r.sub, r.prefix = sub, inbox+"."
	return r
}

// give returns r to the idle inboxes, or unsubscribes it when the client
// was closed.
func (rs *replyInboxes) give(r *replyInbox) {
	rs.mu.Lock()
	if !rs.closed {
		rs.idle = append(rs.idle, r)
		rs.mu.Unlock()
		return
	}
	rs.made--
	rs.mu.Unlock()
	_ = r.sub.Unsubscribe()
}

// close unsubscribes the idle inboxes; those in use are unsubscribed when
// given back.
func (rs *replyInboxes) close() {
	rs.mu.Lock()
	idle := rs.idle
	rs.idle, rs.closed = nil, true
	rs.made -= len(idle)
	rs.mu.Unlock()
	for _, r := range idle {
		_ = r.sub.Unsubscribe()
	}
}

// request publishes m with a reply subject of r and waits for the reply
// until ctx ends, as nats.Conn.RequestMsgWithContext does: a no-responders
// status answer is nats.ErrNoResponders, a connection closed while waiting
// nats.ErrConnectionClosed (at once). m.Reply is overwritten.
func (r *replyInbox) request(ctx context.Context, nc *nats.Conn, m *nats.Msg) (*nats.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.n++
	reply := r.prefix + strconv.FormatUint(r.n, 10)
	m.Reply = reply
	if err := nc.PublishMsg(m); err != nil {
		return nil, err
	}
	for {
		select {
		case resp := <-r.ch:
			if resp.Subject != reply {
				continue // the ack of an earlier attempt, given up
			}
			if len(resp.Data) == 0 && resp.Header.Get("Status") == "503" {
				return nil, nats.ErrNoResponders
			}
			return resp, nil
		case <-r.subClosed:
			if nc.IsClosed() {
				return nil, nats.ErrConnectionClosed
			}
			return nil, nats.ErrBadSubscription
		case <-ctx.Done():
			if nc.IsClosed() {
				return nil, nats.ErrConnectionClosed
			}
			return nil, ctx.Err()
		}
	}
}

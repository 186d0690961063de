package client

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// An answer that comes after its request was given up is not taken for
// the answer of the next request on the same inbox.
func TestReplyInboxDropsTheAnswerOfAnAbandonedRequest(t *testing.T) {
	s := natstest.Run(t)
	release := make(chan struct{})
	var n atomic.Int64
	_, err := s.NC.Subscribe("svc", func(m *nats.Msg) {
		i := n.Add(1)
		go func() { // the first answer only once the test lets it go
			if i == 1 {
				<-release
			}
			_ = m.Respond([]byte(strconv.FormatInt(i, 10)))
		}()
	})
	require.NoError(t, err)
	require.NoError(t, s.NC.Flush())

	var rs replyInboxes
	r := rs.take(s.NC)
	require.NotNil(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = r.request(ctx, s.NC, &nats.Msg{Subject: "svc"})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	// The late answer "1" reaches the inbox before or while the second
	// request waits; the second must get "2".
	require.Eventually(t, func() bool { return len(r.ch) == 1 }, 10*time.Second, time.Millisecond)
	resp, err := r.request(context.Background(), s.NC, &nats.Msg{Subject: "svc"})
	require.NoError(t, err)
	require.Equal(t, "2", string(resp.Data))
	rs.give(r)
	rs.close()
}

func TestReplyInboxAnswersNoResponders(t *testing.T) {
	s := natstest.Run(t)
	var rs replyInboxes
	defer rs.close()
	r := rs.take(s.NC)
	require.NotNil(t, r)
	defer rs.give(r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.request(ctx, s.NC, &nats.Msg{Subject: "nobody.listens"})
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// A client keeps at most maxReplyInboxes; beyond that take answers nil
// (the append waits through nats.go's request), and a closed client's
// inboxes are unsubscribed, idle ones at once and those in use when
// given back.
func TestReplyInboxesAreBoundedAndUnsubscribedOnClose(t *testing.T) {
	s := natstest.Run(t)
	before := s.NC.NumSubscriptions()
	var rs replyInboxes
	var taken []*replyInbox
	for range maxReplyInboxes {
		r := rs.take(s.NC)
		require.NotNil(t, r)
		taken = append(taken, r)
	}
	require.Nil(t, rs.take(s.NC))
	require.Equal(t, before+maxReplyInboxes, s.NC.NumSubscriptions())
	for _, r := range taken[:10] {
		rs.give(r)
	}
	require.Same(t, taken[9], rs.take(s.NC)) // an idle one is reused
	rs.give(taken[9])
	rs.close()
	require.Equal(t, before+maxReplyInboxes-10, s.NC.NumSubscriptions())
	for _, r := range taken[10:] {
		rs.give(r)
	}
	require.Equal(t, before, s.NC.NumSubscriptions())
	require.Nil(t, rs.take(s.NC))
}

// Appends wait for their acks on the client's inboxes, and Close leaves
// none of them subscribed on the connection it does not own.
func TestClientCloseUnsubscribesItsReplyInboxes(t *testing.T) {
	s := natstest.Run(t)
	ctx := context.Background()
	c, err := New(ctx, s.NC, Config{Provision: true, Resources: provision.Config{}, NoQuotas: true})
	require.NoError(t, err)
	before := s.NC.NumSubscriptions()
	_, thread, v, err := c.CreateThread(ctx, CreateOptions{})
	require.NoError(t, err)
	res, err := c.Append(ctx, events.DefaultTenant, thread, []events.Event{{Payload: events.UserMessage{Content: events.Text("hi")}}}, ExpectVersion(v))
	require.NoError(t, err)
	require.Greater(t, res.Version, v)
	c.replies.mu.Lock()
	idle := len(c.replies.idle)
	c.replies.mu.Unlock()
	require.Equal(t, 1, idle)
	require.Equal(t, before+1, s.NC.NumSubscriptions())
	c.Close()
	require.Equal(t, before, s.NC.NumSubscriptions())
}

// An append waiting on an inbox fails with nats.ErrConnectionClosed as
// soon as the connection closes, as nats.go's request does, not when its
// deadline passes.
func TestReplyInboxFailsAtOnceWhenTheConnectionCloses(t *testing.T) {
	s := natstest.Run(t)
	_, err := s.NC.Subscribe("silent", func(*nats.Msg) {}) // never answers
	require.NoError(t, err)
	require.NoError(t, s.NC.Flush())
	nc, err := s.Connect()
	require.NoError(t, err)
	var rs replyInboxes
	defer rs.close()
	r := rs.take(nc)
	require.NotNil(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.request(ctx, nc, &nats.Msg{Subject: "silent"})
		done <- err
	}()
	// The request is out (the subscriber counts it) before the close.
	require.Eventually(t, func() bool {
		return nc.Stats().OutMsgs >= 1
	}, 10*time.Second, time.Millisecond)
	nc.Close()
	select {
	case err := <-done:
		require.ErrorIs(t, err, nats.ErrConnectionClosed)
	case <-time.After(30 * time.Second):
		t.Fatal("the request still waits 30 s after its connection closed")
	}
}

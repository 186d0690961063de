package projector_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// indexVersion is the version the thread's index entry holds (0 when it
// has none).
func (e *env) indexVersion(t testing.TB, tenant, thread string) uint64 {
	t.Helper()
	entry, err := e.res.Index.Get(context.Background(), snapstore.IndexKey(tenant, thread))
	if err != nil {
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
		return 0
	}
	sum, err := e.summary(t, tenant, thread, entry)
	require.NoError(t, err)
	return sum.Version
}

// A thread that gets an event every few milliseconds is a projection step
// per event, but its index entry is written about once per IndexInterval:
// at its first step, then when the interval has passed. The last version
// reaches the index within the interval of the last step, and every
// trigger is acked once it does.
func TestIndexWritesAreCoalesced(t *testing.T) {
	e := newEnv(t)
	var steps atomic.Int64
	const interval = 50 * time.Millisecond
	p, _ := e.startProjector(t, projector.Config{IndexInterval: interval, OnStep: func(projector.Step) { steps.Add(1) }})
	c := &clock{t: time.Unix(1700000000, 0)}
	v := e.publish(t, c.ev("acme", "busy", events.ThreadCreated{Replies: events.RepliesOff}))
	e.waitVersion(t, "acme", "busy", v)
	e.waitIndex(t, "acme", "busy", v) // the first step indexes at once
	before := p.KVWritten().Index
	start := time.Now()
	const n = 40
	for i := range n {
		v = e.publishAfter(t, c.ev("acme", "busy", events.UserMessage{Content: events.Text(fmt.Sprint("message ", i))}), v)
		e.waitVersion(t, "acme", "busy", v) // one step per event
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	e.waitIndex(t, "acme", "busy", v)
	e.waitConsumerIdle(t, "convlog-projector")
	writes := p.KVWritten().Index - before
	require.GreaterOrEqual(t, steps.Load(), int64(n), "each event was a step of its own")
	// One write per interval the steps spanned, plus the last flush.
	most := uint64(took/interval) + 2
	require.LessOrEqual(t, writes, most, "%d index writes for %d steps over %s (interval %s)", writes, n, took.Round(time.Millisecond), interval)
	// And not only at the end: the steps after each interval wrote it.
	require.GreaterOrEqual(t, writes, uint64(3), "%d index writes over %s (interval %s)", writes, took.Round(time.Millisecond), interval)
	t.Logf("%d steps over %s: %d index writes", n, took.Round(time.Millisecond), writes)
}

// A projector that dies while it holds triggers whose index write is
// pending leaves them unacked: they are delivered again, and the instance
// that gets them writes the index entry, so the index never stays behind
// the snapshot.
func TestHeldTriggersSurviveACrash(t *testing.T) {
	e := newEnv(t)
	nc, err := nats.Connect(e.srv.ClientURL())
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	a, err := projector.New(js, projector.Config{IndexInterval: 2 * time.Second, AckWait: 4 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	<-a.Ready()

	c := &clock{t: time.Unix(1700000000, 0)}
	first := e.publish(t, c.ev("acme", "crashy", events.ThreadCreated{Replies: events.RepliesOff}))
	e.waitIndex(t, "acme", "crashy", first)
	v := first
	for i := range 5 {
		v = e.publishAfter(t, c.ev("acme", "crashy", events.UserMessage{Content: events.Text(fmt.Sprint("message ", i))}), v)
	}
	e.waitVersion(t, "acme", "crashy", v)
	require.Less(t, e.indexVersion(t, "acme", "crashy"), v, "the index entry is pending (else this test proves nothing)")

	// The crash: the connection goes away without an ack or a nak.
	nc.Close()
	cancel()
	<-done
	require.Less(t, e.indexVersion(t, "acme", "crashy"), v)

	// Another instance gets the held triggers again after AckWait and
	// writes the index entry.
	e.start(t, projector.Config{AckWait: 4 * time.Second})
	e.waitIndex(t, "acme", "crashy", v)
	e.waitConsumerIdle(t, "convlog-projector")
}

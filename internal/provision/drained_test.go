package provision_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// WaitConsumerDrained must not report a consumer drained while a message
// stored before the call is still to be delivered. The server counts a
// stored message in the consumer's NumPending only once its signal loop
// gets to it, after the publish is acknowledged; the test publishes to a
// stream whose consumer nobody pulls and checks at once, many times.
func TestWaitConsumerDrainedWaitsForWhatWasJustStored(t *testing.T) {
	srv := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	cons, err := srv.JS.CreateOrUpdateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	for i := range 300 {
		_, err := srv.JS.Publish(ctx, "s.x", nil)
		require.NoError(t, err)
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Millisecond)
		err = provision.WaitConsumerDrained(wctx, srv.JS, "S", "d")
		wcancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "round %d: drained, with a message never delivered", i)
		msgs, err := cons.Fetch(1)
		require.NoError(t, err)
		for m := range msgs.Messages() {
			require.NoError(t, m.DoubleAck(ctx))
		}
		require.NoError(t, msgs.Error())
		require.NoError(t, provision.WaitConsumerDrained(ctx, srv.JS, "S", "d"))
	}
}

// A filtered consumer is drained when nothing on its filter is left,
// whatever is stored on other subjects after its last delivery.
func TestWaitConsumerDrainedIgnoresSubjectsOutsideTheFilter(t *testing.T) {
	srv := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	cons, err := srv.JS.CreateOrUpdateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubjects: []string{"s.a", "s.c"}})
	require.NoError(t, err)
	for _, subj := range []string{"s.a", "s.b", "s.c", "s.b"} {
		_, err := srv.JS.Publish(ctx, subj, nil)
		require.NoError(t, err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer wcancel()
	require.ErrorIs(t, provision.WaitConsumerDrained(wctx, srv.JS, "S", "d"), context.DeadlineExceeded, "s.a and s.c are not delivered")
	msgs, err := cons.Fetch(2)
	require.NoError(t, err)
	n := 0
	for m := range msgs.Messages() {
		require.NoError(t, m.DoubleAck(ctx))
		n++
	}
	require.NoError(t, msgs.Error())
	require.Equal(t, 2, n)
	require.NoError(t, provision.WaitConsumerDrained(ctx, srv.JS, "S", "d"))
}

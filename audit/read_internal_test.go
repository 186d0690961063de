package audit

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
)

// A read whose consumer never delivers (its pull requests lost, as with a
// consumer on a node that restarted) goes on with a new consumer and reads
// every message once, in order.
func TestReadOrderedReplacesAConsumerThatStopsDelivering(t *testing.T) {
	ns := natstest.Run(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	_, err := ns.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	const n = 20
	for range n {
		_, err := ns.JS.Publish(ctx, "s.x", []byte("m"))
		require.NoError(t, err)
	}

	nc, d := natstest.ConnectStalling(t, ns.ClientURL(), "$JS.API.CONSUMER.MSG.NEXT.S.")
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var seqs []uint64
	err = readOrdered(ctx, js, "S", "s.>", 1, 0, func(_ jetstream.Msg, md *jetstream.MsgMetadata) error {
		seqs = append(seqs, md.Sequence.Stream)
		return nil
	})
	require.NoError(t, err)
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	require.Equal(t, want, seqs, "every message once, in stream order")
	require.Positive(t, d.Dropped.Load(), "the first consumer's pull requests were lost")
}

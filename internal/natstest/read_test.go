package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
)

// ReadOrdered reads up to the sequence asked for and leaves no consumer
// on the server.
func TestReadOrderedLeavesNoConsumer(t *testing.T) {
	s := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	var last uint64
	for range 10 {
		ack, err := s.JS.Publish(ctx, "s.a", []byte("x"))
		require.NoError(t, err)
		last = ack.Sequence
		_, err = s.JS.Publish(ctx, "s.b", []byte("y"))
		require.NoError(t, err)
	}
	for range 3 {
		n, err := natstest.ReadOrdered(ctx, s.JS, "S", "s.a", last)
		require.NoError(t, err)
		require.Equal(t, 10, n)
	}
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Consumers, "the reads' consumers are deleted")
}

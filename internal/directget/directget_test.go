package directget_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/natstest"
)

func TestBatchNextLastAgainstAServer(t *testing.T) {
	s := natstest.Run(t)
	ctx := context.Background()
	_, err := s.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: true})
	require.NoError(t, err)
	pub := func(subj, data string) uint64 {
		ack, err := s.JS.Publish(ctx, subj, []byte(data))
		require.NoError(t, err)
		return ack.Sequence
	}
	var aSeqs []uint64
	for i := range 10 {
		aSeqs = append(aSeqs, pub("s.a", fmt.Sprintf("a%d", i)))
		pub("s.b", strings.Repeat("b", 100))
	}

	// Batch: from a sequence, only the subject's messages, in order, with
	// the pending count after the page.
	msgs, pending, err := directget.Batch(ctx, s.JS, "S", "s.a", aSeqs[2], 3, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	for i, m := range msgs {
		require.Equal(t, aSeqs[2+i], m.Sequence)
		require.Equal(t, fmt.Sprintf("a%d", 2+i), string(m.Data))
		require.Equal(t, "s.a", m.Subject)
		require.False(t, m.Time.IsZero())
	}
	require.EqualValues(t, 5, pending)

	// max_bytes stops the page early; pending says more are there.
	msgs, pending, err = directget.Batch(ctx, s.JS, "S", "s.b", 1, 100, 250)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	require.Less(t, len(msgs), 10)
	require.EqualValues(t, 10-len(msgs), pending)

	// Nothing from past the end: empty, not an error.
	msgs, pending, err = directget.Batch(ctx, s.JS, "S", "s.a", aSeqs[9]+1, 10, 0)
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.Zero(t, pending)
	_, _, err = directget.Batch(ctx, s.JS, "S", "s.a", 1, 0, 0)
	require.Error(t, err)

	// Next and Last.
	m, err := directget.Next(ctx, s.JS, "S", "s.a", aSeqs[4]+1)
	require.NoError(t, err)
	require.Equal(t, aSeqs[5], m.Sequence)
	m, err = directget.Last(ctx, s.JS, "S", "s.a")
	require.NoError(t, err)
	require.Equal(t, aSeqs[9], m.Sequence)
	require.Equal(t, "a9", string(m.Data))
	m, err = directget.Next(ctx, s.JS, "S", "s.a", aSeqs[9]+1)
	require.NoError(t, err)
	require.Nil(t, m)
	m, err = directget.Last(ctx, s.JS, "S", "s.none")
	require.NoError(t, err)
	require.Nil(t, m)

	// A stream that does not exist: an error naming the subject, not a hang.
	tctx, cancel := context.WithTimeout(ctx, 2e9)
	defer cancel()
	_, err = directget.Last(tctx, s.JS, "NOPE", "s.a")
	require.Error(t, err)
	require.Contains(t, err.Error(), "s.a")
}

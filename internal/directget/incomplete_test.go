package directget_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/natstest"
)

// reply is one reply of a fake batched direct get: a message of sequence
// seq after the message last (Nats-Last-Sequence), or, when seq is 0, the
// end-of-batch marker after last.
type reply struct {
	seq, last, pending uint64
}

// fakeBatch answers the batched direct gets of stream "S" (API prefix
// "FAKE.API") with replies, as nats-server would shape them, and returns
// a JetStream context that asks it.
func fakeBatch(t *testing.T, replies []reply) jetstream.JetStream {
	t.Helper()
	s := natstest.Run(t)
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	sub, err := s.NC.Subscribe("FAKE.API.DIRECT.GET.S", func(req *nats.Msg) {
		for _, r := range replies {
			h := nats.Header{}
			if r.seq == 0 {
				h.Set("Status", "204")
				h.Set("Description", "EOB")
			} else {
				h.Set(jetstream.StreamHeader, "S")
				h.Set(jetstream.SubjectHeader, "s.a")
				h.Set(jetstream.SequenceHeader, strconv.FormatUint(r.seq, 10))
				h.Set(jetstream.TimeStampHeaer, ts)
			}
			h.Set("Nats-Num-Pending", strconv.FormatUint(r.pending, 10))
			h.Set(jetstream.LastSequenceHeader, strconv.FormatUint(r.last, 10))
			m := &nats.Msg{Subject: req.Reply, Header: h}
			if r.seq != 0 {
				m.Data = []byte("data")
			}
			if err := s.NC.PublishMsg(m); err != nil {
				t.Error(err)
			}
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, s.NC.Flush())
	js, err := jetstream.NewWithAPIPrefix(s.NC, "FAKE.API")
	require.NoError(t, err)
	return js
}

// Batch tells a page that is whole (full, the subject's last, or ended at
// max bytes) from one that is not (the server cut it short with messages
// pending, or a reply of it was lost on the way): the latter is
// ErrIncomplete, with the messages before the gap.
func TestBatchTellsACutBatchFromAShortLastPage(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxBytes   int
		replies    []reply
		seqs       []uint64
		pending    uint64
		incomplete bool
	}{
		{name: "a full page with more pending is whole",
			replies: []reply{{1, 0, 5}, {2, 1, 4}, {3, 2, 3}, {4, 3, 2}, {0, 4, 2}}, seqs: []uint64{1, 2, 3, 4}, pending: 2},
		{name: "a short page with nothing pending is the last page",
			replies: []reply{{1, 0, 1}, {2, 1, 0}, {0, 2, 0}}, seqs: []uint64{1, 2}},
		{name: "a short page that reached max bytes is whole", maxBytes: 10,
			replies: []reply{{1, 0, 3}, {0, 1, 3}}, seqs: []uint64{1}, pending: 3},
		{name: "a short page with messages pending was cut by the server",
			replies: []reply{{1, 0, 4}, {2, 1, 3}, {0, 2, 3}}, seqs: []uint64{1, 2}, incomplete: true},
		{name: "a page missing a reply in the middle is incomplete",
			replies: []reply{{1, 0, 3}, {3, 2, 2}, {4, 3, 1}, {5, 4, 0}, {0, 5, 0}}, seqs: []uint64{1}, incomplete: true},
		{name: "a page missing its last replies is incomplete",
			replies: []reply{{1, 0, 3}, {2, 1, 2}, {0, 4, 0}}, seqs: []uint64{1, 2}, incomplete: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := fakeBatch(t, tc.replies)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			msgs, pending, err := directget.Batch(ctx, js, "S", "s.a", 1, 4, tc.maxBytes)
			var got []uint64
			for _, m := range msgs {
				got = append(got, m.Sequence)
			}
			require.Equal(t, tc.seqs, got)
			if tc.incomplete {
				require.ErrorIs(t, err, directget.ErrIncomplete)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.pending, pending)
		})
	}
}

package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/provision"
)

// A durable consumer whose buffer is bounded by bytes is bounded by
// messages too: with the one message taken not acked, the server has
// delivered at most about PullMaxMessages more (nats.go asks for more when
// half the buffer is taken), not a PullMaxBytes' worth of small messages.
// Each buffered message costs about 2 KiB in nats.go besides its bytes
// (projector's triggerOverhead), which a bound by bytes does not see.
func TestDurableBufferIsBoundedByMessagesAndBytes(t *testing.T) {
	e := newAppendEnv(t, provision.Config{})
	ctx := context.Background()
	subject := e.subject(t, "acme", "t1")
	for i := range 2000 {
		_, err := e.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: fmt.Appendf(nil, "m%d", i)})
		require.NoError(t, err)
	}
	<-e.js.PublishAsyncComplete()
	const maxMessages = 20
	d, err := client.ConsumeDurable(ctx, e.js, e.res.Stream, e.c.Subjects(), client.DurableConfig{
		Name: "bounded", MaxAckPending: 10_000, PullMaxMessages: maxMessages, PullMaxBytes: 1 << 20,
	})
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	_, err = d.Next()
	require.NoError(t, err)
	cons, err := e.js.Consumer(ctx, e.res.Stream, "bounded")
	require.NoError(t, err)
	var pending int
	for range 10 { // 500 ms: the server would deliver all 2,000 in far less
		time.Sleep(50 * time.Millisecond)
		info, err := cons.Info(ctx)
		require.NoError(t, err)
		pending = info.NumAckPending
		require.LessOrEqual(t, pending, 2*maxMessages+1, "messages delivered while one is held")
	}
	require.Positive(t, pending)
}

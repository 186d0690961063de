package natstest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// errCodeAtomicTooManyInflight is nats-server's JetStream error
// "atomic publish too many inflight" (errors.json).
const errCodeAtomicTooManyInflight = 10210

// FillAtomicBatches opens atomic batches on the stream that captures
// subject, each with its first message and no commit, until the server
// refuses a new one with 10210 (too many atomic batches in flight): from
// then on, every atomic batch publish to that stream is refused, as on a
// server whose batch slots concurrent writers hold. It returns how many
// batches it opened. The server abandons them once they see no message
// for its batch timeout (10 s by default), which frees the slots again.
func FillAtomicBatches(t testing.TB, nc *nats.Conn, subject string) int {
	t.Helper()
	for opened := 0; opened <= 10_000; opened++ {
		m := nats.NewMsg(subject)
		m.Data = []byte("held open")
		m.Header.Set(jetstreamext.BatchIDHeader, strings.TrimPrefix(nats.NewInbox(), nats.InboxPrefix))
		m.Header.Set(jetstreamext.BatchSeqHeader, "1")
		// The server acks a batch's first message with an empty reply once
		// it holds it, and answers an error when it refuses the batch.
		reply, err := nc.RequestMsg(m, 5*time.Second)
		require.NoError(t, err)
		if len(reply.Data) == 0 {
			continue
		}
		var answer struct {
			Error *struct {
				ErrCode int    `json:"err_code"`
				Desc    string `json:"description"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(reply.Data, &answer), "reply: %s", reply.Data)
		require.NotNil(t, answer.Error, "reply: %s", reply.Data)
		require.Equal(t, errCodeAtomicTooManyInflight, answer.Error.ErrCode,
			"batch %s refused with %s", strconv.Itoa(opened+1), answer.Error.Desc)
		return opened
	}
	t.Fatalf("the server took 10000 open atomic batches on %s without refusing one", subject)
	return 0
}

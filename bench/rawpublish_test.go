package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// answers returns a publisher that answers with errs in turn, then acks
// at sequence 7, and counts its calls in *calls.
func answers(calls *int, errs ...error) publisher {
	return func(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		*calls++
		if *calls <= len(errs) {
			return nil, errs[*calls-1]
		}
		return &jetstream.PubAck{Stream: "S", Sequence: 7}, nil
	}
}

func TestARawPublishAnsweredInFlightIsSentAgain(t *testing.T) {
	inFlight := fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: errCodeWrongLastSeqInFlight, Description: "wrong last sequence"})
	wrongSeq := fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence: 3"})
	ctx := context.Background()

	calls := 0
	ack, err := publishRaw(ctx, answers(&calls, inFlight, inFlight), &nats.Msg{})
	require.NoError(t, err)
	require.Equal(t, uint64(7), ack.Sequence)
	require.Equal(t, 3, calls, "sent again after each 10164")

	calls = 0
	_, err = publishRaw(ctx, answers(&calls, inFlight, inFlight, inFlight, inFlight, inFlight), &nats.Msg{})
	require.ErrorIs(t, err, inFlight, "10164 every time ends after the retries")
	require.Equal(t, rawInFlightRetries+1, calls)

	calls = 0
	_, err = publishRaw(ctx, answers(&calls, wrongSeq), &nats.Msg{})
	require.ErrorIs(t, err, wrongSeq, "a real conflict is not sent again")
	require.Equal(t, 1, calls)
}

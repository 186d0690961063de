package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errCodeWrongLastSeqInFlight is nats-server's answer to a publish with an
// expected last subject sequence while an earlier write to the subject is
// still being replicated (R>1): "wrong last sequence", without the
// sequence (10164). It stored nothing.
const errCodeWrongLastSeqInFlight = 10164

// rawInFlightRetries bounds how often a raw publish answered 10164 is sent
// again, as client.Append does (its inFlightRetries).
const rawInFlightRetries = 4

// publisher is jetstream.JetStream's PublishMsg.
type publisher func(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error)

// publishRaw publishes m with publish and, when a replicated stream
// answers 10164, sends it again after a random pause that doubles from
// 1 ms, at most rawInFlightRetries times, as client.Append does: the raw
// writers on the 3-node cluster would otherwise fail where the client
// goes on (the same message: the refused publish stored nothing).
func publishRaw(ctx context.Context, publish publisher, m *nats.Msg) (*jetstream.PubAck, error) {
	for attempt := 0; ; attempt++ {
		ack, err := publish(ctx, m)
		var apiErr *jetstream.APIError
		if err == nil || attempt >= rawInFlightRetries || !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeWrongLastSeqInFlight {
			return ack, err
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << (attempt + 1))))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

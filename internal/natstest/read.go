package natstest

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// ReadOrdered reads subject of stream through an ordered consumer (pulls
// of up to 1,000 messages) until it has the message at stream sequence
// upTo or later, and returns how many messages it got. Nothing is
// decoded: it is the limit a reader of the same events is measured
// against (the client's BenchmarkReplay, the bench's replay section).
// Errors are the consumer's (a ctx that ends, a failed pull).
func ReadOrdered(ctx context.Context, js jetstream.JetStream, stream, subject string, upTo uint64) (int, error) {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return n, err
		}
		n++
		md, err := m.Metadata()
		if err != nil {
			return n, err
		}
		if md.Sequence.Stream >= upTo {
			return n, nil
		}
	}
}

package natstest

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ReadOrdered reads subject of stream through an ordered consumer (pulls
// of up to 1,000 messages) until it has the message at stream sequence
// upTo or later, and returns how many messages it got. Nothing is
// decoded: it is the limit a reader of the same events is measured
// against (the client's BenchmarkReplay, the bench's replay section).
// Errors are the consumer's (a ctx that ends, a failed pull). The
// consumer is deleted before it returns, as the client deletes its read's
// consumer (nats.go's Stop leaves an ordered consumer on the server until
// its inactivity threshold, 5 minutes).
func ReadOrdered(ctx context.Context, js jetstream.JetStream, stream, subject string, upTo uint64) (int, error) {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return 0, err
	}
	defer func() {
		it.Stop()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, stream, cons.CachedInfo().Name) // best effort: it expires anyway
	}()
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

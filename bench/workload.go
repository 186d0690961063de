package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
)

// producer is written on the events the bench creates itself.
const producer = "convlog-bench"

// text returns n bytes of printable text; i varies the start so that
// consecutive messages differ.
func text(i, n int) string {
	const words = "the quick brown fox jumps over the lazy dog while an agent answers a user about a tool result "
	var b strings.Builder
	b.Grow(n + len(words))
	off := (i * 7) % len(words)
	b.WriteString(words[off:])
	for b.Len() < n {
		b.WriteString(words)
	}
	return b.String()[:n]
}

// message returns the i-th message payload of a synthetic thread: user and
// assistant messages alternate, each with size bytes of content.
func message(i, size int) events.Payload {
	if i%2 == 0 {
		return events.UserMessage{Content: events.Text(text(i, size))}
	}
	return events.AssistantMessage{Content: events.Text(text(i, size)), Agent: "demo", Model: "offline"}
}

// rawMsg is what a writer that bypasses client/ publishes for ev: the
// msgpack bytes and convlog's headers (type, schema version, Nats-Msg-Id
// = the event id). It fills ev's envelope fields the client would fill.
func rawMsg(subject string, ev events.Event) (*nats.Msg, error) {
	if ev.ID == "" {
		ev.ID = events.NewID()
	}
	if ev.Type == "" {
		ev.Type = ev.Payload.EventType()
	}
	if ev.SchemaVersion == 0 {
		ev.SchemaVersion = events.SchemaVersion
	}
	if ev.Producer == "" {
		ev.Producer = producer
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	data, err := events.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: subject, Data: data, Header: nats.Header{
		events.HeaderType:     {string(ev.Type)},
		events.HeaderSchema:   {schemaVersion},
		jetstream.MsgIDHeader: {ev.ID},
	}}, nil
}

var schemaVersion = strconv.Itoa(events.SchemaVersion)

// publishAsync publishes m asynchronously; when too many publishes await
// their acks it waits for them (up to a minute) instead of failing.
func publishAsync(ctx context.Context, js jetstream.JetStream, m *nats.Msg) error {
	_, err := publishAsyncF(ctx, js, m)
	return err
}

// publishAsyncF is publishAsync returning the publish's ack future.
func publishAsyncF(ctx context.Context, js jetstream.JetStream, m *nats.Msg) (jetstream.PubAckFuture, error) {
	for {
		f, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Second))
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, err
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return nil, err
		}
	}
}

package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// This file is a batched direct get (server 2.11+): one request returns the
// next messages of a subject from a sequence, then an end-of-batch marker.
// It is what jetstreamext.GetBatch (orbit.go v0.2.0) does, with one
// difference that matters on the projection path: the reply subscription
// gets a channel sized to the batch, where a plain synchronous subscription
// allocates (and zeroes) a 64k-slot channel, half a megabyte, per request.

// directGetRequest is the body of a batched direct get.
type directGetRequest struct {
	Seq      uint64 `json:"seq"`
	NextFor  string `json:"next_by_subj"`
	Batch    int    `json:"batch"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// directBatch returns up to batch messages of subject with sequence >= seq
// (stopping earlier after maxBytes), and how many more matching messages
// the stream held when it answered. ctx bounds the wait (5 s when it has
// no deadline).
func directBatch(ctx context.Context, js jetstream.JetStream, stream, subject string, seq uint64, batch, maxBytes int) ([]rawEvent, uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	nc := js.Conn()
	req, err := json.Marshal(directGetRequest{Seq: seq, NextFor: subject, Batch: batch, MaxBytes: maxBytes})
	if err != nil {
		return nil, 0, err
	}
	inbox := nc.NewRespInbox()
	// A channel subscription drops what does not fit: room for the whole
	// batch and the end marker.
	ch := make(chan *nats.Msg, batch+2)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(apiSubject(js, "DIRECT.GET."+stream), inbox, req); err != nil {
		return nil, 0, err
	}
	var out []rawEvent
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return out, 0, fmt.Errorf("direct get of %s from seq %d: %w", subject, seq, ctx.Err())
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "404":
				return out, 0, nil
			case "204": // end of batch
				np, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return out, np, nil
			default:
				return out, 0, fmt.Errorf("direct get of %s from seq %d: status %s %s", subject, seq, m.Header.Get("Status"), m.Header.Get("Description"))
			}
		}
		s, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return out, 0, fmt.Errorf("direct get of %s: bad sequence header %q", subject, m.Header.Get("Nats-Sequence"))
		}
		if m.Header.Get("Nats-Num-Pending") == "" {
			return out, 0, errors.New("direct get: the server does not support batched direct gets (needs 2.11+)")
		}
		ts, err := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
		if err != nil {
			return out, 0, fmt.Errorf("direct get of %s: bad time stamp header: %w", subject, err)
		}
		out = append(out, rawEvent{seq: s, time: ts, data: m.Data})
	}
}

// apiSubject prefixes a JetStream API subject as js is configured.
func apiSubject(js jetstream.JetStream, subj string) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "." + subj
	case o.Domain != "":
		return "$JS." + o.Domain + ".API." + subj
	}
	return "$JS.API." + subj
}

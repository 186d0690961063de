// Package directget reads messages of one subject of a JetStream stream
// with the direct get API (server 2.11+; the stream needs allow_direct):
// batched reads from a sequence, and the single next or last message of a
// subject. Replies of any stream replica may answer (on a replicated
// stream a follower can lag the leader: callers that need the newest
// acknowledged message must ask the leader).
//
// It is what jetstreamext.GetBatch (orbit.go v0.2.0) does for batches,
// with one difference that matters on hot read paths: the reply
// subscription gets a channel sized to the batch, where jetstreamext's
// synchronous subscription allocates (and zeroes) a 64k-slot channel, half
// a megabyte, per request.
//
// Every function is safe for concurrent use. Errors wrap the context's
// error on timeout; a status reply other than "no message" is an error
// naming the subject, the sequence and the server's description.
package directget

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

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 5 * time.Second

// request is the body of a direct get (JSApiMsgGetRequest).
type request struct {
	Seq      uint64 `json:"seq,omitempty"`
	NextFor  string `json:"next_by_subj,omitempty"`
	LastFor  string `json:"last_by_subj,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// Batch returns up to batch messages of subject with sequence >= from, in
// stream order (stopping earlier after maxBytes of data when maxBytes >
// 0), and how many more messages of subject the stream held when it
// answered (the server's Nats-Num-Pending). The page is read-isolated from
// writes: an atomic batch is in it whole or not at all. No message is not
// an error (an empty slice). The returned messages' Data and Header are
// owned by the caller.
//
// Cost note (nats-server 2.15): the server counts the pending messages for
// every batch, which for a start inside an older message block loads and
// walks that block; prefer [Last] or [Next] to learn whether anything is
// there at all.
func Batch(ctx context.Context, js jetstream.JetStream, stream, subject string, from uint64, batch, maxBytes int) ([]*jetstream.RawStreamMsg, uint64, error) {
	if batch < 1 {
		return nil, 0, fmt.Errorf("directget: batch must be at least 1, got %d", batch)
	}
	ctx, cancel := withDefault(ctx)
	defer cancel()
	nc := js.Conn()
	req, err := json.Marshal(request{Seq: max(from, 1), NextFor: subject, Batch: batch, MaxBytes: maxBytes})
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
	if err := nc.PublishRequest(APISubject(js, "DIRECT.GET."+stream), inbox, req); err != nil {
		return nil, 0, err
	}
	var out []*jetstream.RawStreamMsg
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return out, 0, fmt.Errorf("directget: %s from seq %d: %w", subject, from, ctx.Err())
		}
		if status := m.Header.Get("Status"); len(m.Data) == 0 && status != "" {
			switch status {
			case "404":
				return out, 0, nil
			case "204": // end of batch
				np, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return out, np, nil
			default:
				return out, 0, fmt.Errorf("directget: %s from seq %d: status %s %s", subject, from, status, m.Header.Get("Description"))
			}
		}
		if m.Header.Get("Nats-Num-Pending") == "" {
			return out, 0, errors.New("directget: the server does not support batched direct gets (needs 2.11+)")
		}
		rm, err := toRaw(m)
		if err != nil {
			return out, 0, fmt.Errorf("directget: %s from seq %d: %w", subject, from, err)
		}
		out = append(out, rm)
	}
}

// Next returns the first message of subject with sequence >= from, or nil
// when there is none. A single (not batched) get: the server computes no
// pending count.
func Next(ctx context.Context, js jetstream.JetStream, stream, subject string, from uint64) (*jetstream.RawStreamMsg, error) {
	return single(ctx, js, stream, request{Seq: max(from, 1), NextFor: subject}, subject)
}

// Last returns the last message of subject, or nil when it has none. The
// server answers from its per-subject index.
func Last(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	return single(ctx, js, stream, request{LastFor: subject}, subject)
}

func single(ctx context.Context, js jetstream.JetStream, stream string, r request, subject string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := withDefault(ctx)
	defer cancel()
	req, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	m, err := js.Conn().RequestWithContext(ctx, APISubject(js, "DIRECT.GET."+stream), req)
	if err != nil {
		return nil, fmt.Errorf("directget: %s: %w", subject, err)
	}
	if status := m.Header.Get("Status"); len(m.Data) == 0 && status != "" {
		if status == "404" {
			return nil, nil
		}
		return nil, fmt.Errorf("directget: %s: status %s %s", subject, status, m.Header.Get("Description"))
	}
	rm, err := toRaw(m)
	if err != nil {
		return nil, fmt.Errorf("directget: %s: %w", subject, err)
	}
	return rm, nil
}

// toRaw reads the direct get headers of m (Nats-Sequence,
// Nats-Time-Stamp, Nats-Subject; source: the JetStream direct get API).
func toRaw(m *nats.Msg) (*jetstream.RawStreamMsg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad %s header %q", jetstream.SequenceHeader, m.Header.Get(jetstream.SequenceHeader))
	}
	ts, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("bad %s header: %w", jetstream.TimeStampHeaer, err)
	}
	return &jetstream.RawStreamMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: seq, Header: m.Header, Data: m.Data, Time: ts}, nil
}

// APISubject prefixes a JetStream API subject ("DIRECT.GET.<stream>") as
// js is configured: its API prefix, or its domain, or "$JS.API.".
func APISubject(js jetstream.JetStream, subj string) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "." + subj
	case o.Domain != "":
		return "$JS." + o.Domain + ".API." + subj
	}
	return "$JS.API." + subj
}

func withDefault(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

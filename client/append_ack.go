package client

// This file sends one message as jetstream's PublishMsg does and reads its
// ack without reflection in the common case.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishMsg publishes m and waits for the stream's ack, as
// jetstream.JetStream.PublishMsg does with no options (no responders is
// retried jetstream.DefaultPubRetryAttempts times after
// jetstream.DefaultPubRetryWait, then reported as
// jetstream.ErrNoStreamResponse; an error answer is a wrapped
// *jetstream.APIError; an ack that is not one is jetstream.ErrInvalidJSAck),
// with the ack parsed by parsePubAck. The ack is awaited on one of the
// client's reply inboxes (append_reply.go) while it has one to spare.
func (c *Client) publishMsg(ctx context.Context, m *nats.Msg) (seq uint64, dup bool, err error) {
	r := c.replies.take(c.nc)
	if r != nil {
		defer c.replies.give(r)
	}
	resp, err := c.request(ctx, r, m)
	for i := 0; errors.Is(err, nats.ErrNoResponders) && i < jetstream.DefaultPubRetryAttempts; i++ {
		// A leader election's blip: jetstream's publish retries it too.
		_ = sleep(ctx, jetstream.DefaultPubRetryWait)
		resp, err = c.request(ctx, r, m)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, false, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return 0, false, err
	}
	return parsePubAck(resp.Data)
}

// request sends m and waits for the answer on r, or through nats.go's
// request when r is nil.
func (c *Client) request(ctx context.Context, r *replyInbox, m *nats.Msg) (*nats.Msg, error) {
	if r != nil {
		return r.request(ctx, c.nc, m)
	}
	return c.nc.RequestMsgWithContext(ctx, m)
}

// pubAck is the part of a JetStream publish ack an append reads.
type pubAck struct {
	Error     *jetstream.APIError `json:"error"`
	Stream    string              `json:"stream"`
	Sequence  uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate"`
}

// parsePubAck reads a publish ack: the stored sequence and whether the
// server found the message a duplicate. The common ack, a flat object of
// strings without escapes, numbers and booleans as nats-server writes it,
// is read by scanPubAck without allocating; anything else (an error
// answer above all) by encoding/json. Errors as publishMsg's.
func parsePubAck(data []byte) (uint64, bool, error) {
	if stream, seq, dup, ok := scanPubAck(data); ok {
		if !stream {
			return 0, false, jetstream.ErrInvalidJSAck
		}
		return seq, dup, nil
	}
	var ack pubAck
	if err := json.Unmarshal(data, &ack); err != nil {
		return 0, false, jetstream.ErrInvalidJSAck
	}
	if ack.Error != nil {
		return 0, false, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" {
		return 0, false, jetstream.ErrInvalidJSAck
	}
	return ack.Sequence, ack.Duplicate, nil
}

// scanPubAck reads data when it is a flat JSON object whose values are
// strings without escapes, unsigned integers and booleans, with no white
// space: stream reports a non-empty "stream", seq and dup are "seq" and
// "duplicate". ok is false for anything else (an "error" member is an
// object), which encoding/json then reads.
func scanPubAck(data []byte) (stream bool, seq uint64, dup bool, ok bool) {
	if len(data) < 2 || data[0] != '{' {
		return false, 0, false, false
	}
	for _, c := range data {
		if c == '\\' || c < 0x20 {
			return false, 0, false, false
		}
	}
	i := 1
	for {
		key, v, next, mok := scanMember(data, i)
		if !mok {
			return false, 0, false, false
		}
		i = next
		switch string(key) {
		case "stream":
			if v[0] != '"' {
				return false, 0, false, false
			}
			stream = len(v) > 2
		case "seq":
			n, ok := unsigned(v)
			if !ok {
				return false, 0, false, false
			}
			seq = n
		case "duplicate":
			if !ackFlag(v, &dup) {
				return false, 0, false, false
			}
		default:
			if !otherAckField(key, v) {
				return false, 0, false, false
			}
		}
		if i >= len(data) {
			return false, 0, false, false
		}
		if data[i] == '}' {
			return stream, seq, dup, i == len(data)-1
		}
		if data[i] != ',' {
			return false, 0, false, false
		}
		i++
	}
}

// scanMember cuts out the member "key":value that starts at data[i]: its
// key (without quotes), its value as scanValue cuts it, the index after
// it, and false when data holds no such member there.
func scanMember(data []byte, i int) (key, v []byte, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, nil, 0, false
	}
	end := bytes.IndexByte(data[i+1:], '"')
	if end < 0 {
		return nil, nil, 0, false
	}
	key = data[i+1 : i+1+end]
	i += end + 2
	if i+1 >= len(data) || data[i] != ':' {
		return nil, nil, 0, false
	}
	v, next, ok = scanValue(data, i+1)
	return key, v, next, ok
}

// scanValue cuts out the value that starts at data[i] when it is a string
// without escapes (quotes kept), an unsigned integer, true or false:
// the value, the index after it, and false for anything else.
func scanValue(data []byte, i int) (v []byte, next int, ok bool) {
	switch c := data[i]; {
	case c == '"':
		end := bytes.IndexByte(data[i+1:], '"')
		if end < 0 {
			return nil, 0, false
		}
		return data[i : i+end+2], i + end + 2, true
	case c >= '0' && c <= '9', c == 't', c == 'f':
		j := i
		for j < len(data) && data[j] != ',' && data[j] != '}' {
			j++
		}
		return data[i:j], j, true
	}
	return nil, 0, false
}

// ackFlag sets *dup from v, true or false; it reports false for any
// other value.
func ackFlag(v []byte, dup *bool) bool {
	switch string(v) {
	case "true":
		*dup = true
	case "false":
		*dup = false
	default:
		return false
	}
	return true
}

// otherAckField reports whether a member of the ack other than stream,
// seq and duplicate leaves the fast path's reading right: a scalar whose
// name is none of those nor error in another case (encoding/json matches
// names without regard to case).
func otherAckField(key, v []byte) bool {
	return scalar(v) && !bytes.EqualFold(key, []byte("stream")) && !bytes.EqualFold(key, []byte("seq")) &&
		!bytes.EqualFold(key, []byte("duplicate")) && !bytes.EqualFold(key, []byte("error"))
}

// scalar reports whether v, a value scanPubAck cut out, is a JSON string
// (already delimited), true, false or an unsigned integer.
func scalar(v []byte) bool {
	switch {
	case v[0] == '"':
		return true
	case string(v) == "true" || string(v) == "false":
		return true
	}
	_, ok := unsigned(v)
	return ok
}

// unsigned parses v as a JSON unsigned integer (no sign, no leading zero,
// no fraction or exponent) that fits in a uint64.
func unsigned(v []byte) (uint64, bool) {
	if len(v) > 1 && v[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	return n, err == nil
}

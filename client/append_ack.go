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
// with the ack parsed by parsePubAck.
func (c *Client) publishMsg(ctx context.Context, m *nats.Msg) (seq uint64, dup bool, err error) {
	resp, err := c.nc.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		// A leader election's blip: jetstream's publish retries it too.
		_ = sleep(ctx, jetstream.DefaultPubRetryWait)
		resp, err = c.nc.RequestMsgWithContext(ctx, m)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, false, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return 0, false, err
	}
	return parsePubAck(resp.Data)
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
		if i >= len(data) || data[i] != '"' {
			return false, 0, false, false
		}
		end := bytes.IndexByte(data[i+1:], '"')
		if end < 0 {
			return false, 0, false, false
		}
		key := data[i+1 : i+1+end]
		i += end + 2
		if i >= len(data) || data[i] != ':' {
			return false, 0, false, false
		}
		i++
		if i >= len(data) {
			return false, 0, false, false
		}
		var v []byte
		switch c := data[i]; {
		case c == '"':
			end := bytes.IndexByte(data[i+1:], '"')
			if end < 0 {
				return false, 0, false, false
			}
			v, i = data[i:i+end+2], i+end+2
		case c >= '0' && c <= '9', c == 't', c == 'f':
			j := i
			for j < len(data) && data[j] != ',' && data[j] != '}' {
				j++
			}
			v, i = data[i:j], j
		default:
			return false, 0, false, false
		}
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
			switch string(v) {
			case "true":
				dup = true
			case "false":
				dup = false
			default:
				return false, 0, false, false
			}
		default:
			// encoding/json matches names without regard to case.
			if !scalar(v) || bytes.EqualFold(key, []byte("stream")) || bytes.EqualFold(key, []byte("seq")) ||
				bytes.EqualFold(key, []byte("duplicate")) || bytes.EqualFold(key, []byte("error")) {
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

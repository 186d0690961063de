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
// there at all. For a message stored with headers (every convlog event)
// the server adds the six direct get headers one by one through
// net/http.Header.Write, and nats.go parses all nine on arrival: about
// three times the CPU per message of a consumer's delivery (see
// BenchmarkBatch and BenchmarkOrderedConsumer). The server holds the
// stream's isolation lock, which appends take, for the whole batch.
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
	// One allocation for the page's message structs and one for the
	// slice, instead of one per message and the slice's regrowth.
	size := min(batch, maxPrealloc)
	out := make([]*jetstream.RawStreamMsg, 0, size)
	slab := make([]jetstream.RawStreamMsg, 0, size)
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return out, 0, fmt.Errorf("directget: %s from seq %d: %w", subject, from, ctx.Err())
		}
		if len(m.Data) == 0 {
			if status := m.Header.Get("Status"); status != "" {
				switch status {
				case "404":
					if len(out) > 0 {
						// The server answers 404 only for a batch that finds
						// nothing; after messages it means the stream went
						// away mid-batch: not a short last page.
						return out, 0, fmt.Errorf("directget: %s from seq %d: the batch ended with 404 after %d messages", subject, from, len(out))
					}
					return out, 0, nil
				case "204": // end of batch
					np, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
					return out, np, nil
				default:
					return out, 0, fmt.Errorf("directget: %s from seq %d: status %s %s", subject, from, status, m.Header.Get("Description"))
				}
			}
		}
		if len(out) == 0 && m.Header.Get("Nats-Num-Pending") == "" {
			return out, 0, errors.New("directget: the server does not support batched direct gets (needs 2.11+)")
		}
		if len(slab) == cap(slab) {
			slab = make([]jetstream.RawStreamMsg, 0, size)
		}
		slab = slab[:len(slab)+1]
		rm := &slab[len(slab)-1]
		if err := fill(rm, m); err != nil {
			return out, 0, fmt.Errorf("directget: %s from seq %d: %w", subject, from, err)
		}
		out = append(out, rm)
	}
}

// maxPrealloc bounds what Batch allocates before it knows how many
// messages come: a caller asking for a huge batch of a short subject
// does not pay for the batch size.
const maxPrealloc = 1024

// Next returns the first message of subject with sequence >= from, or nil
// when there is none. A single (not batched) get: the server computes no
// pending count.
func Next(ctx context.Context, js jetstream.JetStream, stream, subject string, from uint64) (*jetstream.RawStreamMsg, error) {
	return single(ctx, js, stream, request{Seq: max(from, 1), NextFor: subject}, subject)
}

// Last returns the last message of subject, or nil when it has none. The
// server answers from its per-subject index. The request is the
// subject-appended form, "$JS.API.DIRECT.GET.<stream>.<subject>" with no
// body (ADR-31), so that NATS permissions can scope it to a subject: a
// tenant-scoped user (package tenancy) may make it for its own subjects.
func Last(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	return request1(ctx, js, APISubject(js, "DIRECT.GET."+stream+"."+subject), nil, subject)
}

func single(ctx context.Context, js jetstream.JetStream, stream string, r request, subject string) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return request1(ctx, js, APISubject(js, "DIRECT.GET."+stream), req, subject)
}

// request1 makes one direct get request and reads its answer: nil for a
// 404 (no such message).
func request1(ctx context.Context, js jetstream.JetStream, api string, req []byte, subject string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := withDefault(ctx)
	defer cancel()
	m, err := js.Conn().RequestWithContext(ctx, api, req)
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
	rm := &jetstream.RawStreamMsg{}
	if err := fill(rm, m); err != nil {
		return nil, err
	}
	return rm, nil
}

// fill is toRaw into rm.
func fill(rm *jetstream.RawStreamMsg, m *nats.Msg) error {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return fmt.Errorf("bad %s header %q", jetstream.SequenceHeader, m.Header.Get(jetstream.SequenceHeader))
	}
	ts, err := parseTimestamp(m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return fmt.Errorf("bad %s header: %w", jetstream.TimeStampHeaer, err)
	}
	*rm = jetstream.RawStreamMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: seq, Header: m.Header, Data: m.Data, Time: ts}
	return nil
}

// parseTimestamp parses a Nats-Time-Stamp value: RFC 3339 with up to nine
// fractional digits. The server writes UTC ("Z"), which is read here
// without time.Parse's generality; any other form goes to time.Parse, so
// the result is always what time.Parse(time.RFC3339Nano, s) gives.
func parseTimestamp(s string) (time.Time, error) {
	// 2006-01-02T15:04:05Z or 2006-01-02T15:04:05.123456789Z
	if len(s) < 20 || len(s) > 30 || s[len(s)-1] != 'Z' || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Parse(time.RFC3339Nano, s)
	}
	num := func(s string) (int, bool) {
		n := 0
		for i := range len(s) {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(s[0:4])
	month, ok2 := num(s[5:7])
	day, ok3 := num(s[8:10])
	hour, ok4 := num(s[11:13])
	minute, ok5 := num(s[14:16])
	sec, ok6 := num(s[17:19])
	ns := 0
	ok7 := true
	if frac := s[19 : len(s)-1]; frac != "" {
		// A dot and 1 to 9 digits.
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Parse(time.RFC3339Nano, s)
		}
		ns, ok7 = num(frac[1:])
		for range 10 - len(frac) {
			ns *= 10
		}
	}
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || month < 1 || month > 12 || day < 1 || day > daysIn(time.Month(month), year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Parse(time.RFC3339Nano, s)
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, ns, time.UTC), nil
}

// daysIn is the number of days of month in year (Gregorian).
func daysIn(month time.Month, year int) int {
	switch month {
	case time.February:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
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

// errCodeMsgNotFound is JetStream's error code for "no message found".
const errCodeMsgNotFound = 10037

// LeaderLastSeq returns the sequence of subject's last message as the
// stream leader has it (a non-direct get, "$JS.API.STREAM.MSG.GET.<stream>"
// with {"last_by_subj"}: direct gets may be answered by a replica that
// lags), 0 if the subject is empty.
func LeaderLastSeq(ctx context.Context, js jetstream.JetStream, stream, subject string) (uint64, error) {
	ctx, cancel := withDefault(ctx)
	defer cancel()
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return 0, err
	}
	msg, err := js.Conn().RequestWithContext(ctx, APISubject(js, "STREAM.MSG.GET."+stream), req)
	if err != nil {
		return 0, fmt.Errorf("last sequence of %s: %w", subject, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("last sequence of %s: %w", subject, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == errCodeMsgNotFound {
			return 0, nil
		}
		return 0, fmt.Errorf("last sequence of %s: %w", subject, resp.Error)
	}
	if resp.Message == nil {
		return 0, fmt.Errorf("last sequence of %s: empty answer", subject)
	}
	return resp.Message.Seq, nil
}

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
// Every request is bounded by an attempt timeout, [DefaultAttemptTimeout]
// (2 s) unless a call is given [WithAttemptTimeout]: a request the server
// leaves unanswered, as a recovering cluster can, is made again after it,
// each retry waiting twice as long as the one before (up to 8 times the
// first). So a lost request costs an attempt rather than the caller's
// whole deadline; only the end of the caller's context (or
// [DefaultTimeout] when it has no deadline) ends the retries. Every
// request here is a read, safe to make twice; [Attempts] is the same loop
// for other such requests. A batch that arrives with a reply missing, or
// that the server ended early for a failure, is [ErrIncomplete].
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

// ErrIncomplete is returned (wrapped) by [Batch] for a batch that did
// not arrive whole: the server ended it before the batch size and before
// max bytes while it still counted messages pending (it failed to load
// the next one, or the stream stopped), or a reply of it was lost on the
// way (the Nats-Last-Sequence chain has a gap). The messages before the
// gap are returned with it, in order. Asking again may succeed.
var ErrIncomplete = errors.New("directget: batch incomplete")

// Batch returns up to batch messages of subject with sequence >= from, in
// stream order (stopping earlier after maxBytes of data when maxBytes >
// 0), and how many more messages of subject the stream held when it
// answered (the server's Nats-Num-Pending). A page shorter than batch
// with a pending count above zero is one the server ended at max bytes;
// a page the server ended early for another reason, or one missing a
// reply, is [ErrIncomplete]. The page is read-isolated from writes: an
// atomic batch is in it whole or not at all. No message is not an error
// (an empty slice). The returned messages' Data and Header are owned by
// the caller.
//
// A request whose replies stop coming (the server lost it, as a
// recovering cluster can) is asked again: each attempt waits up to the
// attempt timeout ([WithAttemptTimeout], default [DefaultAttemptTimeout])
// for each next reply, each retry twice as long as the one before (up to
// 8 times the first); only the end of ctx (or [DefaultTimeout] when ctx
// has no deadline) ends the retries, with an error wrapping ctx's error.
// Other errors are returned at once.
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
func Batch(ctx context.Context, js jetstream.JetStream, stream, subject string, from uint64, batch, maxBytes int, opts ...Option) ([]*jetstream.RawStreamMsg, uint64, error) {
	if batch < 1 {
		return nil, 0, fmt.Errorf("directget: batch must be at least 1, got %d", batch)
	}
	ctx, cancel := withDefault(ctx)
	defer cancel()
	req, err := json.Marshal(request{Seq: max(from, 1), NextFor: subject, Batch: batch, MaxBytes: maxBytes})
	if err != nil {
		return nil, 0, err
	}
	first := settle(opts).attempt
	for wait := first; ; wait = nextWait(wait, first) {
		out, pending, err := batchOnce(ctx, js, stream, req, batch, maxBytes, wait)
		if errors.Is(err, errNoReply) {
			if ctx.Err() == nil {
				continue
			}
			err = ctx.Err()
		}
		if err != nil {
			return out, 0, fmt.Errorf("directget: %s from seq %d: %w", subject, from, err)
		}
		return out, pending, nil
	}
}

// errNoReply ends an attempt of a batch that waited its time for a reply.
var errNoReply = errors.New("no reply")

// batchOnce makes one batched direct get request (body req) and reads
// its replies, waiting up to wait for each; errNoReply when one does not
// come. Errors are not wrapped with the subject.
func batchOnce(ctx context.Context, js jetstream.JetStream, stream string, req []byte, batch, maxBytes int, wait time.Duration) ([]*jetstream.RawStreamMsg, uint64, error) {
	nc := js.Conn()
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
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// One allocation for the page's message structs and one for the
	// slice, instead of one per message and the slice's regrowth.
	size := min(batch, maxPrealloc)
	out := make([]*jetstream.RawStreamMsg, 0, size)
	slab := make([]jetstream.RawStreamMsg, 0, size)
	var prev uint64 // the sequence of the last message received
	sent := 0       // at least the bytes the server counted against max bytes
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
			timer.Reset(wait)
		case <-timer.C:
			return out, 0, errNoReply
		case <-ctx.Done():
			return out, 0, ctx.Err()
		}
		if len(m.Data) == 0 {
			if status := m.Header.Get("Status"); status != "" {
				switch status {
				case "404":
					if len(out) > 0 {
						// The server answers 404 only for a batch that finds
						// nothing; after messages it means the stream went
						// away mid-batch: not a short last page.
						return out, 0, fmt.Errorf("the batch ended with 404 after %d messages", len(out))
					}
					return out, 0, nil
				case "204": // end of batch
					np, err := endOfBatch(m, prev, len(out), batch, sent, limit(nc, maxBytes))
					return out, np, err
				default:
					return out, 0, fmt.Errorf("status %s %s", status, m.Header.Get("Description"))
				}
			}
		}
		if len(out) == 0 && m.Header.Get(numPendingHeader) == "" {
			return out, 0, errors.New("the server does not support batched direct gets (needs 2.11+)")
		}
		if len(slab) == cap(slab) {
			slab = make([]jetstream.RawStreamMsg, 0, size)
		}
		slab = slab[:len(slab)+1]
		rm := &slab[len(slab)-1]
		if err := fill(rm, m); err != nil {
			return out, 0, err
		}
		if l, ok := lastHeader(m.Header, jetstream.LastSequenceHeader); ok && l != prev {
			return out, 0, fmt.Errorf("%w: a reply before sequence %d is missing (the last one received is %d, the server sent %d)", ErrIncomplete, rm.Sequence, prev, l)
		}
		prev = rm.Sequence
		sent += len(rm.Subject) + m.Size() - len(m.Subject) - len(m.Reply)
		out = append(out, rm)
	}
}

// endOfBatch checks the end-of-batch marker m of a batch that delivered
// n messages, the last of sequence prev, sent bytes at least the server
// counted against max bytes, and returns its pending count. The server
// ends a batch at its size, at max bytes (counting each message's
// subject, stored headers and data, and ending after the message that
// reaches limit), when nothing of the subject is left, or when loading
// the next message fails; only in the last case does it end short of
// the first two with messages pending. sent counts the headers the
// server adds too, so a batch with more than limit bytes may have been
// ended either way: it counts as ended at max bytes.
func endOfBatch(m *nats.Msg, prev uint64, n, batch, sent, limit int) (uint64, error) {
	np, _ := lastHeader(m.Header, numPendingHeader)
	if l, ok := lastHeader(m.Header, jetstream.LastSequenceHeader); ok && l != prev {
		return 0, fmt.Errorf("%w: replies after sequence %d are missing (the server's last was %d)", ErrIncomplete, prev, l)
	}
	if np > 0 && n < batch && sent < limit {
		return 0, fmt.Errorf("%w: the server ended it after %d of %d messages (%d bytes of at most %d) with %d pending", ErrIncomplete, n, batch, sent, limit, np)
	}
	return np, nil
}

// numPendingHeader is the batched direct get's count of the subject's
// messages after the reply (nats-server's JSNumPending).
const numPendingHeader = "Nats-Num-Pending"

// limit is the max bytes a batch request asking maxBytes gets: maxBytes,
// or when 0 the server's max_pending, which is at least its max_payload
// (nats-server refuses a configuration with less).
func limit(nc *nats.Conn, maxBytes int) int {
	if maxBytes > 0 {
		return maxBytes
	}
	return int(nc.MaxPayload())
}

// lastHeader parses the last value of the numeric header key of h: the
// one the server added after any the stored message carried.
func lastHeader(h nats.Header, key string) (uint64, bool) {
	vs := h.Values(key)
	if len(vs) == 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(vs[len(vs)-1], 10, 64)
	return v, err == nil
}

// maxPrealloc bounds what Batch allocates before it knows how many
// messages come: a caller asking for a huge batch of a short subject
// does not pay for the batch size.
const maxPrealloc = 1024

// Next returns the first message of subject with sequence >= from, or nil
// when there is none. A single (not batched) get: the server computes no
// pending count. A request left unanswered is asked again as [Attempts]
// says.
func Next(ctx context.Context, js jetstream.JetStream, stream, subject string, from uint64, opts ...Option) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(request{Seq: max(from, 1), NextFor: subject})
	if err != nil {
		return nil, err
	}
	return request1(ctx, js, APISubject(js, "DIRECT.GET."+stream), req, subject, opts)
}

// Last returns the last message of subject, or nil when it has none. The
// server answers from its per-subject index. The request is the
// subject-appended form, "$JS.API.DIRECT.GET.<stream>.<subject>" with no
// body (ADR-31), so that NATS permissions can scope it to a subject: a
// tenant-scoped user (package tenancy) may make it for its own subjects.
// A request left unanswered is asked again as [Attempts] says.
func Last(ctx context.Context, js jetstream.JetStream, stream, subject string, opts ...Option) (*jetstream.RawStreamMsg, error) {
	return request1(ctx, js, APISubject(js, "DIRECT.GET."+stream+"."+subject), nil, subject, opts)
}

// request1 makes one direct get request and reads its answer: nil for a
// 404 (no such message).
func request1(ctx context.Context, js jetstream.JetStream, api string, req []byte, subject string, opts []Option) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := withDefault(ctx)
	defer cancel()
	var m *nats.Msg
	err := Attempts(ctx, settle(opts).attempt, func(ctx context.Context) (err error) {
		m, err = js.Conn().RequestWithContext(ctx, api, req)
		return err
	})
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
	if !utcLayout(s) {
		return time.Parse(time.RFC3339Nano, s)
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	ns, ok7 := fraction(s[19 : len(s)-1])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || !validDateTime(year, month, day, hour, minute, sec) {
		return time.Parse(time.RFC3339Nano, s)
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, ns, time.UTC), nil
}

// utcLayout reports whether s has the separators of an RFC 3339 UTC
// timestamp (YYYY-MM-DDThh:mm:ssZ, with up to nine fractional digits of
// the second before the Z), its digits unchecked.
func utcLayout(s string) bool {
	return len(s) >= 20 && len(s) <= 30 && s[len(s)-1] == 'Z' && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' && s[16] == ':'
}

// digits is the decimal number s spells, false when s holds anything but
// the digits 0 to 9.
func digits(s string) (int, bool) {
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

// fraction is the nanoseconds of a timestamp's fraction frac: "" (none)
// or a dot and 1 to 9 digits; false for anything else.
func fraction(frac string) (int, bool) {
	if frac == "" {
		return 0, true
	}
	if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
		return 0, false
	}
	ns, ok := digits(frac[1:])
	for range 10 - len(frac) {
		ns *= 10
	}
	return ns, ok
}

// validDateTime reports whether the fields name a Gregorian date and a
// time of day (no leap second, as time.Parse).
func validDateTime(year, month, day, hour, minute, sec int) bool {
	return month >= 1 && month <= 12 && day >= 1 && day <= daysIn(time.Month(month), year) &&
		hour <= 23 && minute <= 59 && sec <= 59
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
// lags), 0 if the subject is empty. A request left unanswered is asked
// again as [Attempts] says.
func LeaderLastSeq(ctx context.Context, js jetstream.JetStream, stream, subject string, opts ...Option) (uint64, error) {
	ctx, cancel := withDefault(ctx)
	defer cancel()
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return 0, err
	}
	var msg *nats.Msg
	err = Attempts(ctx, settle(opts).attempt, func(ctx context.Context) (err error) {
		msg, err = js.Conn().RequestWithContext(ctx, APISubject(js, "STREAM.MSG.GET."+stream), req)
		return err
	})
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

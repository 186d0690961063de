package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// wantsSSE reports whether the request asks for an event stream.
func wantsSSE(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// getEvents serves GET /v1/threads/{id}/events: an SSE stream when the
// client accepts text/event-stream, else one JSON page of stored events.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	id, p := threadID(r)
	if p != nil {
		return p
	}
	q := r.URL.Query()
	after, param, p := queryAfter(r)
	if p != nil {
		return p
	}
	var limit int
	var deltas bool
	sse := wantsSSE(r)
	if !sse {
		if limit, p = queryInt(q, "limit", 1, 1000); p != nil {
			return p
		}
		if limit == 0 {
			limit = 100
		}
	} else if deltas, p = queryBool(q, "deltas"); p != nil {
		return p
	}
	if after > 0 {
		// (From 0, the first page says whether the thread exists.)
		if err := s.checkAfter(r.Context(), tenant, id, after, param); err != nil {
			return err
		}
	}
	if !sse {
		return s.eventsPage(w, r, tenant, id, after, limit)
	}
	return s.streamEvents(w, r, tenant, id, after, deltas)
}

// queryAfter reads where a reader resumes: the Last-Event-ID header (sent by
// browsers on reconnect) wins over the ?after= parameter. param names the
// one used ("" when neither was given).
func queryAfter(r *http.Request) (after uint64, param string, p *Problem) {
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, "", badRequest("bad-header", fmt.Sprintf("Last-Event-ID must be a stream sequence, got %q", v)).field("Last-Event-ID")
		}
		return n, "Last-Event-ID", nil
	}
	v := r.URL.Query().Get("after")
	if v == "" {
		return 0, "", nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, "", badRequest("bad-query", fmt.Sprintf("after must be a stream sequence (an integer >= 0), got %q", v)).field("after")
	}
	return n, "after", nil
}

// checkAfter answers whether the thread exists (404 otherwise) and whether
// after can be where a reader of it resumes: a sequence past the thread's
// version was never a sequence of this thread, so it is a 400 naming the
// parameter (a stream would otherwise skip every event up to it, a page
// would have nothing to say).
func (s *Server) checkAfter(ctx context.Context, tenant, id string, after uint64, param string) error {
	v, err := s.threadVersion(ctx, tenant, id, after)
	if err != nil {
		return err
	}
	if after <= v {
		return nil
	}
	slug := "bad-query"
	if param == "Last-Event-ID" {
		slug = "bad-header"
	}
	return badRequest(slug, fmt.Sprintf("%s %d is past the last event of thread %q (version %d): pass the sequence of the last event received, or 0 for the whole log",
		param, after, id, v)).field(param).thread(id)
}

// threadVersion returns the version of tenant/id (the sequence of its last
// event), or a 404 problem when it has no events or was erased. It reads
// only the thread's last message (within the StreamTotalBytes budget),
// never the thread: a reader opening a stream of a long thread costs one
// message, not the thread. A version below want is read again a few times
// (a direct get may be answered by a lagging replica). Soft-deleted threads
// are found. When the last event is an erasure marker, [client.Client.Get]
// decides, as it does for every other read.
func (s *Server) threadVersion(ctx context.Context, tenant, id string, want uint64) (uint64, error) {
	lr, err := s.newLogReader(tenant, id)
	if err != nil {
		return 0, err
	}
	defer lr.close()
	for attempt := 0; ; attempt++ {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
		m, err := lr.last(ctx, wctx)
		cancel()
		switch {
		case errors.Is(err, errNoBudget):
			return 0, busy(id)
		case err != nil:
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, s.readFailed(tenant, id, 0, err)
		case m == nil:
			return 0, notFound(id)
		case m.Header.Get(events.HeaderType) == string(events.TypeErased):
			th, err := s.c.Get(ctx, tenant, id, client.IncludeDeleted())
			if err != nil {
				return 0, err
			}
			return th.Version, nil
		case m.Sequence >= want || attempt == 3:
			return m.Sequence, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
}

// checkFirst answers whether a thread whose first page (from seq 1) is
// msgs exists: a 404 problem when it has no events; when its first event
// is an erasure marker, [client.Client.Get] decides, as for every other
// read.
func (s *Server) checkFirst(ctx context.Context, tenant, id string, msgs []*jetstream.RawStreamMsg) error {
	if len(msgs) == 0 {
		return notFound(id)
	}
	if msgs[0].Header.Get(events.HeaderType) == string(events.TypeErased) {
		if _, err := s.c.Get(ctx, tenant, id, client.IncludeDeleted()); err != nil {
			return err
		}
	}
	return nil
}

// busy is the answer when the StreamTotalBytes budget has no room.
func busy(id string) *Problem {
	return newProblem(http.StatusServiceUnavailable, "busy", "Server busy",
		"the server's memory budget for reading logs is in use; retry shortly").header("Retry-After", "1").thread(id)
}

// readFailed logs a failed read of a thread's log and returns a problem
// that does not carry the cause (which names internal subjects).
func (s *Server) readFailed(tenant, id string, seq uint64, err error) *Problem {
	s.log.Warn("reading a thread's log failed", "tenant", tenant, "thread", id, "seq", seq, "err", err)
	return newProblem(http.StatusServiceUnavailable, "unavailable", "Service unavailable",
		fmt.Sprintf("the log of thread %q could not be read; retry shortly", id)).thread(id).header("Retry-After", "1")
}

// eventsPage answers one JSON page of stored events after a sequence: at
// most limit events and about StreamBufferBytes of them (the page ends
// early, with more: true, past that), read with one batched direct get
// within the server's StreamTotalBytes budget.
func (s *Server) eventsPage(w http.ResponseWriter, r *http.Request, tenant, id string, after uint64, limit int) error {
	lr, err := s.newLogReader(tenant, id)
	if err != nil {
		return err
	}
	defer lr.close()
	out := struct {
		Events    []json.RawMessage `json:"events"`
		NextAfter uint64            `json:"next_after"`
		More      bool              `json:"more"`
	}{Events: []json.RawMessage{}, NextAfter: after}
	wctx, cancel := context.WithTimeout(r.Context(), s.cfg.WriteTimeout)
	defer cancel()
	msgs, pending, err := lr.page(r.Context(), wctx, after+1, limit)
	switch {
	case errors.Is(err, errNoBudget):
		return busy(id)
	case err != nil && r.Context().Err() == nil:
		return s.readFailed(tenant, id, after+1, err)
	case err != nil:
		return err
	}
	if after == 0 {
		if err := s.checkFirst(r.Context(), tenant, id, msgs); err != nil {
			return err
		}
	}
	size := 0
	for _, m := range msgs {
		st, derr := s.decodeRaw(tenant, id, m)
		b := storedJSON(st, derr)
		out.Events = append(out.Events, b)
		out.NextAfter = m.Sequence
		size += len(b)
	}
	out.More = pending > 0
	lr.hold.force(int64(size)) // the page's JSON, until it is written
	return writeJSON(w, http.StatusOK, out)
}

// decodeRaw decodes one stored message of tenant/thread, opened by
// logReader.page (a sealed payload whose key is gone decodes with
// events.ErrSealed and is sent as undecodable).
func (s *Server) decodeRaw(tenant, thread string, m *jetstream.RawStreamMsg) (events.Stored, error) {
	ev, err := events.Unmarshal(m.Data)
	if err != nil {
		err = fmt.Errorf("thread %s/%s seq %d: %w", tenant, thread, m.Sequence, err)
	}
	return events.Stored{Event: ev, Seq: m.Sequence, StoredAt: m.Time}, err
}

// sseWriter frames server-sent events with a write deadline per frame.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// write sends one frame and flushes it. An error means the client is gone
// or too slow and the stream must end.
func (sw *sseWriter) write(frame []byte) error {
	if err := sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := sw.w.Write(frame); err != nil {
		return err
	}
	if err := sw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// writeEvent sends one event frame (as [sseFrame] builds it) without
// copying data into a frame first: the frame's lines are written in turn
// under one write deadline, then flushed. A frame cut off by an error is
// never dispatched by the client (it lacks its blank line).
func (sw *sseWriter) writeEvent(id, event string, data []byte) error {
	if err := sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	head := sseFrame(id, event, nil)
	for _, b := range [][]byte{head[:len(head)-2], data, []byte("\n\n")} {
		if _, err := sw.w.Write(b); err != nil {
			return err
		}
	}
	if err := sw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// sseFrame builds one event: optional id, optional event name, data (which
// must hold no newline; JSON from encoding/json holds none).
func sseFrame(id, event string, data []byte) []byte {
	b := make([]byte, 0, len(data)+len(event)+len(id)+24)
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}

// streamEnded logs a stream that ended on a failed write. A write that hit
// the write timeout is a slow client being dropped: it is counted with the
// StreamDropped hook. Other write errors are clients that went away.
func (s *Server) streamEnded(err error, d StreamDrop) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		s.log.Debug("stream client went away", "route", d.Route, "tenant", d.Tenant, "thread", d.Thread, "err", err)
		return
	}
	d.Reason = "write_timeout"
	s.streamDropped(d)
}

// streamDropped logs and counts a stream the server ended to protect the
// others (d.Reason says why).
func (s *Server) streamDropped(d StreamDrop) {
	s.log.Info("slow stream client dropped", "route", d.Route, "tenant", d.Tenant, "thread", d.Thread,
		"reason", d.Reason, "write_timeout", s.cfg.WriteTimeout, "stream_bytes_in_use", s.streams.inUse())
	if s.cfg.Hooks.StreamDropped != nil {
		s.cfg.Hooks.StreamDropped(d)
	}
}

// setStreamHeaders sets the headers of an event stream, including those
// that make buffering proxies pass it through at once.
func setStreamHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
}

// streamEvents serves the SSE stream of a thread (see doc.go). The log is
// read lazily: a page (within the stream's budget) at a time, the next one
// only when the previous one is written. Once the stream has caught up, a
// headers-only consumer announces new events and the stream reads them
// from the log the same way.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, tenant, id string, after uint64, deltas bool) error {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.base, cancel)
	defer stop()
	lr, err := s.newLogReader(tenant, id)
	if err != nil {
		return err
	}
	defer lr.close()
	es := &eventStream{s: s, r: r, ctx: ctx, lr: lr, tenant: tenant, id: id, next: after + 1, more: true}
	if deltas {
		sub, ch, err := s.subscribeDeltas(tenant, id)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		es.deltaC = ch
	}
	// From 0, the first page is read before answering: it says whether the
	// thread exists (checkAfter did for a later start).
	if after == 0 {
		if err := es.readFirst(); err != nil {
			return err
		}
	}

	limitSendBuffer(r.Context(), s.cfg.StreamBufferBytes)
	setStreamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	es.sw = &sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	es.info = StreamDrop{Route: "GET /v1/threads/{id}/events", Tenant: tenant, Thread: id}
	// The retry hint tells EventSource how soon to reconnect.
	if err := es.sw.write([]byte("retry: 1000\n: stream of thread " + id + "\n\n")); err != nil {
		es.drop(err)
		return nil
	}
	es.hb = time.NewTicker(s.cfg.Heartbeat)
	defer es.hb.Stop()
	defer func() {
		if es.tail != nil {
			es.tail.stop()
		}
	}()
	for {
		if ctx.Err() != nil {
			es.cancelled()
			return nil
		}
		if es.more || es.announced() {
			switch es.catchUp() {
			case flowEnd:
				return nil
			case flowAgain:
				continue
			}
		}
		if es.follow() == flowEnd {
			return nil
		}
	}
}

// eventStream is one SSE stream of a thread while streamEvents serves it:
// where it stands in the log and what it writes to. One goroutine (the
// request's) uses it.
type eventStream struct {
	s      *Server
	r      *http.Request
	ctx    context.Context // the request's, also ended by the server's Shutdown
	lr     *logReader
	sw     *sseWriter
	info   StreamDrop
	tenant string
	id     string
	deltaC <-chan *nats.Msg // deltas of the thread's live turns (nil: not asked for)
	hb     *time.Ticker
	tail   *tailNotifier // nil until the stream has caught up

	first        []*jetstream.RawStreamMsg // the page from next, read before answering
	firstPending uint64
	haveFirst    bool   // first holds the page from next
	next         uint64 // the first sequence not sent
	more         bool   // the log may hold events from next on
	stale        int    // reads that found nothing where an event was announced
}

// flow is what the stream does after one of its steps.
type flow int

const (
	flowFollow flow = iota // wait for the tail's announcements
	flowAgain              // read the log again
	flowEnd                // the stream has ended
)

// readFirst reads the thread's first page before the stream answers: a
// missing thread is a 404, a full budget a 503, a failed read a problem.
func (es *eventStream) readFirst() error {
	s := es.s
	wctx, wcancel := context.WithTimeout(es.ctx, s.cfg.WriteTimeout)
	first, firstPending, err := es.lr.page(es.ctx, wctx, 1, pageMsgs)
	wcancel()
	switch {
	case errors.Is(err, errNoBudget):
		return busy(es.id)
	case err != nil && es.ctx.Err() == nil:
		return s.readFailed(es.tenant, es.id, 1, err)
	case err != nil:
		return err
	}
	if err := s.checkFirst(es.ctx, es.tenant, es.id, first); err != nil {
		return err
	}
	es.first, es.firstPending, es.haveFirst = first, firstPending, true
	return nil
}

// announced reports whether the tail has announced an event not sent yet.
func (es *eventStream) announced() bool {
	return es.tail != nil && es.next <= es.tail.seen.Load()
}

// drop ends the stream on a failed write.
func (es *eventStream) drop(err error) { es.s.streamEnded(err, es.info) }

// fail ends the stream with an error frame that says where to resume;
// the cause (which names internal subjects) goes to the log only.
func (es *eventStream) fail(seq uint64, what string, err error) {
	es.s.log.Warn("stream ended: "+what, "tenant", es.tenant, "thread", es.id, "seq", seq, "err", err)
	p := newProblem(http.StatusServiceUnavailable, "unavailable", "Service unavailable",
		fmt.Sprintf("the log of thread %q could not be read from seq %d; reconnect with Last-Event-ID to resume", es.id, seq)).thread(es.id).seq(seq)
	b, _ := json.Marshal(p)
	_ = es.sw.write(sseFrame("", "error", b))
}

// cancelled ends the stream once ctx is done, with a final shutdown
// frame when the server's Shutdown (not the client) ended it.
func (es *eventStream) cancelled() {
	if es.s.base.Err() != nil && es.r.Context().Err() == nil {
		_ = es.sw.write(sseFrame("", "shutdown", []byte(`{"reason":"server shutting down; reconnect with Last-Event-ID"}`)))
	}
}

// catchUp sends the next page of the log from next.
func (es *eventStream) catchUp() flow {
	msgs, pending := es.first, es.firstPending
	var err error
	if es.haveFirst {
		es.haveFirst, es.first = false, nil
	} else {
		wctx, wcancel := context.WithTimeout(es.ctx, es.s.cfg.WriteTimeout)
		msgs, pending, err = es.lr.page(es.ctx, wctx, es.next, pageMsgs)
		wcancel()
	}
	switch {
	case es.ctx.Err() != nil:
		es.cancelled()
		return flowEnd
	case errors.Is(err, errNoBudget):
		es.info.Reason = "memory_budget"
		es.s.streamDropped(es.info)
		return flowEnd
	case err != nil:
		es.fail(es.next, "reading the log failed", err)
		return flowEnd
	}
	for i := range msgs {
		if es.ctx.Err() != nil {
			es.cancelled()
			return flowEnd
		}
		m := msgs[i]
		msgs[i] = nil
		if err := es.send(m); err != nil {
			es.drop(err)
			return flowEnd
		}
	}
	es.lr.hold.releaseAll()
	es.more = pending > 0
	if len(msgs) > 0 || es.more {
		es.stale = 0
		return flowAgain
	}
	if es.announced() {
		return es.awaitAnnounced()
	}
	return flowFollow
}

// send writes the event of m and moves next past it. Nothing but the
// frame's data stays reachable while it is written: the raw message and
// the decoded event are let go.
func (es *eventStream) send(m *jetstream.RawStreamMsg) error {
	seq, size := m.Sequence, msgSize(m)
	st, derr := es.s.decodeRaw(es.tenant, es.id, m)
	typ := string(st.Type)
	if derr != nil {
		typ = "undecodable"
	}
	data := storedJSON(st, derr)
	st = events.Stored{}
	es.lr.hold.force(int64(len(data)))
	es.lr.hold.give(size)
	err := es.sw.writeEvent(strconv.FormatUint(seq, 10), typ, data)
	es.lr.hold.give(int64(len(data)))
	if err != nil {
		return err
	}
	es.next = seq + 1
	return nil
}

// awaitAnnounced handles an event announced but not readable yet (a
// direct get answered by a lagging replica) or purged meanwhile: it tries
// again a few times, then lets the client resume.
func (es *eventStream) awaitAnnounced() flow {
	if es.stale++; es.stale > 20 {
		es.fail(es.next, "an announced event could not be read", fmt.Errorf("seq %d announced, not in the log", es.tail.seen.Load()))
		return flowEnd
	}
	select {
	case <-es.ctx.Done():
		es.cancelled()
		return flowEnd
	case <-time.After(time.Duration(es.stale) * 10 * time.Millisecond):
	}
	return flowAgain
}

// follow starts following the log's tail once the stream has caught up,
// then waits for an announcement, a heartbeat or a delta.
func (es *eventStream) follow() flow {
	if es.tail == nil {
		var err error
		if es.tail, err = es.lr.startTail(es.ctx, es.next); err != nil {
			if es.ctx.Err() == nil {
				es.fail(es.next, "following the log failed", err)
			} else {
				es.cancelled()
			}
			return flowEnd
		}
		return flowAgain // events appended before the consumer started
	}
	select {
	case <-es.ctx.Done():
		es.cancelled()
		return flowEnd
	case <-es.hb.C:
		if err := es.sw.write([]byte(": heartbeat\n\n")); err != nil {
			es.drop(err)
			return flowEnd
		}
	case <-es.tail.wake:
	case <-es.tail.done:
		if es.ctx.Err() != nil {
			es.cancelled()
		} else {
			es.fail(es.next, "following the log failed", es.tail.failure())
		}
		return flowEnd
	case m := <-es.deltaC:
		return es.sendDelta(m)
	}
	return flowAgain
}

// sendDelta writes one delta of a live turn (an undecodable one is
// skipped).
func (es *eventStream) sendDelta(m *nats.Msg) flow {
	var d events.Delta
	if json.Unmarshal(m.Data, &d) != nil {
		return flowAgain
	}
	b, err := json.Marshal(&d)
	if err != nil {
		return flowAgain
	}
	if err := es.sw.write(sseFrame("", "delta", b)); err != nil {
		es.drop(err)
		return flowEnd
	}
	return flowAgain
}

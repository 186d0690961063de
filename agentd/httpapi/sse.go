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

	"github.com/convlog/convlog/client"
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
	after, p := queryAfter(r)
	if p != nil {
		return p
	}
	if !wantsSSE(r) {
		limit, p := queryInt(q, "limit", 1, 1000)
		if p != nil {
			return p
		}
		if limit == 0 {
			limit = 100
		}
		return s.eventsPage(w, r, tenant, id, after, limit)
	}
	deltas, p := queryBool(q, "deltas")
	if p != nil {
		return p
	}
	return s.streamEvents(w, r, tenant, id, after, deltas)
}

// queryAfter reads where a reader resumes: the Last-Event-ID header (sent by
// browsers on reconnect) wins over the ?after= parameter.
func queryAfter(r *http.Request) (uint64, *Problem) {
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, badRequest("bad-header", fmt.Sprintf("Last-Event-ID must be a stream sequence, got %q", v)).field("Last-Event-ID")
		}
		return n, nil
	}
	v := r.URL.Query().Get("after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, badRequest("bad-query", fmt.Sprintf("after must be a stream sequence (an integer >= 0), got %q", v)).field("after")
	}
	return n, nil
}

// eventsPage answers one JSON page of stored events after a sequence.
func (s *Server) eventsPage(w http.ResponseWriter, r *http.Request, tenant, id string, after uint64, limit int) error {
	if _, err := s.c.Get(r.Context(), tenant, id, client.IncludeDeleted()); err != nil {
		return err
	}
	out := struct {
		Events    []json.RawMessage `json:"events"`
		NextAfter uint64            `json:"next_after"`
		More      bool              `json:"more"`
	}{Events: []json.RawMessage{}, NextAfter: after}
	for st, err := range s.c.Events(r.Context(), tenant, id, after+1, 0) {
		if st.Seq == 0 && err != nil {
			return err
		}
		if len(out.Events) == limit {
			out.More = true
			break
		}
		out.Events = append(out.Events, storedJSON(st, err))
		out.NextAfter = st.Seq
	}
	return writeJSON(w, http.StatusOK, out)
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
	s.log.Info("slow stream client dropped", "route", d.Route, "tenant", d.Tenant, "thread", d.Thread,
		"reason", d.Reason, "write_timeout", s.cfg.WriteTimeout)
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

// streamEvents serves the SSE stream of a thread (see doc.go).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, tenant, id string, after uint64, deltas bool) error {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.base, cancel)
	defer stop()
	if _, err := s.c.Get(ctx, tenant, id, client.IncludeDeleted()); err != nil {
		return err
	}
	wt, err := s.c.Watch(ctx, tenant, id, client.WatchOptions{After: after, Deltas: deltas, Buffer: 512})
	if err != nil {
		return err
	}
	defer wt.Stop()

	setStreamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	drop := func(err error) error {
		s.streamEnded(err, StreamDrop{Route: "GET /v1/threads/{id}/events", Tenant: tenant, Thread: id})
		return nil
	}
	// The retry hint tells EventSource how soon to reconnect.
	if err := sw.write([]byte("retry: 1000\n: stream of thread " + id + "\n\n")); err != nil {
		return drop(err)
	}
	// cancelled ends the stream once ctx is done, with a final shutdown
	// frame when the server's Shutdown (not the client) ended it.
	cancelled := func() error {
		if s.base.Err() != nil && r.Context().Err() == nil {
			_ = sw.write(sseFrame("", "shutdown", []byte(`{"reason":"server shutting down; reconnect with Last-Event-ID"}`)))
		}
		return nil
	}
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-ctx.Done():
			return cancelled()
		case <-hb.C:
			if err := sw.write([]byte(": heartbeat\n\n")); err != nil {
				return drop(err)
			}
		case u, ok := <-wt.C:
			if !ok {
				// The watch ends with ctx too, and select picks either
				// ready case: a watch closed by the cancellation is the
				// same cancellation.
				if ctx.Err() != nil {
					return cancelled()
				}
				if werr := wt.Err(); werr != nil {
					b, _ := json.Marshal(problemFor(werr, errCtx{thread: id}))
					_ = sw.write(sseFrame("", "error", b))
				}
				return nil
			}
			var frame []byte
			switch {
			case u.Event != nil:
				typ := string(u.Event.Type)
				if u.Err != nil {
					typ = "undecodable"
				}
				frame = sseFrame(strconv.FormatUint(u.Event.Seq, 10), typ, storedJSON(*u.Event, u.Err))
			case u.Delta != nil:
				b, err := json.Marshal(u.Delta)
				if err != nil {
					continue
				}
				frame = sseFrame("", "delta", b)
			default:
				continue
			}
			if err := sw.write(frame); err != nil {
				return drop(err)
			}
		}
	}
}

package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// sseFrame is one parsed server-sent event.
type sseFrame struct {
	id, event, data string
	comment         bool
}

// sseReader parses an event stream as EventSource does: a frame is
// dispatched only when its blank line arrives.
type sseReader struct {
	br *bufio.Reader
}

func (r *sseReader) next() (sseFrame, error) {
	var f sseFrame
	seen := false
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return sseFrame{}, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				return f, nil
			}
			continue
		}
		seen = true
		switch {
		case strings.HasPrefix(line, ":"):
			f.comment = true
		case strings.HasPrefix(line, "id: "):
			f.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			f.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			f.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// openSSE opens the event stream of thread for tenant acme.
func (e *env) openSSE(ctx context.Context, thread, query string, kv ...string) (*http.Response, *sseReader) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/threads/"+thread+"/events"+query, nil)
	require.NoError(e.t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	res, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	require.Equal(e.t, http.StatusOK, res.StatusCode)
	return res, &sseReader{br: bufio.NewReader(res.Body)}
}

// A reader that disconnects at 50 random points of a live conversation
// (between frames and in the middle of them) and resumes with Last-Event-ID
// or ?after= gets every event exactly once, in order.
func TestSSEResumeGetsEveryEventExactlyOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	thread := e.createThread(map[string]any{"agent": "demo"})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))

	// The live conversation: a user message, the agent's answer, the next
	// message, ... until the reader is done disconnecting.
	var readerDone atomic.Bool
	appenderDone := make(chan error, 1)
	go func() {
		questions := []string{"hello", "what time is it?", "tell me more", "and then?"}
		for i := 0; !readerDone.Load() && i < 2000; i++ {
			if _, err := e.c.Append(ctx, "acme", thread, []events.Event{{Payload: events.UserMessage{Content: events.Text(questions[i%len(questions)])}}}, client.AnyVersion()); err != nil {
				appenderDone <- err
				return
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				th, err := e.c.Get(ctx, "acme", thread, client.Consistent())
				if err != nil {
					appenderDone <- err
					return
				}
				if th.LastUserAnswered && len(th.Pending) == 0 && th.Messages[len(th.Messages)-1].Role == events.RoleAssistant &&
					len(th.Messages[len(th.Messages)-1].ToolCalls) == 0 {
					break
				}
				if time.Now().After(deadline) {
					appenderDone <- fmt.Errorf("message %d not answered", i)
					return
				}
				time.Sleep(2 * time.Millisecond) // pacing the writer, not waiting for a condition under test
			}
		}
		appenderDone <- nil
	}()

	var got []uint64
	var last uint64
	record := func(f sseFrame) {
		t.Helper()
		if f.id == "" {
			require.True(t, f.comment || f.event == "delta", "a durable event without id: %+v", f)
			return
		}
		seq, err := strconv.ParseUint(f.id, 10, 64)
		require.NoError(t, err)
		var ev struct {
			Seq  uint64      `json:"seq"`
			Type events.Type `json:"type"`
			ID   string      `json:"id"`
		}
		require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
		require.Equal(t, seq, ev.Seq)
		require.Equal(t, string(ev.Type), f.event)
		require.NotEmpty(t, ev.ID)
		got = append(got, seq)
		last = seq
	}
	for cut := 0; cut < 50; cut++ {
		cctx, cancel := context.WithCancel(ctx)
		var res *http.Response
		var rd *sseReader
		if cut%2 == 0 {
			res, rd = e.openSSE(cctx, thread, "", "Last-Event-ID", strconv.FormatUint(last, 10))
		} else {
			res, rd = e.openSSE(cctx, thread, "?after="+strconv.FormatUint(last, 10))
		}
		frames := 1 + rng.IntN(4)
		for n := 0; n < frames; {
			f, err := rd.next()
			require.NoError(t, err)
			if f.id != "" {
				n++
			}
			record(f)
		}
		if rng.IntN(2) == 0 {
			// Cut in the middle of the next frame: read a few bytes of it.
			buf := make([]byte, 1+rng.IntN(40))
			_, _ = io.ReadFull(rd.br, buf)
		}
		cancel()
		res.Body.Close()
	}
	readerDone.Store(true)
	require.NoError(t, <-appenderDone)

	var all []uint64
	for st, err := range e.c.Events(ctx, "acme", thread, 1, 0) {
		require.NoError(t, err)
		all = append(all, st.Seq)
	}
	// Catch up to the end with one more connection.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res, rd := e.openSSE(cctx, thread, "", "Last-Event-ID", strconv.FormatUint(last, 10))
	defer res.Body.Close()
	for last < all[len(all)-1] {
		f, err := rd.next()
		require.NoError(t, err)
		record(f)
	}
	require.Equal(t, all, got, "every event exactly once, in order")
	require.Greater(t, len(all), 60, "the conversation was live during the cuts")
}

func TestSSEDeltasHeadersAndHeartbeats(t *testing.T) {
	e := newEnv(t, withConfig(func(c *httpapi.Config) { c.Heartbeat = 20 * time.Millisecond }))
	thread := e.createThread(map[string]any{"agent": "demo"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, rd := e.openSSE(ctx, thread, "?deltas=true")
	defer res.Body.Close()
	require.Equal(t, "text/event-stream; charset=utf-8", res.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", res.Header.Get("Cache-Control"))
	require.Equal(t, "no", res.Header.Get("X-Accel-Buffering"))

	e.appendUser(thread, "stream me some tokens please")
	var deltas, heartbeats int
	var deltaText strings.Builder
	for {
		f, err := rd.next()
		require.NoError(t, err)
		switch {
		case f.comment:
			if f.event == "" && f.data == "" {
				heartbeats++
			}
		case f.event == "delta":
			require.Empty(t, f.id, "deltas carry no id: they are not resumable")
			var d events.Delta
			require.NoError(t, json.Unmarshal([]byte(f.data), &d))
			deltas++
			deltaText.WriteString(d.Content)
		case f.event == string(events.TypeAssistantMessage):
			require.NotEmpty(t, f.id)
			var ev struct {
				Payload events.AssistantMessage `json:"payload"`
			}
			require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
			require.Positive(t, deltas, "live deltas came before the stored answer")
			require.True(t, strings.HasPrefix(ev.Payload.Content.String(), deltaText.String()[:min(8, deltaText.Len())]))
			// Keep reading until a heartbeat shows up.
			for heartbeats == 0 {
				f, err := rd.next()
				require.NoError(t, err)
				if f.comment {
					heartbeats++
				}
			}
			return
		}
	}
}

// A client that stops reading is dropped after the write timeout; the log
// and other writers are not held up.
func TestSSESlowClientIsDroppedAndNeverSlowsTheLog(t *testing.T) {
	e := newEnv(t, withConfig(func(c *httpapi.Config) { c.WriteTimeout = 100 * time.Millisecond }))
	thread := e.createThread(map[string]any{"replies": "off"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	// Ask for the stream, then never read.
	_, err = fmt.Fprintf(conn, "GET /v1/threads/%s/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\n\r\n", thread, keyAcme)
	require.NoError(t, err)

	// state.set events: agent workers ack them without reading the thread.
	big := json.RawMessage(strconv.Quote(strings.Repeat("x", 200_000)))
	ctx := context.Background()
	var slowest time.Duration
	dropped := func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.dropped) > 0
	}
	for i := 0; i < 500 && !dropped(); i++ {
		start := time.Now()
		_, err := e.c.Append(ctx, "acme", thread, []events.Event{{Payload: events.StateSet{Key: "blob", Value: big}}}, client.AnyVersion())
		require.NoError(t, err)
		slowest = max(slowest, time.Since(start))
	}
	require.Eventually(t, dropped, 10*time.Second, 5*time.Millisecond)
	e.mu.Lock()
	d := e.dropped[0]
	e.mu.Unlock()
	require.Equal(t, "write_timeout", d.Reason)
	require.Equal(t, thread, d.Thread)
	require.Less(t, slowest, 2*time.Second, "appends were not held up by the stalled reader")
}

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// latencies records per-operation latencies and reports req/s, p50 and
// p99 (µs) next to ns/op.
type latencies struct {
	d     []time.Duration
	start time.Time
}

func (l *latencies) time(f func()) {
	t := time.Now()
	f()
	l.d = append(l.d, time.Since(t))
}

func (l *latencies) report(b *testing.B) {
	elapsed := time.Since(l.start)
	slices.Sort(l.d)
	pct := func(p float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(float64(len(l.d))*p))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(float64(len(l.d))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkAppendGet measures appending one user message and reading a
// 100-message thread over HTTP (a Go client on keep-alive connections to an
// httptest server in the same process) next to the same operations through
// client/, in one run against one embedded JetStream server. The HTTP
// numbers include the client's own cost in this process; a load generator
// in a second process (wrk) would isolate the server.
//
//	go test ./agentd/httpapi/ -run '^$' -bench AppendGet -benchtime 2000x
func BenchmarkAppendGet(b *testing.B) {
	e := newEnv(b, withoutWorkers())
	ctx := context.Background()
	hc := e.srv.Client()
	newThread := func(n int) string {
		id := e.createThread(map[string]any{"replies": "off"})
		for i := 0; i < n; i++ {
			_, err := e.c.Append(ctx, "acme", id, []events.Event{{Payload: events.UserMessage{Content: events.Text("a message of moderate length for the read benchmark")}}}, client.AnyVersion())
			require.NoError(b, err)
		}
		return id
	}
	body, err := json.Marshal(map[string]any{"events": []any{userEvent("hello over HTTP")}})
	require.NoError(b, err)
	httpDo := func(method, url string, body []byte, want int) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, url, rd)
		req.Header.Set("Authorization", "Bearer "+keyAcme)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			b.Fatalf("%s %s: %d", method, url, res.StatusCode)
		}
	}

	b.Run("append/http", func(b *testing.B) {
		id := newThread(0)
		url := e.srv.URL + "/v1/threads/" + id + "/events"
		l := latencies{start: time.Now()}
		for b.Loop() {
			l.time(func() { httpDo("POST", url, body, http.StatusCreated) })
		}
		l.report(b)
	})
	b.Run("append/client", func(b *testing.B) {
		id := newThread(0)
		l := latencies{start: time.Now()}
		for b.Loop() {
			l.time(func() {
				_, err := e.c.Append(ctx, "acme", id, []events.Event{{Payload: events.UserMessage{Content: events.Text("hello over NATS")}}}, client.AnyVersion())
				if err != nil {
					b.Fatal(err)
				}
			})
		}
		l.report(b)
	})
	readID := newThread(100)
	b.Run("get100/http", func(b *testing.B) {
		url := e.srv.URL + "/v1/threads/" + readID
		l := latencies{start: time.Now()}
		for b.Loop() {
			l.time(func() { httpDo("GET", url, nil, http.StatusOK) })
		}
		l.report(b)
	})
	b.Run("get100/client", func(b *testing.B) {
		l := latencies{start: time.Now()}
		for b.Loop() {
			l.time(func() {
				if _, err := e.c.Get(ctx, "acme", readID); err != nil {
					b.Fatal(err)
				}
			})
		}
		l.report(b)
	})
}

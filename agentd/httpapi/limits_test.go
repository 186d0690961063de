package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
)

// realServer is e's API served the way agentd serves it: the http.Server
// and the listener the API builds (timeouts, connection cap).
type realServer struct {
	addr string
}

// serveReal starts e's API on a real server on a loopback port.
func (e *env) serveReal() *realServer {
	e.t.Helper()
	rs := &realServer{}
	srv := e.api.HTTPServer(e.api.Handler())
	ln, err := e.api.Listen("tcp", "127.0.0.1:0")
	require.NoError(e.t, err)
	rs.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	e.t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return rs
}

// refusedHook counts refused connections into n.
func refusedHook(n *atomic.Int64) func(httpapi.ConnRefusal) {
	return func(httpapi.ConnRefusal) { n.Add(1) }
}

// readResponse reads one HTTP response from c within d.
func readResponse(c net.Conn, d time.Duration) (*http.Response, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res, nil
}

// A body that trickles in (one byte every few seconds) is cut off once the
// read timeout has passed: the client gets 408 or a closed connection,
// long before it could have sent the body.
func TestSlowBodyIsCutOffAtTheReadTimeout(t *testing.T) {
	e := newEnv(t, withoutWorkers(), withConfig(func(c *httpapi.Config) { c.ReadTimeout = 500 * time.Millisecond }))
	rs := e.serveReal()
	thread := e.createThread(map[string]any{"replies": "off"})

	c, err := net.Dial("tcp", rs.addr)
	require.NoError(t, err)
	defer c.Close()
	body := `{"events":[{"type":"message.user","payload":{"content":"hello"}}]}`
	_, err = fmt.Fprintf(c, "POST /v1/threads/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		thread, keyAcme, len(body))
	require.NoError(t, err)
	// One byte every 2 s: the whole body would take over two minutes.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i++ {
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	res, err := readResponse(c, 10*time.Second)
	var ne net.Error
	if err != nil {
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server still held the slow body after 10 s: %v", err)
		t.Logf("cut off: connection closed (%v)", err)
		return
	}
	t.Logf("cut off: %s", res.Status)
	require.Equal(t, http.StatusRequestTimeout, res.StatusCode)
}

// An Expect: 100-continue request that declares a body above the limit is
// answered 413 at once, without "100 Continue" (so the client never sends
// the body), and the connection is closed.
func TestExpectContinueAboveTheLimitIs413WithoutContinue(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	rs := e.serveReal()
	thread := e.createThread(map[string]any{"replies": "off"})

	c, err := net.Dial("tcp", rs.addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "POST /v1/threads/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		thread, keyAcme, 50<<20)
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	require.NoError(t, err, "the server answered nothing")
	require.True(t, strings.HasPrefix(status, "HTTP/1.1 413"), "first line %q: the server must not send 100 Continue for a body above its limit", status)
}

// A flood of idle keep-alive connections beyond the cap is refused (503 or
// closed at once) instead of exhausting file descriptors; idle connections
// are closed after the idle timeout, and then a normal request is served.
func TestConnectionFloodDegradesToRefusals(t *testing.T) {
	var refused atomic.Int64
	e := newEnv(t, withoutWorkers(), withConfig(func(c *httpapi.Config) {
		c.MaxConns = 50
		c.IdleTimeout = time.Second
		c.ReadHeaderTimeout = time.Second
		c.Hooks.ConnRefused = refusedHook(&refused)
	}))
	rs := e.serveReal()

	const flood = 200
	var (
		mu            sync.Mutex
		conns         []net.Conn
		served, nacks int
	)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < flood; i++ {
		wg.Go(func() {
			c, err := net.Dial("tcp", rs.addr)
			if err != nil {
				mu.Lock()
				nacks++
				mu.Unlock()
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			_, err = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			res, rerr := readResponse(c, 5*time.Second)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && rerr == nil && res.StatusCode == http.StatusOK:
				served++ // now an idle keep-alive connection
			default:
				var ne net.Error
				if errors.As(rerr, &ne) && ne.Timeout() {
					return // neither served nor refused: counted as missing below
				}
				nacks++
			}
		})
	}
	wg.Wait()
	t.Logf("flood of %d: %d served and kept alive, %d refused (hook: %d)", flood, served, nacks, refused.Load())
	require.LessOrEqual(t, served, 50, "no more connections than the cap are served at once")
	require.Equal(t, flood, served+nacks, "every connection was served or refused, none left hanging")
	require.GreaterOrEqual(t, refused.Load(), int64(flood-50), "refusals are counted")

	// The idle ones are closed by the server after the idle timeout.
	mu.Lock()
	idle := append([]net.Conn(nil), conns...)
	mu.Unlock()
	for _, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "an idle connection was kept beyond the idle timeout")
	}
	// And a normal request is answered.
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + rs.addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
}

// Streams are exempt from the read and response timeouts: an SSE stream
// outlives both (its heartbeats keep flowing), while each of its writes
// still has its own deadline.
func TestStreamsOutliveTheRequestTimeouts(t *testing.T) {
	e := newEnv(t, withoutWorkers(), withConfig(func(c *httpapi.Config) {
		c.ReadTimeout = 200 * time.Millisecond
		c.ResponseTimeout = 200 * time.Millisecond
		c.Heartbeat = 50 * time.Millisecond
	}))
	rs := e.serveReal()
	thread := e.createThread(map[string]any{"replies": "off"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+rs.addr+"/v1/threads/"+thread+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	rd := &sseReader{br: bufio.NewReader(res.Body)}
	start := time.Now()
	beats := 0
	for time.Since(start) < time.Second {
		f, err := rd.next()
		require.NoError(t, err, "the stream was cut after %s (%d heartbeats)", time.Since(start), beats)
		if f.comment {
			beats++
		}
	}
	require.Greater(t, beats, 5)
}

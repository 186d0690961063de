package httpapi_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/internal/clienttest"
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

// A flood of keep-alive connections from one address beyond its cap (16
// of MaxConns 50) is refused (503 or closed at once) instead of exhausting
// file descriptors; idle connections are closed after the idle timeout,
// and then a normal request is served.
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

// connAPI is an API (auth off, no workers) built from cfg over an
// embedded JetStream, for the connection cap tests that only need
// /healthz.
func connAPI(t *testing.T, cfg httpapi.Config) *httpapi.Server {
	t.Helper()
	cfg.Client, cfg.Auth = clienttest.New(t).Client, httpapi.Auth{Disabled: true}
	api, err := httpapi.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, api.Shutdown(ctx))
	})
	return api
}

// trackedServer is an API served on loopback by the http.Server and the
// listener the API builds, with the connection states that server reports
// recorded by the client's address of each connection.
type trackedServer struct {
	addr string
	tls  *tls.Config // the client's, nil for plain TCP

	mu     sync.Mutex
	states map[string]http.ConnState
}

// serveTracked serves api on 127.0.0.1, over TLS when withTLS.
func serveTracked(t *testing.T, api *httpapi.Server, withTLS bool) *trackedServer {
	t.Helper()
	ts := &trackedServer{states: map[string]http.ConnState{}}
	srv := api.HTTPServer(api.Handler())
	orig := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if orig != nil {
			orig(c, st)
		}
		ts.mu.Lock()
		ts.states[c.RemoteAddr().String()] = st
		ts.mu.Unlock()
	}
	ln, err := api.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ts.addr = ln.Addr().String()
	serve := func() error { return srv.Serve(ln) }
	if withTLS {
		// httptest's certificate, valid for 127.0.0.1.
		tmp := httptest.NewTLSServer(http.NotFoundHandler())
		srv.TLSConfig = &tls.Config{Certificates: tmp.TLS.Certificates}
		ts.tls = &tls.Config{ServerName: "127.0.0.1", RootCAs: tmp.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
		tmp.Close()
		serve = func() error { return srv.ServeTLS(ln, "", "") }
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = serve() }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ts
}

// dialFrom opens a connection to ts from the loopback address ip
// (127.0.0.0/8 is all loopback, so each address is another client).
func (ts *trackedServer) dialFrom(t *testing.T, ip string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", ts.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	if ts.tls != nil {
		tc := tls.Client(c, ts.tls.Clone())
		t.Cleanup(func() { _ = tc.Close() })
		return tc
	}
	return c
}

// state is the last state the server reported for the connection whose
// client end is c.
func (ts *trackedServer) state(c net.Conn) (http.ConnState, bool) {
	return ts.stateOf(c.LocalAddr().String())
}

// stateOf is the last state the server reported for the connection from
// the client address local.
func (ts *trackedServer) stateOf(local string) (http.ConnState, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	st, ok := ts.states[local]
	return st, ok
}

// healthz sends GET /healthz on c (keep-alive) and returns the answer's
// status, or an error when c was refused without an answer or closed.
func healthz(c net.Conn) (int, error) {
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	res, err := readResponse(c, 10*time.Second)
	if err != nil {
		return 0, err
	}
	return res.StatusCode, nil
}

// Keep-alive connections of one address that fill the server, each asking
// GET /healthz now and then and reopened when closed, cannot keep another
// address's probes out: every probe, each on a new connection, is served.
// By default the address is held to its own cap (16 of 64 here); with the
// per-address cap off (as behind a reverse proxy) the address holds every
// slot, and each probe takes the slot of its connection idle the longest.
func TestIdleKeepAlivesOfOneAddressCannotLockOutProbes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perAddr   int
		held      int // connections the address gets
		refusals  bool
		evictions bool
	}{
		{"by default the address is held to its own cap", 0, 16, true, false},
		{"with the per-address cap off its idle connections make room", -1, 64, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const maxConns = 64
			var refused atomic.Int64
			evHook, evicted := evictedHook()
			api := connAPI(t, httpapi.Config{MaxConns: maxConns, MaxConnsPerAddr: tc.perAddr,
				Hooks: httpapi.Hooks{ConnRefused: refusedHook(&refused), ConnEvicted: evHook}})
			ts := serveTracked(t, api, false)

			fl := newFlooder(ts.addr, "127.0.0.2", maxConns)
			held := fl.held()
			stop := fl.run(20 * time.Millisecond)
			defer stop()

			const probes = 30
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for i := range probes {
				c := ts.dialFrom(t, "127.0.0.1")
				status, err := healthz(c)
				_ = c.Close()
				require.NoError(t, err, "probe %d was turned away without an answer", i+1)
				require.Equal(t, http.StatusOK, status, "probe %d was refused while one address held the server", i+1)
				<-tick.C
			}
			stop()
			t.Logf("%d probes served; the flooding address: %d requests, %d connections lost; %d refused, %d idle connections closed",
				probes, fl.requests, fl.lost, refused.Load(), len(evicted()))
			require.Equal(t, tc.held, held, "connections the flooding address got")
			require.Positive(t, fl.requests, "the flooding address kept asking")
			require.Equal(t, tc.refusals, refused.Load() > 0, "the address's connections beyond its cap were refused")
			require.Equal(t, tc.evictions, len(evicted()) > 0, "idle connections were closed for the probes")
		})
	}
}

// flooder is one client address holding want keep-alive connections to a
// server: each asks GET /healthz on every pass, and one that was closed or
// refused is dialed again.
type flooder struct {
	addr, ip string
	conns    []net.Conn // nil: not held
	requests int        // answered 200 (on a held or a new connection)
	lost     int        // held connections found closed by the server
}

// newFlooder dials want connections from ip to addr, one after the other,
// each asking once.
func newFlooder(addr, ip string, want int) *flooder {
	f := &flooder{addr: addr, ip: ip, conns: make([]net.Conn, want)}
	for i := range f.conns {
		f.conns[i] = f.dial()
	}
	return f
}

// held is the number of connections held.
func (f *flooder) held() int {
	n := 0
	for _, c := range f.conns {
		if c != nil {
			n++
		}
	}
	return n
}

// dial opens a connection and asks once on it; nil when it was refused.
func (f *flooder) dial() net.Conn {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(f.ip)}}
	c, err := d.Dial("tcp", f.addr)
	if err != nil {
		return nil
	}
	if status, err := healthz(c); err != nil || status != http.StatusOK {
		_ = c.Close()
		return nil
	}
	f.requests++
	return c
}

// run makes a pass over the connections every interval, one request at a
// time, until the returned stop is called (by the test's goroutine; more
// than once is fine). stop waits for the pass under way, and closes the
// connections.
func (f *flooder) run(interval time.Duration) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for i, c := range f.conns {
				if c != nil {
					if status, err := healthz(c); err == nil && status == http.StatusOK {
						f.requests++
						continue
					}
					_ = c.Close()
					f.lost++
				}
				f.conns[i] = f.dial()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-exited
			for _, c := range f.conns {
				if c != nil {
					_ = c.Close()
				}
			}
		})
	}
}

// One address that holds as many connections as one address may, busy
// ones that can never be closed to make room, cannot keep another address
// out: by default an address gets a quarter of MaxConns (16 of 64 here),
// so the other three quarters stay open to everyone else.
func TestOneAddressAtItsCapCannotLockOutAnother(t *testing.T) {
	var refused atomic.Int64
	api := connAPI(t, httpapi.Config{MaxConns: 64, ReadHeaderTimeout: time.Minute,
		Hooks: httpapi.Hooks{ConnRefused: refusedHook(&refused)}})
	ts := serveTracked(t, api, false)

	// 127.0.0.2 opens every slot there is and sends nothing: connections
	// that are not idle (a request may come any moment).
	for i := 0; i < 64; i++ {
		ts.dialFrom(t, "127.0.0.2")
	}
	c := ts.dialFrom(t, "127.0.0.1")
	status, err := healthz(c)
	require.NoError(t, err, "the second address was turned away without an answer")
	require.Equal(t, http.StatusOK, status, "the second address was refused while the first held the connections")
	require.GreaterOrEqual(t, refused.Load(), int64(64-16), "the first address's connections beyond its cap were refused and counted")
}

// With every slot held by an idle keep-alive connection, a new client is
// served: the connection idle the longest is closed to make room for it,
// and the others keep being served. Over plain TCP and over TLS.
func TestIdleConnectionsMakeRoomForANewClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"over plain TCP", false}, {"over TLS", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var refused atomic.Int64
			hook, evicted := evictedHook()
			api := connAPI(t, httpapi.Config{MaxConns: 4, Hooks: httpapi.Hooks{ConnRefused: refusedHook(&refused), ConnEvicted: hook}})
			ts := serveTracked(t, api, tc.tls)

			var idle []net.Conn
			for i := 0; i < 4; i++ {
				c := ts.dialFrom(t, "127.0.0.1")
				status, err := healthz(c)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, status)
				// In order: each is idle before the next one's request.
				require.Eventually(t, func() bool {
					st, ok := ts.state(c)
					return ok && st == http.StateIdle
				}, 10*time.Second, time.Millisecond)
				idle = append(idle, c)
			}

			status, err := healthz(ts.dialFrom(t, "127.0.0.2"))
			require.NoError(t, err, "the new client was turned away without an answer")
			require.Equal(t, http.StatusOK, status, "the new client was refused while idle connections held every slot")
			require.Zero(t, refused.Load())
			evictions := evicted()
			require.Len(t, evictions, 1, "one idle connection was closed, and counted")
			require.Equal(t, idle[0].LocalAddr().String(), evictions[0].Remote)
			require.Positive(t, evictions[0].Idle)

			// The oldest idle connection was closed by the server: a read
			// ends (EOF or reset), it does not wait for the deadline.
			_ = idle[0].SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = idle[0].Read(make([]byte, 1))
			require.Error(t, err)
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the oldest idle connection is still open: %v", err)
			for i, c := range idle[1:] {
				status, err := healthz(c)
				require.NoError(t, err, "idle connection %d was closed instead of the oldest", i+1)
				require.Equal(t, http.StatusOK, status)
			}
		})
	}
}

// evictedHook records the idle connections closed to make room; the
// returned function lists them.
func evictedHook() (func(httpapi.ConnEviction), func() []httpapi.ConnEviction) {
	var (
		mu   sync.Mutex
		seen []httpapi.ConnEviction
	)
	return func(e httpapi.ConnEviction) { mu.Lock(); seen = append(seen, e); mu.Unlock() },
		func() []httpapi.ConnEviction {
			mu.Lock()
			defer mu.Unlock()
			return append([]httpapi.ConnEviction(nil), seen...)
		}
}

// refusalsHook records refused connections; the returned function lists
// them.
func refusalsHook() (func(httpapi.ConnRefusal), func() []httpapi.ConnRefusal) {
	var (
		mu   sync.Mutex
		seen []httpapi.ConnRefusal
	)
	return func(r httpapi.ConnRefusal) { mu.Lock(); seen = append(seen, r); mu.Unlock() },
		func() []httpapi.ConnRefusal {
			mu.Lock()
			defer mu.Unlock()
			return append([]httpapi.ConnRefusal(nil), seen...)
		}
}

// A connection from an address that holds MaxConnsPerAddr is refused with
// a 503 that says so, and counted with its reason, while the server has
// room for others; once the address closes one, it gets in again.
func TestAnAddressOverItsCapIsRefusedAndCounted(t *testing.T) {
	hook, refusals := refusalsHook()
	api := connAPI(t, httpapi.Config{MaxConns: 10, MaxConnsPerAddr: 2, Hooks: httpapi.Hooks{ConnRefused: hook}})
	ts := serveTracked(t, api, false)

	var held []net.Conn
	for i := 0; i < 2; i++ {
		c := ts.dialFrom(t, "127.0.0.1")
		status, err := healthz(c)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		held = append(held, c)
	}
	// The refusal is written at once, before any request: reading it
	// without sending one leaves no write racing the close.
	c := ts.dialFrom(t, "127.0.0.1")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Equal(t, "1", res.Header.Get("Retry-After"))
	require.Contains(t, string(body), "your address holds as many connections as one address may")
	require.Equal(t, []httpapi.ConnRefusal{{Remote: c.LocalAddr().String(), Open: 2, Reason: "max_conns_per_addr"}}, refusals())

	status, err := healthz(ts.dialFrom(t, "127.0.0.2"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "another address is served")

	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool {
		status, err := healthz(ts.dialFrom(t, "127.0.0.1"))
		return err == nil && status == http.StatusOK
	}, 10*time.Second, 5*time.Millisecond, "the address got its slot back")
}

// The per-address cap is off with MaxConnsPerAddr -1, and does not apply
// to an exempt address (a trusted reverse proxy's), which other addresses
// stay held to.
func TestThePerAddrCapCanBeTurnedOffOrExempted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      httpapi.Config
		otherCap bool // 127.0.0.1 is still capped at 2
	}{
		{"MaxConnsPerAddr -1 turns it off", httpapi.Config{MaxConnsPerAddr: -1}, false},
		{"an exempt address is not held to it", httpapi.Config{MaxConnsPerAddr: 2,
			MaxConnsPerAddrExempt: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.2/32")}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook, refusals := refusalsHook()
			cfg := tc.cfg
			cfg.MaxConns, cfg.Hooks.ConnRefused = 10, hook
			ts := serveTracked(t, connAPI(t, cfg), false)
			for i := 0; i < 6; i++ {
				status, err := healthz(ts.dialFrom(t, "127.0.0.2"))
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, status, "connection %d of the uncapped address", i+1)
			}
			for i := 0; i < 3; i++ {
				ts.dialFrom(t, "127.0.0.1")
			}
			if tc.otherCap {
				res, err := readResponse(ts.dialFrom(t, "127.0.0.1"), 10*time.Second)
				require.NoError(t, err)
				require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
				rs := refusals()
				require.NotEmpty(t, rs)
				require.Equal(t, "max_conns_per_addr", rs[0].Reason)
				require.Contains(t, rs[0].Remote, "127.0.0.1:")
				return
			}
			status, err := healthz(ts.dialFrom(t, "127.0.0.1"))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status)
			require.Empty(t, refusals())
		})
	}
}

// Connections that are not idle (here: opened and reading their first
// request) are never closed to make room: with all slots taken by them a
// newcomer is refused, counted with reason "max_conns".
func TestBusyConnectionsAreNotClosedToMakeRoom(t *testing.T) {
	hook, refusals := refusalsHook()
	evHook, evicted := evictedHook()
	api := connAPI(t, httpapi.Config{MaxConns: 2, ReadHeaderTimeout: time.Minute,
		Hooks: httpapi.Hooks{ConnRefused: hook, ConnEvicted: evHook}})
	ts := serveTracked(t, api, false)

	busy := []net.Conn{ts.dialFrom(t, "127.0.0.1"), ts.dialFrom(t, "127.0.0.2")}
	for _, c := range busy {
		_, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\n") // headers not finished
		require.NoError(t, err)
	}
	c := ts.dialFrom(t, "127.0.0.3")
	res, err := readResponse(c, 10*time.Second) // the refusal comes unasked
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Equal(t, []httpapi.ConnRefusal{{Remote: c.LocalAddr().String(), Open: 2, Reason: "max_conns"}}, refusals())
	require.Empty(t, evicted())
	for _, c := range busy {
		_, err := fmt.Fprintf(c, "Host: x\r\n\r\n")
		require.NoError(t, err)
		res, err := readResponse(c, 10*time.Second)
		require.NoError(t, err, "a busy connection was closed")
		require.Equal(t, http.StatusOK, res.StatusCode)
	}
}

// ValidateLimits reports a per-address cap below -1 and an invalid exempt
// prefix, and accepts -1 (off).
func TestValidateLimitsChecksThePerAddrCap(t *testing.T) {
	require.NoError(t, httpapi.Config{MaxConnsPerAddr: -1, MaxConnsPerAddrExempt: []netip.Prefix{netip.MustParsePrefix("::1/128")}}.ValidateLimits())
	err := httpapi.Config{MaxConnsPerAddr: -2, MaxConnsPerAddrExempt: []netip.Prefix{{}}}.ValidateLimits()
	require.Error(t, err)
	require.Contains(t, err.Error(), "MaxConnsPerAddr must be >= -1")
	require.Contains(t, err.Error(), "MaxConnsPerAddrExempt[0] is not a valid prefix")
}

// HTTP/2 connections (TLS, as browsers speak it) without a stream open
// are idle too: at the cap the one idle the longest makes room for a new
// client.
func TestIdleHTTP2ConnectionsMakeRoomForANewClient(t *testing.T) {
	evHook, evicted := evictedHook()
	api := connAPI(t, httpapi.Config{MaxConns: 2, Hooks: httpapi.Hooks{ConnEvicted: evHook}})
	ts := serveTracked(t, api, true)
	// h2Client is a client with its own connection from ip; local is set
	// to that connection's address when it is dialed.
	h2Client := func(ip string, local *string) *http.Client {
		cfg := ts.tls.Clone()
		cfg.NextProtos = []string{"h2"}
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
				c, err := d.DialContext(ctx, network, addr)
				if err == nil {
					*local = c.LocalAddr().String()
				}
				return c, err
			}}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	get := func(cl *http.Client) (*http.Response, error) {
		res, err := cl.Get("https://" + ts.addr + "/healthz")
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res, nil
	}
	locals := make([]string, 2)
	for i := range locals {
		res, err := get(h2Client("127.0.0.1", &locals[i]))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, 2, res.ProtoMajor)
		require.Eventually(t, func() bool {
			st, ok := ts.stateOf(locals[i])
			return ok && st == http.StateIdle
		}, 10*time.Second, time.Millisecond)
	}
	var newcomer string
	res, err := get(h2Client("127.0.0.2", &newcomer))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	evictions := evicted()
	require.Len(t, evictions, 1)
	require.Equal(t, locals[0], evictions[0].Remote, "the connection idle the longest was closed")
}

package httpapi

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPServer returns the http.Server agentd serves h with: the request
// timeouts of the Config (ReadHeaderTimeout, ReadTimeout, ResponseTimeout
// as WriteTimeout, IdleTimeout) and the server's error log going to the
// Config's Logger. The API's long routes lift the read and response
// timeouts for themselves (see [Config.ResponseTimeout]); other handlers
// mounted on h keep them. Serve it on [Server.Listen]'s listener, which
// caps connections: the server's ConnState tells that listener which
// connections are idle, so that at the cap it can close the one idle the
// longest for a newcomer. Whoever sets ConnState on the returned server
// must call the one it had.
func (s *Server) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.ResponseTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ConnState: trackConnState,
	}
}

// connKey is the request context key of the request's connection (set by
// the server [Server.HTTPServer] returns).
type connKey struct{}

// limitSendBuffer sets the kernel send buffer of the request's connection
// (when the server put it in ctx) to a 32nd of the stream buffer, between
// 64 and 256 KiB (128 KiB by default; Linux doubles it for its
// bookkeeping). That still carries 2.5 MB/s to a reader 100 ms away. The kernel would otherwise grow it up to
// net.ipv4.tcp_wmem's maximum (4 MiB by default): a client that does not
// read would take that much of the log (read, encoded, copied) before its
// writes block, at everyone else's expense.
func limitSendBuffer(ctx context.Context, streamBytes int64) {
	conn := ctx.Value(connKey{})
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn() // HTTPS: the TCP connection under TLS
	}
	c, ok := conn.(interface{ SetWriteBuffer(int) error })
	if !ok {
		return
	}
	_ = c.SetWriteBuffer(int(min(max(streamBytes/32, 64<<10), 256<<10)))
}

// Listen listens on network/addr (as net.Listen) and caps the connections
// it holds open at Config.MaxConns: see [Server.LimitListener].
func (s *Server) Listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("httpapi: listen on %s: %w", addr, err)
	}
	return s.LimitListener(ln), nil
}

// LimitListener wraps ln so that at most Config.MaxConns accepted
// connections are open at once, and at most Config.MaxConnsPerAddr from
// one client address. A connection is counted from its acceptance until it
// is closed. Safe for concurrent use, like any net.Listener.
//
// A new connection from an address that already holds MaxConnsPerAddr is
// refused: answered at once with a 503 problem (Retry-After: 1,
// Connection: close) and closed. IPv6 clients are counted by /64, the
// block one host or site gets; addresses in Config.MaxConnsPerAddrExempt
// and clients that are not IP (a Unix socket) are not counted per address.
//
// A new connection when all MaxConns slots are taken gets the slot of the
// connection that has been idle the longest (a keep-alive connection
// between requests), which is closed; connections that are reading a
// request, answering one, streaming or hijacked are never closed. Only
// when no connection is idle is the newcomer refused like above. Clients
// reopen a closed keep-alive connection, as they do after IdleTimeout, and
// retry a request they had just sent on it when it is idempotent. Knowing
// which connections are idle takes the ConnState of the server
// [Server.HTTPServer] returns (also over TLS); with another server every
// connection counts as busy.
//
// Refusals are counted with Hooks.ConnRefused (ConnRefusal.Reason says
// which cap), closed idle connections with Hooks.ConnEvicted, both before
// the connection is answered or closed; accepting goes on. So a flood of
// connections, or one address holding many, degrades to refusals for the
// flooder instead of exhausting the process's file descriptors or locking
// other clients out, and the connections served keep being served. The
// bookkeeping is bounded by the open connections: a count per client
// address holding one, an entry per idle connection.
func (s *Server) LimitListener(ln net.Listener) net.Listener {
	l := &capListener{Listener: ln, max: s.cfg.MaxConns, exempt: s.cfg.MaxConnsPerAddrExempt,
		refused: s.cfg.Hooks.ConnRefused, evicted: s.cfg.Hooks.ConnEvicted, log: s.log,
		byAddr: map[netip.Addr]int{}}
	if s.cfg.MaxConnsPerAddr > 0 {
		l.perAddr = s.cfg.MaxConnsPerAddr
	}
	return l
}

// refusalAnswer is the answer to a connection refused with detail.
func refusalAnswer(detail string) []byte {
	body := `{"type":"` + ProblemTypePrefix + `overloaded","title":"Service unavailable","status":503,` +
		`"detail":"` + detail + `","code":"overloaded"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\n" +
		"Connection: close\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body)
}

// The answers to a connection beyond the cap and beyond its address's cap.
var (
	refusal        = refusalAnswer("the server holds as many connections as it is configured to; retry shortly")
	refusalPerAddr = refusalAnswer("your address holds as many connections as one address may; reuse or close one, then retry")
)

// capListener counts connections in total and per client address, and
// keeps the idle ones in the order they became idle.
type capListener struct {
	net.Listener
	max     int
	perAddr int // 0: no per-address cap
	exempt  []netip.Prefix
	refused func(ConnRefusal)
	evicted func(ConnEviction)
	log     *slog.Logger
	warned  atomic.Int64 // unix seconds of the last log line about refusals
	logged  atomic.Int64 // unix seconds of the last log line about closed idle connections

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int // open connections by addrKey
	idle   list.List          // of *countedConn: the one idle the longest at the front
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cc, victim, idleFor, ref := l.admit(c)
		if ref != nil {
			l.refuse(c, *ref)
			continue
		}
		if victim != nil {
			l.evict(victim, idleFor)
		}
		return cc, nil
	}
}

// admit takes a slot for c. When every slot is taken it takes the slot of
// the connection idle the longest, returned as victim (with how long it
// was idle) for the caller to close. When c cannot be admitted it returns
// the refusal.
func (l *capListener) admit(c net.Conn) (cc, victim *countedConn, idleFor time.Duration, ref *ConnRefusal) {
	key := l.addrKey(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if key.IsValid() && l.byAddr[key] >= l.perAddr {
		return nil, nil, 0, &ConnRefusal{Remote: c.RemoteAddr().String(), Open: l.perAddr, Reason: "max_conns_per_addr"}
	}
	if l.open >= l.max {
		e := l.idle.Front()
		if e == nil {
			return nil, nil, 0, &ConnRefusal{Remote: c.RemoteAddr().String(), Open: l.max, Reason: "max_conns"}
		}
		victim = e.Value.(*countedConn)
		idleFor = time.Since(victim.idleSince)
		l.releaseLocked(victim)
	}
	l.open++
	if key.IsValid() {
		l.byAddr[key]++
	}
	return &countedConn{Conn: c, l: l, addr: key}, victim, idleFor, nil
}

// addrKey is what a connection from remote counts against for the
// per-address cap: its IP, an IPv6 address's /64. Invalid (not counted)
// when the cap is off, remote is exempt or not IP.
func (l *capListener) addrKey(remote net.Addr) netip.Addr {
	if l.perAddr == 0 {
		return netip.Addr{}
	}
	var a netip.Addr
	switch r := remote.(type) {
	case *net.TCPAddr:
		a = r.AddrPort().Addr()
	default:
		ap, err := netip.ParseAddrPort(remote.String())
		if err != nil {
			return netip.Addr{}
		}
		a = ap.Addr()
	}
	a = a.Unmap().WithZone("")
	for _, p := range l.exempt {
		if p.Contains(a) {
			return netip.Addr{}
		}
	}
	if a.Is6() {
		a = netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a
}

// refuse counts ref, then answers c with a 503 and closes it.
func (l *capListener) refuse(c net.Conn, ref ConnRefusal) {
	answer, msg := refusal, "connection refused: at the connection cap"
	if ref.Reason == "max_conns_per_addr" {
		answer, msg = refusalPerAddr, "connection refused: its address is at the per-address connection cap"
	}
	// Counted before the answer goes out, so that whoever sees the 503
	// also sees it counted.
	if now := time.Now().Unix(); l.warned.Load() != now {
		l.warned.Store(now)
		l.log.Warn(msg, "max_conns", l.max, "max_conns_per_addr", l.perAddr, "remote", ref.Remote)
	}
	if l.refused != nil {
		l.refused(ref)
	}
	// A fresh connection's send buffer is empty: this write does not
	// block, the deadline is a guard.
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write(answer)
	_ = c.Close()
}

// evict counts v, then closes it: its slot was given to a newcomer.
func (l *capListener) evict(v *countedConn, idleFor time.Duration) {
	remote := v.RemoteAddr().String()
	if now := time.Now().Unix(); l.logged.Load() != now {
		l.logged.Store(now)
		l.log.Info("idle connection closed: at the connection cap, a new connection takes its slot",
			"max_conns", l.max, "remote", remote, "idle", idleFor)
	}
	if l.evicted != nil {
		l.evicted(ConnEviction{Remote: remote, Idle: idleFor})
	}
	_ = v.Conn.Close() // the server's goroutine sees the read fail and ends
}

// releaseLocked gives c's slot back (once) and forgets it as idle. l.mu
// is held.
func (l *capListener) releaseLocked(c *countedConn) {
	if c.released {
		return
	}
	c.released = true
	l.open--
	if c.addr.IsValid() {
		if l.byAddr[c.addr]--; l.byAddr[c.addr] <= 0 {
			delete(l.byAddr, c.addr)
		}
	}
	if c.idleElem != nil {
		l.idle.Remove(c.idleElem)
		c.idleElem = nil
	}
}

// setState records st for c: an idle connection goes to the back of the
// idle list, any other state takes it off.
func (l *capListener) setState(c *countedConn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	if c.idleElem != nil {
		l.idle.Remove(c.idleElem)
		c.idleElem = nil
	}
	if st == http.StateIdle {
		c.idleSince = time.Now()
		c.idleElem = l.idle.PushBack(c)
	}
}

// trackConnState is the ConnState of [Server.HTTPServer]'s server: it
// tells a connection's capListener its state.
func trackConnState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*countedConn); ok {
		cc.l.setState(cc, st)
	}
}

// countedConn gives its slot back when closed.
type countedConn struct {
	net.Conn
	l    *capListener
	addr netip.Addr // the per-address key; invalid when not counted per address

	// Guarded by l.mu.
	released  bool
	idleElem  *list.Element // in l.idle while idle
	idleSince time.Time
}

// SetWriteBuffer sets the connection's kernel send buffer (when it is a
// TCP connection).
func (c *countedConn) SetWriteBuffer(n int) error {
	if b, ok := c.Conn.(interface{ SetWriteBuffer(int) error }); ok {
		return b.SetWriteBuffer(n)
	}
	return nil
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}

// maxConnsAllowed checks want (0 = the default) against the process's
// file descriptor limit and returns the cap to use: the default is
// DefaultMaxConns lowered to RLIMIT_NOFILE minus a headroom of a quarter
// of it (at least 256 descriptors, for NATS, the data directory, logs);
// an explicit want above that is an error naming both numbers.
func maxConnsAllowed(want int) (int, error) {
	lim := fdLimit()
	allowed := DefaultMaxConns
	if lim > 0 {
		allowed = int(lim - max(lim/4, 256))
	}
	switch {
	case allowed < 1:
		return 1, fmt.Errorf("httpapi: the process may open only %d files (RLIMIT_NOFILE), which leaves no room for HTTP connections: raise it (ulimit -n)", lim)
	case want == 0:
		return min(DefaultMaxConns, allowed), nil
	case want > allowed:
		return want, fmt.Errorf("httpapi: MaxConns %d is above the %d connections the file descriptor limit (RLIMIT_NOFILE %d) leaves room for: lower it or raise the limit (ulimit -n)", want, allowed, lim)
	}
	return want, nil
}

// bodyWatch wraps a request body: at its end it lifts the read deadline
// (the rest of the request is the handler's, bounded by ResponseTimeout
// or, on long routes, by per-write deadlines), and when the read deadline
// passes before the body has arrived it answers 408 itself and seals the
// response.
type bodyWatch struct {
	io.ReadCloser
	onEOF, onTimeout func()
	done             bool
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done {
		b.done = true
		switch {
		case errors.Is(err, io.EOF):
			b.onEOF()
		case errors.Is(err, os.ErrDeadlineExceeded):
			b.onTimeout()
		}
	}
	return n, err
}

// watchBody installs a bodyWatch on r (or lifts the read deadline at once
// when r has no body).
func (s *Server) watchBody(rec *recorder, rc *http.ResponseController, r *http.Request) {
	lift := func() { _ = rc.SetReadDeadline(time.Time{}) }
	if r.Body == nil || r.Body == http.NoBody || (r.ContentLength == 0 && len(r.TransferEncoding) == 0) {
		lift()
		return
	}
	r.Body = &bodyWatch{ReadCloser: r.Body, onEOF: lift, onTimeout: func() {
		if !rec.wrote {
			writeProblem(rec, newProblem(http.StatusRequestTimeout, "request-timeout", "Request timeout",
				fmt.Sprintf("the request body did not arrive within %s", s.cfg.ReadTimeout)).header("Connection", "close"))
		}
		rec.sealed = true
	}}
}

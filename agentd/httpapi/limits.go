package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
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
// caps connections.
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
// connections are open at once. A connection accepted beyond that is
// answered at once with a 503 problem (Retry-After: 1, Connection: close)
// and closed, and counted with Hooks.ConnRefused; accepting goes on. So a
// flood of connections (idle keep-alives, slow clients) degrades to
// refusals instead of exhausting the process's file descriptors, and the
// connections served keep being served. A connection counts until it is
// closed. Safe for concurrent use, like any net.Listener.
func (s *Server) LimitListener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, max: int64(s.cfg.MaxConns), hook: s.cfg.Hooks.ConnRefused, log: s.log}
}

// refusal is the answer to a connection beyond the cap.
var refusal = func() []byte {
	body := `{"type":"` + ProblemTypePrefix + `overloaded","title":"Service unavailable","status":503,` +
		`"detail":"the server holds as many connections as it is configured to; retry shortly","code":"overloaded"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\n" +
		"Connection: close\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body)
}()

type capListener struct {
	net.Listener
	max    int64
	open   atomic.Int64
	hook   func(ConnRefusal)
	log    *slog.Logger
	warned atomic.Int64 // unix seconds of the last log line about refusals
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); n <= l.max {
			return &countedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		// Counted before the answer goes out, so that whoever sees the
		// 503 also sees it counted.
		if now := time.Now().Unix(); l.warned.Load() != now {
			l.warned.Store(now)
			l.log.Warn("connection refused: at the connection cap", "max_conns", l.max, "remote", c.RemoteAddr().String())
		}
		if l.hook != nil {
			l.hook(ConnRefusal{Remote: c.RemoteAddr().String(), Open: int(l.max)})
		}
		// A fresh connection's send buffer is empty: this write does not
		// block, the deadline is a guard.
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write(refusal)
		_ = c.Close()
	}
}

// countedConn gives its slot back when closed (once).
type countedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
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
	c.once.Do(func() { c.l.open.Add(-1) })
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

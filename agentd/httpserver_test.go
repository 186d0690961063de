package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/serve"
	"github.com/convlog/convlog/internal/clienttest"
)

// serve's HTTP server takes its timeouts and connection caps from the
// --http-* flags and counts what the caps do in its Prometheus metrics:
// with --http-max-conns-per-addr=2 a third connection from one address is
// refused with 503, an exempt address is not held to it, and with
// --http-max-conns=3 full of idle keep-alive connections a new client
// still gets in, taking the slot of one of them.
func TestServeHTTPServerAppliesTheLimitFlags(t *testing.T) {
	ns := clienttest.New(t)
	cl := ns.Client
	var f httpLimitFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	require.NoError(t, fs.Parse([]string{"--http-max-conns=3", "--http-max-conns-per-addr=2",
		"--http-max-conns-per-addr-exempt=10.0.0.0/8,127.0.0.3", "--http-max-conns-per-addr-exempt=fd00::/8",
		"--http-read-timeout=3s", "--http-idle-timeout=4s", "--http-response-timeout=5s"}))
	require.NoError(t, f.validate())
	cfg := httpapi.Config{Client: cl, Auth: httpapi.Auth{Disabled: true}}
	f.apply(&cfg)
	require.Equal(t, 3, cfg.MaxConns)
	require.Equal(t, 2, cfg.MaxConnsPerAddr)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.3/32"),
		netip.MustParsePrefix("fd00::/8")}, cfg.MaxConnsPerAddrExempt)
	reg := prometheus.NewRegistry()
	cfg.Hooks = serve.NewMetrics(reg).HTTPHooks()
	api, err := httpapi.New(cfg)
	require.NoError(t, err)
	ln, err := api.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := api.HTTPServer(api.Handler())
	require.Equal(t, 3*time.Second, srv.ReadTimeout)
	require.Equal(t, 4*time.Second, srv.IdleTimeout)
	require.Equal(t, 5*time.Second, srv.WriteTimeout)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	addr := ln.Addr().String()

	for range 2 {
		require.Equal(t, http.StatusOK, healthzFrom(t, addr, "127.0.0.1", true))
	}
	require.Equal(t, http.StatusServiceUnavailable, healthzFrom(t, addr, "127.0.0.1", false),
		"a third connection from one address, refused before any request")
	require.Equal(t, http.StatusOK, healthzFrom(t, addr, "127.0.0.3", true), "the exempt address")
	// All three slots are held by idle connections: a new client takes
	// the slot of one of them (once the server has seen them idle).
	require.Eventually(t, func() bool {
		status, err := tryHealthz(addr, "127.0.0.3", true, nil)
		return err == nil && status == http.StatusOK
	}, 10*time.Second, 5*time.Millisecond, "a new client at the cap full of idle connections")

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Contains(t, rec.Body.String(), `convlog_http_connections_refused_total{reason="max_conns_per_addr"} 1`+"\n")
	require.Regexp(t, `(?m)^convlog_http_connections_evicted_total [1-9]`, rec.Body.String())
}

// healthzFrom opens a connection from ip to addr, kept open until the test
// ends, and returns the status of the answer to GET /healthz on it (send)
// or of the answer the server sends unasked (a refusal).
func healthzFrom(t *testing.T, addr, ip string, send bool) int {
	t.Helper()
	status, err := tryHealthz(addr, ip, send, t.Cleanup)
	require.NoError(t, err)
	return status
}

// tryHealthz is healthzFrom that returns errors; the connection is closed
// on return unless keep takes its closing.
func tryHealthz(addr, ip string, send bool, keep func(func())) (int, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	if keep != nil {
		keep(func() { _ = c.Close() })
	} else {
		defer c.Close()
	}
	if send {
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return 0, err
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// --check reports limits the process cannot honour, naming the flags.
func TestServeCheckRejectsImpossibleLimits(t *testing.T) {
	var f httpLimitFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	require.NoError(t, fs.Parse([]string{"--http-max-conns=100000000", "--http-stream-total-bytes=10", "--http-read-timeout=-1s", "--http-max-audits=-1"}))
	err := f.validate()
	require.Error(t, err)
	for _, want := range []string{"--http-*", "MaxConns 100000000", "StreamTotalBytes (10)", "ReadTimeout must be >= 0", "MaxAudits must be >= 0"} {
		require.Contains(t, err.Error(), want)
	}
}

// A per-address cap below -1 fails --check, and an exempt entry that is
// neither an address nor a prefix fails at parsing, naming the flag.
func TestServeCheckRejectsABadPerAddrCap(t *testing.T) {
	var f httpLimitFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	require.NoError(t, fs.Parse([]string{"--http-max-conns-per-addr=-2"}))
	err := f.validate()
	require.Error(t, err)
	require.Contains(t, err.Error(), "MaxConnsPerAddr must be >= -1")

	var g httpLimitFlags
	fs = pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	err = fs.Parse([]string{"--http-max-conns-per-addr-exempt=10.0.0.5,proxy.internal"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "--http-max-conns-per-addr-exempt")
	require.Contains(t, err.Error(), `"proxy.internal" is neither an IP address nor a CIDR prefix`)
}

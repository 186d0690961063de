package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/natstest"
)

// serve's HTTP server takes its timeouts and connection cap from the
// --http-* flags: with --http-max-conns=2 a third open connection is
// refused with 503.
func TestServeHTTPServerAppliesTheLimitFlags(t *testing.T) {
	ns := natstest.Run(t)
	cl, err := client.New(context.Background(), ns.NC, client.Config{Provision: true})
	require.NoError(t, err)
	var f httpLimitFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	require.NoError(t, fs.Parse([]string{"--http-max-conns=2", "--http-read-timeout=3s", "--http-idle-timeout=4s", "--http-response-timeout=5s"}))
	require.NoError(t, f.validate())
	cfg := httpapi.Config{Client: cl, Auth: httpapi.Auth{Disabled: true}}
	f.apply(&cfg)
	api, err := httpapi.New(cfg)
	require.NoError(t, err)
	srv, ln, err := newHTTPServer(api, api.Handler(), "127.0.0.1:0")
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, srv.ReadTimeout)
	require.Equal(t, 4*time.Second, srv.IdleTimeout)
	require.Equal(t, 5*time.Second, srv.WriteTimeout)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })

	status := func(c net.Conn) int {
		_, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		open = append(open, c)
		require.Equal(t, http.StatusOK, status(c))
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	open = append(open, c)
	require.Equal(t, http.StatusServiceUnavailable, status(c))
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

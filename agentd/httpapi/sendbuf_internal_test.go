package httpapi

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The send buffer of a streaming response is capped also when the
// connection is TLS (HTTPS, agentd --http-tls-cert): limitSendBuffer finds
// the TCP connection under it.
func TestSendBufferIsCappedUnderTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	raw, err := ln.Accept()
	require.NoError(t, err)
	defer raw.Close()
	sndbuf := func() int {
		sc, err := raw.(*net.TCPConn).SyscallConn()
		require.NoError(t, err)
		var n int
		require.NoError(t, sc.Control(func(fd uintptr) {
			n, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
		}))
		require.NoError(t, err)
		return n
	}
	before := sndbuf()
	ctx := context.WithValue(context.Background(), connKey{}, tls.Server(&countedConn{Conn: raw}, &tls.Config{}))
	limitSendBuffer(ctx, 4<<20) // 4 MiB stream buffer: a 128 KiB send buffer
	after := sndbuf()
	require.NotEqual(t, before, after, "the send buffer was set")
	require.Equal(t, 2*128<<10, after, "Linux reports twice what was set")
}

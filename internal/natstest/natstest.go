// Package natstest starts real, in-process NATS JetStream servers for tests:
// one server ([Run]) or a cluster of embedded servers ([RunCluster]), each
// in t.TempDir() and shut down by t.Cleanup.
package natstest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/provision"
)

// Server is a running test server with a connection.
type Server struct {
	*embedded.Server
	NC *nats.Conn
	JS jetstream.JetStream
}

// Run starts one JetStream server listening on a random loopback port and
// connects to it. The server and connection are closed at cleanup.
func Run(t testing.TB) *Server {
	t.Helper()
	return RunConfig(t, embedded.Config{})
}

// RunConfig is [Run] with a server configured by cfg (a StoreDir left
// empty is a new t.TempDir()).
func RunConfig(t testing.TB, cfg embedded.Config) *Server {
	t.Helper()
	if cfg.StoreDir == "" {
		cfg.StoreDir = t.TempDir()
	}
	s, err := embedded.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return &Server{Server: s, NC: nc, JS: js}
}

// Provisioned is [Run] plus [provision.Ensure] with cfg.
func Provisioned(t testing.TB, cfg provision.Config) (*Server, provision.Resources) {
	t.Helper()
	s := Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := provision.Ensure(ctx, s.JS, cfg)
	require.NoError(t, err)
	return s, r
}

// Cluster is a running cluster of embedded servers.
type Cluster struct {
	Servers []*embedded.Server
	// URLs are the client URLs of every node.
	URLs []string
}

// Connect connects to every node's URL.
func (c *Cluster) Connect(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	url := ""
	for i, u := range c.URLs {
		if i > 0 {
			url += ","
		}
		url += u
	}
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// RunCluster starts an n-node JetStream cluster of embedded servers and
// waits until JetStream answers through it.
func RunCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		ports[i] = FreePort(t)
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[i])
	}
	c := &Cluster{}
	for i := 0; i < n; i++ {
		s, err := embedded.Start(embedded.Config{
			StoreDir:   t.TempDir(),
			ServerName: fmt.Sprintf("n%d", i+1),
			Cluster:    &embedded.ClusterConfig{Name: "convlog-test", Port: ports[i], Routes: routes},
		})
		require.NoError(t, err)
		t.Cleanup(s.Shutdown)
		c.Servers = append(c.Servers, s)
		c.URLs = append(c.URLs, s.ClientURL())
	}
	_, js := c.Connect(t)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "cluster JetStream not ready")
	return c
}

// FreePort returns a loopback TCP port that was free a moment ago, for a
// server a test starts later (a cluster route, a child process). It is
// picked below the kernel's ephemeral range (net.ipv4.ip_local_port_range,
// 32768-60999 by default), so that no outgoing connection made meanwhile
// (a route dialing its peers, a client) can be given the same port as its
// local end: a port from Listen(":0") comes from that range, and one
// cluster test failed at start with "address already in use" because of
// it. Ports it returned before in this process are not returned again.
// Safe for concurrent use.
func FreePort(t testing.TB) int {
	t.Helper()
	lo := ephemeralLow()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := 10_000 + rand.IntN(lo-10_000)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatalf("natstest: no free port in 10000-%d after 1,000 tries", lo-1)
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow is the lowest port of the kernel's ephemeral range, 32768
// when it cannot be read (Linux's default; other systems' ranges start
// higher).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 11_000 {
		return 32768
	}
	return lo
}

// FilesContaining lists the files under dir (a server's store directory,
// a data directory) whose bytes contain needle: how tests show that some
// content or key is, or is no longer, anywhere on disk. Files that vanish
// while it walks (blocks compacted) are skipped.
func FilesContaining(t testing.TB, dir string, needle []byte) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			out = append(out, p)
		}
		return nil
	}))
	return out
}

// Package natstest starts real, in-process NATS JetStream servers for tests:
// one server ([Run]) or a cluster of embedded servers ([RunCluster]), each
// in t.TempDir() and shut down by t.Cleanup.
package natstest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/ports"
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

// FreePort returns a free loopback port below the kernel's ephemeral
// range (ports.Free), failing t when there is none.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := ports.Free()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return p
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

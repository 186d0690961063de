package agenttest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
)

// Demo is the agents of the tests: agent "demo", the offline model
// (tokenDelay between its tokens) with [ClockTools].
func Demo(t testing.TB, tokenDelay time.Duration) map[string]*worker.Agent {
	t.Helper()
	off, err := model.NewOffline(model.OfflineConfig{TokenDelay: tokenDelay})
	require.NoError(t, err)
	return map[string]*worker.Agent{"demo": {Provider: off, Tools: ClockTools{}}}
}

// RunWorkers runs a worker pool configured by cfg on c and nc and returns
// once it consumes; t fails if it stops before. The test's cleanup stops
// it and waits for it.
func RunWorkers(t testing.TB, c *client.Client, nc *nats.Conn, cfg worker.Config) *worker.Pool {
	t.Helper()
	pool, err := worker.New(c, nc, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = pool.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-pool.Ready():
	case <-done:
		t.Fatal("worker pool stopped before it was ready")
	}
	return pool
}

package serve_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/convlog/convlog/agentd/serve"
	"github.com/convlog/convlog/internal/testlog"
)

// Every goroutine Run starts has ended when Run returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDefaultConfigIsValid(t *testing.T) {
	c := serve.DefaultConfig()
	require.NoError(t, c.Validate())
}

// Validate names every problem at once, by the flag that sets it.
func TestValidateReportsEveryProblem(t *testing.T) {
	var c serve.Config
	c.Workers = -1
	c.HTTP.Addr = "0.0.0.0:8080"
	c.HTTP.TLSCert = "cert.pem"
	c.GCPercent, c.MemoryLimit = -1, -1
	err := c.Validate()
	require.Error(t, err)
	for _, want := range []string{"--data-dir or --nats-url is required", "--replicas must be 1..5, got 0",
		"--workers must be >= 0, got -1", "--grace must be > 0", "--http-tls-cert and --http-tls-key go together",
		`--http-addr "0.0.0.0:8080" is not a loopback address and no API keys are set`,
		"--gc-percent -1 turns the collector off until the soft memory limit, and --memory-limit-mib -1 sets none"} {
		require.Contains(t, err.Error(), want)
	}
}

// Run on a fresh data directory starts every part, answers over HTTP with
// the API, the metrics and the web page, and stops when its context ends,
// returning nil.
func TestRunServesUntilItsContextEnds(t *testing.T) {
	c := serve.DefaultConfig()
	c.NATS.DataDir = t.TempDir()
	c.HTTP.Addr = "127.0.0.1:0"
	c.Workers = 1
	out := &testlog.Buffer{}
	c.Out = out
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve.Run(ctx, c) }()

	base := regexp.MustCompile(`HTTP API:   (http://\S+)/v1/threads`)
	var url string
	require.Eventually(t, func() bool {
		if m := base.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
			return true
		}
		return false
	}, time.Minute, 10*time.Millisecond, "the banner names the HTTP API")
	require.Contains(t, out.String(), "audit key:")
	require.Contains(t, out.String(), `Try it: the agent "demo" answers`)
	for path, want := range map[string]string{"/healthz": "", "/metrics": "convlog_storage_full 0", "/": "<html", "/openapi.json": "openapi"} {
		res, err := http.Get(url + path)
		require.NoError(t, err, path)
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, string(b), want, path)
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
}

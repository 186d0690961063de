package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
)

// runner is a long-lived part with Run(ctx).
type runner interface {
	Run(ctx context.Context) error
}

func newProjector(cl *client.Client, cn *conn, f *serveFlags, logger *slog.Logger, m *metrics) (runner, error) {
	return idle{}, nil
}

type idle struct{}

func (idle) Run(ctx context.Context) error { <-ctx.Done(); return nil }

func newHTTPHandler(ctx context.Context, cl *client.Client, cn *conn, f *serveFlags, logger *slog.Logger, agents []string) (http.Handler, error) {
	return http.NotFoundHandler(), nil
}

func buildOpenAI(s agentSpec) (model.Provider, error) {
	return nil, errors.New("openai provider not wired yet")
}

func buildTools(names []string) (worker.Tools, error) {
	return nil, nil
}

// startLocalProjector runs the projector in this process (import with
// --data-dir) and returns a function that waits until it has caught up
// with the stream, then stops it.
func startLocalProjector(ctx context.Context, e *cliEnv) (func() error, error) {
	return func() error { return nil }, nil
}

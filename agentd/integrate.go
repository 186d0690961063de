package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/projector"
)

// runner is a long-lived part with Run(ctx).
type runner interface {
	Run(ctx context.Context) error
}

func newProjector(cl *client.Client, cn *conn, f *serveFlags, logger *slog.Logger, m *metrics) (runner, error) {
	rc := cl.Config().Resources
	cfg := projector.Config{Stream: rc.Stream, SubjectPrefix: rc.SubjectPrefix, SnapshotBucket: rc.SnapshotBucket,
		IndexBucket: rc.IndexBucket, Logger: logger.With("component", "projector")}
	if m != nil {
		cfg.OnApply = func(a projector.Applied) {
			m.projected.Inc()
			m.projectionLag.Observe(a.Lag.Seconds())
			if a.Code != "" {
				m.rejections.WithLabelValues(string(a.Code)).Inc()
			}
		}
	}
	return projector.New(cl.JetStream(), cfg)
}

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
	rc := e.c.Config().Resources
	cfg := projector.Config{Stream: rc.Stream, SubjectPrefix: rc.SubjectPrefix, SnapshotBucket: rc.SnapshotBucket,
		IndexBucket: rc.IndexBucket, Logger: e.logger.With("component", "projector")}
	p, err := projector.New(e.c.JetStream(), cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("projector: %w", err)
	}
	return func() error {
		defer func() { cancel(); <-done }()
		return waitProjected(ctx, e.c.JetStream(), rc.Stream, projector.DefaultConfig().Durable)
	}, nil
}

// waitProjected waits until the projector's durable consumer has delivered
// and acknowledged every message of the stream.
func waitProjected(ctx context.Context, js jetstream.JetStream, stream, durable string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		cons, err := js.Consumer(ctx, stream, durable)
		if err == nil {
			info, err := cons.Info(ctx)
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("projector did not catch up within 5 minutes")
}

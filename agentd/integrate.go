package main

import (
	"context"
	"fmt"
	"time"

	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
)

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
		// The projector's consumer has delivered and acknowledged every
		// message of the stream, or 5 minutes have passed.
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
		defer wcancel()
		if err := provision.WaitConsumerDrained(wctx, e.c.JetStream(), rc.Stream, projector.DefaultConfig().Durable); err != nil {
			return fmt.Errorf("projector did not catch up: %w", err)
		}
		return nil
	}, nil
}

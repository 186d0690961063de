package projector

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/internal/provision"
)

// LocalCatchUpTimeout bounds how long the function [StartLocal] returns
// waits for the projector to catch up, when its ctx has no deadline.
const LocalCatchUpTimeout = 5 * time.Minute

// StartLocal runs a projector for cfg on js in this process, for a
// command that writes a stream with no agentd serve running (agentd
// import --data-dir). It returns once the projector is [Projector.Ready],
// or Run's error when Run ends before that.
//
// The returned function waits until the projector's durable consumer has
// delivered and acknowledged every message of the stream (at most
// [LocalCatchUpTimeout] when ctx has no deadline), then stops the
// projector and waits for its goroutine; it is called once. The
// projector runs on a context of its own, so a cancelled ctx ends the wait
// but the stop still happens through the returned function.
func StartLocal(ctx context.Context, js jetstream.JetStream, cfg Config) (func() error, error) {
	p, err := New(js, cfg)
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
		wctx, wcancel := ctx, context.CancelFunc(func() {})
		if _, ok := ctx.Deadline(); !ok {
			wctx, wcancel = context.WithTimeout(ctx, LocalCatchUpTimeout)
		}
		defer wcancel()
		if err := provision.WaitConsumerDrained(wctx, js, p.cfg.Stream, p.cfg.Durable); err != nil {
			return fmt.Errorf("projector did not catch up: %w", err)
		}
		return nil
	}, nil
}

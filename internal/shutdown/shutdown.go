// Package shutdown gives a long-lived component with a Run(ctx) method a
// Shutdown(ctx) method with http.Server's contract: stop, then wait for
// the work in flight until ctx ends.
package shutdown

import (
	"context"
	"fmt"
	"sync"
)

// Gate ties one Run to Shutdown. The zero value is ready to use; a Gate
// must not be copied after first use. Its methods are safe for concurrent
// use.
type Gate struct {
	mu       sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{}
	shutdown bool
}

// Begin returns the context Run works under (ctx, cancelled also by
// Shutdown; already cancelled when Shutdown came first) and end, which Run
// must call when it returns.
func (g *Gate) Begin(ctx context.Context) (run context.Context, end func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	run, g.cancel = context.WithCancel(ctx)
	if g.shutdown {
		g.cancel()
	}
	done := make(chan struct{})
	g.done = done
	var once sync.Once
	return run, func() { once.Do(func() { g.cancel(); close(done) }) }
}

// Shutdown stops Run as cancelling its context would and waits until Run
// has returned (nil) or ctx ends (ctx's error, wrapped; Run goes on
// stopping). Called before Run, it makes Run return at once. Calling it
// again waits again.
func (g *Gate) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.shutdown = true
	cancel, done := g.cancel, g.done
	g.mu.Unlock()
	if cancel == nil {
		return nil // Run has not begun: it will stop at once
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutdown: still stopping: %w", ctx.Err())
	}
}

// Requested reports whether Shutdown was called. Run checks it after Begin
// to return at once (nil) when Shutdown came first.
func (g *Gate) Requested() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shutdown
}

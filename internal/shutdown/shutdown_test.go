package shutdown_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/shutdown"
)

// Shutdown cancels Run's context and waits until Run has returned; a
// Shutdown whose own context ends first says so; one before Run makes Run
// stop at once.
func TestShutdownWaitsForRun(t *testing.T) {
	t.Run("waits for Run to return", func(t *testing.T) {
		var g shutdown.Gate
		returned := make(chan struct{})
		release := make(chan struct{})
		go func() {
			ctx, end := g.Begin(context.Background())
			defer end()
			<-ctx.Done()
			<-release // work in flight
			close(returned)
		}()
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			return errors.Is(g.Shutdown(ctx), context.DeadlineExceeded)
		}, 5*time.Second, 10*time.Millisecond, "Shutdown returns before Run while Run works")
		close(release)
		require.NoError(t, g.Shutdown(context.Background()))
		select {
		case <-returned:
		default:
			t.Fatal("Shutdown returned before Run did")
		}
	})
	t.Run("before Run, Run stops at once", func(t *testing.T) {
		var g shutdown.Gate
		require.NoError(t, g.Shutdown(context.Background()))
		ctx, end := g.Begin(context.Background())
		defer end()
		require.Error(t, ctx.Err())
	})
}

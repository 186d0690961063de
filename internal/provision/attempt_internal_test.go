package provision

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// attempt gives each call its own attempt timeout, twice the one before
// up to 8 times the first, and calls again only after a timeout of that
// attempt; another error, or the end of the caller's context, ends it.
// once makes one call bounded by the attempt timeout.
func TestAttemptAsksAgainOnlyAfterItsOwnTimeout(t *testing.T) {
	const first = 40 * time.Millisecond
	c := Config{AttemptTimeout: first}
	waitOut := func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }
	t.Run("each attempt waits twice as long as the one before, up to 8 times the first", func(t *testing.T) {
		var waits []time.Duration
		v, err := attempt(context.Background(), c, func(ctx context.Context) (int, error) {
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			waits = append(waits, time.Until(dl))
			if len(waits) < 6 {
				return waitOut(ctx)
			}
			return 7, nil
		})
		require.NoError(t, err)
		require.Equal(t, 7, v)
		require.Len(t, waits, 6)
		for i, want := range []time.Duration{first, 2 * first, 4 * first, 8 * first, 8 * first, 8 * first} {
			require.InDelta(t, want, waits[i], float64(first/2), "attempt %d", i+1)
		}
	})
	t.Run("an error that is not a timeout is returned at once", func(t *testing.T) {
		calls := 0
		boom := errors.New("boom")
		_, err := attempt(context.Background(), c, func(context.Context) (int, error) { calls++; return 0, boom })
		require.ErrorIs(t, err, boom)
		require.Equal(t, 1, calls)
	})
	t.Run("the caller's deadline ends the attempts", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*first)
		defer cancel()
		calls := 0
		_, err := attempt(ctx, c, func(ctx context.Context) (int, error) { calls++; return waitOut(ctx) })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Error(t, ctx.Err(), "ended by the caller's deadline")
		require.GreaterOrEqual(t, calls, 2)
	})
	t.Run("a context without deadline gets DefaultRequestTimeout", func(t *testing.T) {
		_, err := attempt(context.Background(), Config{AttemptTimeout: time.Hour}, func(ctx context.Context) (int, error) {
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			require.InDelta(t, DefaultRequestTimeout, time.Until(dl), float64(time.Second))
			return 0, nil
		})
		require.NoError(t, err)
	})
	t.Run("once makes one call bounded by the attempt timeout", func(t *testing.T) {
		calls := 0
		start := time.Now()
		_, err := once(context.Background(), c, func(ctx context.Context) (int, error) { calls++; return waitOut(ctx) })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 1, calls)
		require.Less(t, time.Since(start), 8*first)
	})
}

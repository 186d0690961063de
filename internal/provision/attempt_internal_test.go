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
// attempt; another error ends it (the end of the caller's context too:
// directget's tests of Attempts, which attempt runs). once makes one call
// bounded by the attempt timeout.
func TestAttemptAsksAgainOnlyAfterItsOwnTimeout(t *testing.T) {
	const first = 40 * time.Millisecond
	c := Config{AttemptTimeout: first}
	waitOut := func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }
	t.Run("each attempt waits twice as long as the one before, up to 8 times the first", func(t *testing.T) {
		// An attempt's context is made after the previous call returned and
		// before this call starts, so its deadline lies between those two
		// instants plus the attempt's timeout, however late the scheduler
		// runs either.
		var deadlines, starts, ends []time.Time
		ends = append(ends, time.Now())
		v, err := attempt(context.Background(), c, func(ctx context.Context) (int, error) {
			starts = append(starts, time.Now())
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			deadlines = append(deadlines, dl)
			if len(deadlines) < 6 {
				_, err := waitOut(ctx)
				ends = append(ends, time.Now())
				return 0, err
			}
			return 7, nil
		})
		require.NoError(t, err)
		require.Equal(t, 7, v)
		require.Len(t, deadlines, 6)
		for i, want := range []time.Duration{first, 2 * first, 4 * first, 8 * first, 8 * first, 8 * first} {
			require.GreaterOrEqual(t, deadlines[i].Sub(ends[i]), want, "attempt %d waits no less", i+1)
			require.LessOrEqual(t, deadlines[i].Sub(starts[i]), want, "attempt %d waits no more", i+1)
		}
	})
	t.Run("an error that is not a timeout is returned at once", func(t *testing.T) {
		calls := 0
		boom := errors.New("boom")
		_, err := attempt(context.Background(), c, func(context.Context) (int, error) { calls++; return 0, boom })
		require.ErrorIs(t, err, boom)
		require.Equal(t, 1, calls)
	})
	t.Run("a context without deadline gets DefaultRequestTimeout", func(t *testing.T) {
		start := time.Now()
		_, err := attempt(context.Background(), Config{AttemptTimeout: time.Hour}, func(ctx context.Context) (int, error) {
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			require.GreaterOrEqual(t, dl.Sub(start), DefaultRequestTimeout)
			require.LessOrEqual(t, time.Until(dl), DefaultRequestTimeout)
			return 0, nil
		})
		require.NoError(t, err)
	})
	t.Run("once makes one call bounded by the attempt timeout", func(t *testing.T) {
		calls := 0
		start := time.Now()
		_, err := once(context.Background(), c, func(ctx context.Context) (int, error) {
			calls++
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			require.GreaterOrEqual(t, dl.Sub(start), first)
			require.LessOrEqual(t, time.Until(dl), first)
			return waitOut(ctx)
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 1, calls)
	})
}

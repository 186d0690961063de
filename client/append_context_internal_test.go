package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

// requireEnds waits for ctx to end, failing the test if it does not within
// a generous bound.
func requireEnds(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt context did not end")
	}
}

func TestAttemptContextEndsAtItsDeadline(t *testing.T) {
	a := attemptContext(context.WithValue(context.Background(), ctxKey{}, "v"), time.Millisecond)
	defer a.release()
	requireEnds(t, a)
	require.ErrorIs(t, a.Err(), context.DeadlineExceeded)
	require.Equal(t, "v", a.Value(ctxKey{}))
	d, ok := a.Deadline()
	require.True(t, ok)
	require.False(t, d.IsZero())
}

func TestAttemptContextEndsWithItsParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	a := attemptContext(parent, time.Hour)
	defer a.release()
	require.NoError(t, a.Err())
	cancel()
	requireEnds(t, a)
	require.ErrorIs(t, a.Err(), context.Canceled)
}

func TestAttemptContextOfAnEndedParentIsEnded(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	cancel()
	a := attemptContext(parent, time.Hour)
	defer a.release()
	requireEnds(t, a)
	require.ErrorIs(t, a.Err(), context.Canceled)
}

func TestAttemptContextTakesTheEarlierDeadline(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	pd, _ := parent.Deadline()
	a := attemptContext(parent, time.Hour)
	defer a.release()
	d, _ := a.Deadline()
	require.Equal(t, pd, d)
	requireEnds(t, a)
	require.ErrorIs(t, a.Err(), context.DeadlineExceeded)

	c := &Client{cfg: Config{Timeout: 40 * time.Millisecond}}
	call, cc := c.withCallTimeout(context.Background())
	defer cc.stop()
	b := attemptContext(call, time.Hour)
	defer b.release()
	d, _ = b.Deadline()
	require.Equal(t, cc.deadline, d)
}

// A released attempt context that had not ended is reused, and a reused
// one ends as a new one does: at its own deadline or with its own parent,
// not with those of an earlier use.
func TestAttemptContextReusedAfterReleaseEndsOnItsOwn(t *testing.T) {
	for range 100 {
		parent, cancel := context.WithCancel(context.Background())
		a := attemptContext(parent, time.Hour)
		require.NoError(t, a.Err())
		a.release()
		cancel() // after release: must not end a later use
	}
	a := attemptContext(context.Background(), time.Hour)
	select {
	case <-a.Done():
		t.Fatal("a reused attempt context was ended by an earlier use's parent")
	default:
	}
	require.NoError(t, a.Err())
	a.release()

	b := attemptContext(context.Background(), time.Millisecond)
	defer b.release()
	requireEnds(t, b)
	require.ErrorIs(t, b.Err(), context.DeadlineExceeded)

	parent, cancel := context.WithCancel(context.Background())
	c := attemptContext(parent, time.Hour)
	defer c.release()
	cancel()
	requireEnds(t, c)
	require.ErrorIs(t, c.Err(), context.Canceled)
}

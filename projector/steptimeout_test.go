package projector_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// StepTimeout is one budget over a step's calls to the server: a step
// whose budget is spent before the server answers fails with
// context.DeadlineExceeded, is reported as FailureStep and writes nothing
// (here the budget is spent before the first call, so every attempt
// fails, whatever nats.go's default timeout per call).
func TestStepFailsWhenItsBudgetIsSpent(t *testing.T) {
	e := newEnv(t)
	var (
		mu       sync.Mutex
		failures []projector.Failure
	)
	e.start(t, projector.Config{StepTimeout: time.Nanosecond, OnFailure: func(f projector.Failure) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, f)
	}})
	c := &clock{t: time.Unix(1700000000, 0)}
	seq := e.publish(t, c.ev("acme", "slow", events.ThreadCreated{Title: "hello"}))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(failures) > 0
	}, 10*time.Second, 5*time.Millisecond, "the step's failure is reported")
	mu.Lock()
	f := failures[0]
	mu.Unlock()
	require.Equal(t, projector.FailureStep, f.Reason)
	require.Equal(t, "slow", f.Thread)
	require.Equal(t, seq, f.Seq)
	require.ErrorIs(t, f.Err, context.DeadlineExceeded)
	_, err := e.snaps.LoadHead(context.Background(), "acme", "slow")
	require.ErrorIs(t, err, snapstore.ErrNoSnapshot, "a failed step writes no head")
}

// When Run's context has a deadline, that deadline bounds every step and
// StepTimeout does not apply (a default timeout applies only when the
// caller's context has none).
func TestRunDeadlineBoundsStepsInsteadOfStepTimeout(t *testing.T) {
	e := newEnv(t)
	p, err := projector.New(e.js, projector.Config{StepTimeout: time.Nanosecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-p.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("projector stopped before it was ready: %v", err)
	}
	c := &clock{t: time.Unix(1700000000, 0)}
	e.publish(t, c.ev("acme", "t", events.ThreadCreated{Title: "hello"}))
	last := e.publish(t, c.ev("acme", "t", events.UserMessage{Content: events.Text("hi")}))
	e.waitVersion(t, "acme", "t", last)
}

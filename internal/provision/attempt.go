package provision

import (
	"context"
	"time"

	"github.com/convlog/convlog/internal/directget"
)

// DefaultAttemptTimeout is the default of [Config.AttemptTimeout]: how
// long the first attempt of a JetStream API request waits for its reply
// before the request is made again. Creating or updating a stream is a
// proposal to the cluster's meta group and, for a new stream, the
// election of its own group: well under a second on a healthy cluster.
// No reply within this time means the request was lost (NATS does not
// resend one: a recovering cluster can leave a request unanswered).
const DefaultAttemptTimeout = 5 * time.Second

// DefaultRequestTimeout bounds a request, its attempts included, when
// the caller's context has no deadline.
const DefaultRequestTimeout = 30 * time.Second

// attempt calls f until it returns anything but a timeout of its own
// attempt, as [directget.Attempts] does (each call gets a context that
// ends after the attempt timeout, c's, each retry twice as long as the one
// before, up to 8 times the first, or with ctx), and returns f's last
// result: a success, an error that is not a timeout, or, when ctx ends,
// f's error. When ctx has no deadline, the attempts end after
// DefaultRequestTimeout. f's requests must be safe to make again.
func attempt[T any](ctx context.Context, c Config, f func(context.Context) (T, error)) (T, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	var v T
	err := directget.Attempts(ctx, c.attemptTimeout(), func(ctx context.Context) error {
		var err error
		v, err = f(ctx)
		return err
	})
	return v, err
}

// once calls f with a context that ends after c's attempt timeout (or
// with ctx): a single bounded attempt, for a request that must not be
// made twice or that a poll makes again anyway.
func once[T any](ctx context.Context, c Config, f func(context.Context) (T, error)) (T, error) {
	actx, cancel := context.WithTimeout(ctx, c.attemptTimeout())
	defer cancel()
	return f(actx)
}

// attemptTimeout is c.AttemptTimeout, or DefaultAttemptTimeout when that
// is not positive.
func (c Config) attemptTimeout() time.Duration {
	if c.AttemptTimeout <= 0 {
		return DefaultAttemptTimeout
	}
	return c.AttemptTimeout
}

package directget

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultAttemptTimeout is how long the first attempt of a request waits
// for the server's reply (a batch: for each next reply) before the
// request is made again. A direct get is answered by a stream replica
// from its store, normally within a millisecond; no reply within this
// time means the request was lost (NATS does not resend one: a cluster
// whose node just restarted, or whose group is electing a leader, can
// leave a request unanswered).
const DefaultAttemptTimeout = 2 * time.Second

// maxWaitFactor bounds how much longer than the first an attempt waits.
const maxWaitFactor = 8

// Option is a setting of one call of this package.
type Option func(*settings)

type settings struct {
	attempt time.Duration
}

// WithAttemptTimeout sets the first attempt's timeout of a call (see
// [Attempts]); d <= 0 means [DefaultAttemptTimeout].
func WithAttemptTimeout(d time.Duration) Option {
	return func(s *settings) { s.attempt = d }
}

// settle applies opts over the defaults.
func settle(opts []Option) settings {
	s := settings{}
	for _, o := range opts {
		o(&s)
	}
	if s.attempt <= 0 {
		s.attempt = DefaultAttemptTimeout
	}
	return s
}

// nextWait is the attempt timeout after an attempt of wait timed out:
// twice wait, at most maxWaitFactor times first. A server that is slow
// rather than deaf gets the time it needs after a few attempts.
func nextWait(wait, first time.Duration) time.Duration {
	return min(2*wait, maxWaitFactor*first)
}

// Attempts calls f until it returns anything but a timeout of its own
// attempt: each call gets a context of its own that ends after the
// attempt timeout (first, or [DefaultAttemptTimeout] when first <= 0;
// each retry twice as long as the one before, up to 8 times first) or
// with ctx, whichever comes first. f's request must be safe to make
// again (a read, or a create-or-update of a configuration). It returns
// f's last error: nil, an error that is not a timeout ([IsTimeout]), or,
// when ctx ends, f's error wrapping ctx's. Attempts never waits beyond
// ctx; with no deadline on ctx it retries until ctx is cancelled.
func Attempts(ctx context.Context, first time.Duration, f func(ctx context.Context) error) error {
	if first <= 0 {
		first = DefaultAttemptTimeout
	}
	for wait := first; ; wait = nextWait(wait, first) {
		actx, cancel := context.WithTimeout(ctx, wait)
		err := f(actx)
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil || ctx.Err() != nil || !timedOut || !IsTimeout(err) {
			return err
		}
	}
}

// IsTimeout reports whether err is a request's timeout: it wraps
// context.DeadlineExceeded or nats.ErrTimeout.
func IsTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

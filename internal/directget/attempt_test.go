package directget_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/natstest"
)

// attemptStream starts a server with a stream "S" of ten messages on
// "s.a", and returns its URL and their sequences.
func attemptStream(t *testing.T) (string, []uint64) {
	t.Helper()
	s := natstest.Run(t)
	ctx := context.Background()
	_, err := s.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: true})
	require.NoError(t, err)
	var seqs []uint64
	for i := range 10 {
		ack, err := s.JS.Publish(ctx, "s.a", fmt.Appendf(nil, "a%d", i))
		require.NoError(t, err)
		seqs = append(seqs, ack.Sequence)
	}
	return s.ClientURL(), seqs
}

// A request the server never receives is asked again after the attempt
// timeout (the default one for Batch, WithAttemptTimeout's for the
// others), within the caller's deadline: the caller gets the answer, not
// a timeout at its deadline.
func TestEachCallAsksAgainWhatGoesUnanswered(t *testing.T) {
	url, seqs := attemptStream(t)
	short := directget.WithAttemptTimeout(300 * time.Millisecond)
	for _, tc := range []struct {
		name   string
		prefix string
		call   func(t *testing.T, ctx context.Context, js jetstream.JetStream) ([]uint64, error)
		want   []uint64
	}{
		{"a batch is asked again after the default attempt timeout", "$JS.API.DIRECT.GET.",
			func(t *testing.T, ctx context.Context, js jetstream.JetStream) ([]uint64, error) {
				msgs, pending, err := directget.Batch(ctx, js, "S", "s.a", 1, 4, 0)
				require.EqualValues(t, 6, pending)
				var got []uint64
				for _, m := range msgs {
					got = append(got, m.Sequence)
				}
				return got, err
			}, seqs[:4]},
		{"a next get is asked again", "$JS.API.DIRECT.GET.",
			func(t *testing.T, ctx context.Context, js jetstream.JetStream) ([]uint64, error) {
				m, err := directget.Next(ctx, js, "S", "s.a", seqs[2], short)
				if m == nil {
					return nil, err
				}
				return []uint64{m.Sequence}, err
			}, seqs[2:3]},
		{"a last get is asked again", "$JS.API.DIRECT.GET.",
			func(t *testing.T, ctx context.Context, js jetstream.JetStream) ([]uint64, error) {
				m, err := directget.Last(ctx, js, "S", "s.a", short)
				if m == nil {
					return nil, err
				}
				return []uint64{m.Sequence}, err
			}, seqs[9:]},
		{"the leader's last sequence is asked again", "$JS.API.STREAM.MSG.GET.",
			func(t *testing.T, ctx context.Context, js jetstream.JetStream) ([]uint64, error) {
				seq, err := directget.LeaderLastSeq(ctx, js, "S", "s.a", short)
				return []uint64{seq}, err
			}, seqs[9:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, d := natstest.ConnectDropping(t, url, tc.prefix, 1)
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			got, err := tc.call(t, ctx, js)
			require.NoError(t, err)
			require.EqualValues(t, 1, d.Dropped.Load(), "the first request was dropped")
			require.EqualValues(t, 2, d.Seen.Load(), "asked twice")
			require.Equal(t, tc.want, got)
		})
	}
}

// Attempts gives each call its own attempt timeout, twice the one before
// up to 8 times the first, and calls again only after a timeout of that
// attempt: another error, or the end of the caller's context, ends it.
func TestAttemptsAsksAgainOnlyAfterItsOwnTimeout(t *testing.T) {
	const first = 40 * time.Millisecond
	waitOut := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	t.Run("each attempt waits twice as long as the one before, up to 8 times the first", func(t *testing.T) {
		// An attempt's context is made after the previous call returned and
		// before this call starts, so its deadline lies between those two
		// instants plus the attempt's timeout, however late the scheduler
		// runs either.
		var deadlines, starts, ends []time.Time
		ends = append(ends, time.Now())
		err := directget.Attempts(context.Background(), first, func(ctx context.Context) error {
			starts = append(starts, time.Now())
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			deadlines = append(deadlines, dl)
			if len(deadlines) < 6 {
				err := waitOut(ctx)
				ends = append(ends, time.Now())
				return err
			}
			return nil
		})
		require.NoError(t, err)
		require.Len(t, deadlines, 6)
		for i, want := range []time.Duration{first, 2 * first, 4 * first, 8 * first, 8 * first, 8 * first} {
			require.GreaterOrEqual(t, deadlines[i].Sub(ends[i]), want, "attempt %d waits no less", i+1)
			require.LessOrEqual(t, deadlines[i].Sub(starts[i]), want, "attempt %d waits no more", i+1)
		}
	})
	t.Run("nats.ErrTimeout of an attempt that timed out is asked again", func(t *testing.T) {
		calls := 0
		err := directget.Attempts(context.Background(), first, func(ctx context.Context) error {
			if calls++; calls == 1 {
				<-ctx.Done()
				return nats.ErrTimeout
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 2, calls)
	})
	t.Run("an error that is not a timeout is returned at once", func(t *testing.T) {
		calls := 0
		boom := errors.New("boom")
		err := directget.Attempts(context.Background(), first, func(context.Context) error { calls++; return boom })
		require.ErrorIs(t, err, boom)
		require.Equal(t, 1, calls)
	})
	t.Run("a timeout before the attempt's own is returned at once", func(t *testing.T) {
		calls := 0
		err := directget.Attempts(context.Background(), first, func(context.Context) error { calls++; return nats.ErrTimeout })
		require.ErrorIs(t, err, nats.ErrTimeout)
		require.Equal(t, 1, calls)
	})
	t.Run("the caller's deadline ends the attempts", func(t *testing.T) {
		// The caller's deadline arrives during the second attempt, when
		// the test says, not when a timer fires: a late scheduler cannot
		// let it pass during the first.
		ctx := newExpiringContext()
		calls := 0
		err := directget.Attempts(ctx, first, func(actx context.Context) error {
			if calls++; calls == 2 {
				ctx.expire()
			}
			return waitOut(actx)
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Error(t, ctx.Err(), "ended by the caller's deadline")
		require.Equal(t, 2, calls, "the first attempt's timeout asks again; the caller's deadline ends the attempts")
	})
	t.Run("the caller's cancellation ends the attempts", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := directget.Attempts(ctx, first, func(ctx context.Context) error {
			if calls++; calls == 2 {
				cancel()
			}
			return waitOut(ctx)
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 2, calls)
	})
}

// expiringContext is a caller's context whose deadline, reported an hour
// away, arrives when expire is called: Done closes and Err returns
// context.DeadlineExceeded from then on. It carries no values.
type expiringContext struct {
	context.Context // context.Background, for Value
	deadline        time.Time
	done            chan struct{}
	once            sync.Once
}

func newExpiringContext() *expiringContext {
	return &expiringContext{Context: context.Background(), deadline: time.Now().Add(time.Hour), done: make(chan struct{})}
}

func (c *expiringContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *expiringContext) Done() <-chan struct{} { return c.done }

func (c *expiringContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *expiringContext) expire() { c.once.Do(func() { close(c.done) }) }

package client

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/tenancy"
)

// logAccess is how the client reads stored events of one thread subject:
// with the stream's own requests (a client with full permissions), or
// through the tenant service (a tenant-scoped client, Config.Tenant),
// whose NATS user may not make the stream requests that name their
// subject in the body (package tenancy says why). The last event of a
// subject (directget.Last) is read the same way by both.
//
// directLog's requests are bounded by directget's attempt timeout
// (directget.DefaultAttemptTimeout): a request a recovering cluster leaves
// unanswered is made again while ctx lasts, instead of costing the read
// its whole deadline. A page the server cut short, or one missing a
// reply, is an error wrapping directget.ErrIncomplete, not a short last
// page.
type logAccess interface {
	// batch is directget.Batch.
	batch(ctx context.Context, subject string, from uint64, n, maxBytes int) ([]*RawEvent, uint64, error)
	// next returns the first event of subject at or after from, nil if
	// none.
	next(ctx context.Context, subject string, from uint64) (*RawEvent, error)
	// at returns the event at seq, which an append acknowledged on
	// subject; an error when there is none (or, scoped, it is not on
	// subject).
	at(ctx context.Context, subject string, seq uint64) (*RawEvent, error)
	// leaderLastSeq is directget.LeaderLastSeq.
	leaderLastSeq(ctx context.Context, subject string) (uint64, error)
}

// directLog reads with the stream's requests.
type directLog struct {
	js     jetstream.JetStream
	st     jetstream.Stream
	stream string
}

func (d directLog) batch(ctx context.Context, subject string, from uint64, n, maxBytes int) ([]*RawEvent, uint64, error) {
	return directget.Batch(ctx, d.js, d.stream, subject, from, n, maxBytes)
}

func (d directLog) next(ctx context.Context, subject string, from uint64) (*RawEvent, error) {
	return directget.Next(ctx, d.js, d.stream, subject, from)
}

func (d directLog) at(ctx context.Context, _ string, seq uint64) (*RawEvent, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, directget.DefaultTimeout)
		defer cancel()
	}
	var m *RawEvent
	err := directget.Attempts(ctx, directget.DefaultAttemptTimeout, func(ctx context.Context) (err error) {
		m, err = d.st.GetMsg(ctx, seq)
		return err
	})
	return m, err
}

func (d directLog) leaderLastSeq(ctx context.Context, subject string) (uint64, error) {
	seq, err := directget.LeaderLastSeq(ctx, d.js, d.stream, subject)
	if err != nil {
		return 0, fmt.Errorf("client: %w", err)
	}
	return seq, nil
}

// serviceLog reads through the tenant service.
type serviceLog struct {
	caller   *tenancy.Caller
	subjects events.Subjects
}

// thread returns the thread id of one of the tenant's subjects.
func (s serviceLog) thread(subject string) (string, error) {
	_, thread, err := s.subjects.Parse(subject)
	return thread, err
}

func (s serviceLog) batch(ctx context.Context, subject string, from uint64, n, maxBytes int) ([]*RawEvent, uint64, error) {
	thread, err := s.thread(subject)
	if err != nil {
		return nil, 0, err
	}
	var out []*RawEvent
	var pending uint64
	// The service answers at most tenancy.MaxBatch events per request.
	for n > 0 {
		msgs, p, err := s.caller.LogGet(ctx, thread, from, min(n, tenancy.MaxBatch), maxBytes)
		if err != nil {
			return out, 0, err
		}
		out, pending = append(out, msgs...), p
		if len(msgs) == 0 || p == 0 {
			break
		}
		n -= len(msgs)
		from = msgs[len(msgs)-1].Sequence + 1
		if maxBytes > 0 {
			break
		}
	}
	return out, pending, nil
}

func (s serviceLog) next(ctx context.Context, subject string, from uint64) (*RawEvent, error) {
	msgs, _, err := s.batch(ctx, subject, from, 1, 0)
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	return msgs[0], nil
}

func (s serviceLog) at(ctx context.Context, subject string, seq uint64) (*RawEvent, error) {
	m, err := s.next(ctx, subject, seq)
	if err != nil {
		return nil, err
	}
	if m == nil || m.Sequence != seq {
		return nil, fmt.Errorf("client: no event of %s at sequence %d", subject, seq)
	}
	return m, nil
}

func (s serviceLog) leaderLastSeq(ctx context.Context, subject string) (uint64, error) {
	thread, err := s.thread(subject)
	if err != nil {
		return 0, err
	}
	return s.caller.LogLast(ctx, thread)
}

package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// ApplyFork folds st, the first event of a fork by reference
// (events.Forked with ByReference, for which fold.Apply answered
// fold.ErrNeedParent), into s with its source's projected messages and
// key-value state as of the fork's source sequence, read with Get (AtSeq,
// IncludeDeleted; recursively when the source is itself a fork by
// reference). A source that no longer has that history (erased) gives an
// empty fork marked ForkedFrom.SourceErased. Any other event is folded as
// fold.Apply does. The projector and every read of this package that
// folds from a thread's first event use it. Errors: reading the source
// (NATS, ctx) -- retryable; the fold's verdicts as fold.Apply's.
func (c *Client) ApplyFork(ctx context.Context, s *fold.State, st events.Stored) error {
	f, ok := st.Payload.(events.Forked)
	if !ok || !f.ByReference {
		return fold.Apply(s, st)
	}
	src, err := c.Get(ctx, f.SourceTenant, f.SourceThread, AtSeq(f.SourceSeq), IncludeDeleted())
	if errors.Is(err, ErrThreadNotFound) {
		return fold.ApplyFork(s, st, nil, nil, true)
	}
	if err != nil {
		return fmt.Errorf("client: source %s/%s of fork %s/%s as of %d: %w", f.SourceTenant, f.SourceThread, s.Tenant, s.Thread, f.SourceSeq, err)
	}
	msgs := make([]events.Message, len(src.Messages))
	for i, m := range src.Messages {
		m.Seq, m.EventID = 0, ""
		msgs[i] = m
	}
	return fold.ApplyFork(s, st, msgs, src.KV, false)
}

// applyRaw folds the raw message m into s, resolving a fork by reference
// (ApplyFork). Rejections are recorded in s and returned; errors reading
// a fork's source are returned with s unchanged. s shares m.Data's memory
// (fold.ApplyBytesNoCopy): m.Data, the buffer nats.go gave the message or
// the one opening it made, must not be modified afterwards.
func (c *Client) applyRaw(ctx context.Context, s *fold.State, m *RawEvent) error {
	err := fold.ApplyBytesNoCopy(s, m.Sequence, m.Time, m.Data)
	if !errors.Is(err, fold.ErrNeedParent) {
		return err
	}
	st, derr := decodeRaw(m)
	if derr != nil {
		return err
	}
	return c.ApplyFork(ctx, s, st)
}

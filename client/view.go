package client

import (
	"context"
	"errors"
	"iter"
	"sort"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/snapstore"
)

// ThreadView is a thread read without copying its history
// ([Client.GetView]): Thread's fields, with Base counting the older
// messages, which live in the chunk cache's segments, and Messages holding
// the newest ones (the projector's head). Len, At and All address the
// whole history.
//
// Ownership: every message of a view, and what the embedded Thread's
// fields point to (Messages, Metadata, KV, the fold state), is shared with
// the client's caches and with other views of the thread (a head read
// again unchanged is not decoded again). Read it; never modify a message
// or what it points to (strings, parts, tool calls, maps); the Thread
// struct itself is the caller's, and Thread.FoldState gives a private
// copy of the state. A view stays valid as long as it is held (chunks are
// immutable; the caches only drop their own reference). A ThreadView is
// safe for concurrent reads.
type ThreadView struct {
	Thread
	segs [][]events.Message
	// ends[i] is the history index after segs[i]'s last message.
	ends []int
}

// Len is the number of messages in the thread's history (Base plus
// len(Messages)).
func (v *ThreadView) Len() int { return v.Base + len(v.Messages) }

// At returns the message at history index i (0 <= i < Len()); it panics
// for an index out of range, as a slice does.
func (v *ThreadView) At(i int) *events.Message {
	if i >= v.Base {
		return &v.Messages[i-v.Base]
	}
	s := sort.SearchInts(v.ends, i+1)
	start := 0
	if s > 0 {
		start = v.ends[s-1]
	}
	return &v.segs[s][i-start]
}

// All yields every message of the history in order, with its index.
func (v *ThreadView) All() iter.Seq2[int, *events.Message] {
	return func(yield func(int, *events.Message) bool) {
		i := 0
		for _, seg := range append(v.segs, v.Messages) {
			for j := range seg {
				if !yield(i, &seg[j]) {
					return
				}
				i++
			}
		}
	}
}

// GetView returns tenant/thread as [Client.Get] does by default (the
// projector's snapshot, which may lag the log by the projection lag), as a
// view: the history's older messages are not copied out of the chunk
// cache, so a reader whose chunks are cached pays one KV get of the head
// per call, not a copy of every message (see [ThreadView] for who owns
// what). A thread not projected yet is read from the log, its history one
// segment.
//
// Errors: as Get (*NotFoundError for a thread with no events, erased, or
// soft-deleted: read a deleted one with Get and IncludeDeleted).
func (c *Client) GetView(ctx context.Context, tenant, thread string) (*ThreadView, error) {
	if p := c.route(tenant, thread); p != c {
		return p.GetView(ctx, tenant, thread)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if _, err := c.subjects.Thread(tenant, thread); err != nil {
		return nil, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	snap, err := c.snaps.LoadView(ctx, tenant, thread)
	switch {
	case err == nil:
		t := ThreadOf(snap.State)
		t.FromSnapshot = true
		if err := threadReadable(t, tenant, thread, false); err != nil {
			return nil, err
		}
		v := &ThreadView{Thread: *t, segs: snap.Segments, ends: make([]int, len(snap.Segments))}
		end := 0
		for i, seg := range snap.Segments {
			end += len(seg)
			v.ends[i] = end
		}
		return v, nil
	case errors.Is(err, snapstore.ErrNoSnapshot), errors.Is(err, snapstore.ErrCorrupt), errors.Is(err, snapstore.ErrSnapshotChanged):
		t, err := c.Get(ctx, tenant, thread)
		if err != nil {
			return nil, err
		}
		return &ThreadView{Thread: *t}, nil // Base 0: every message in Messages
	}
	return nil, err
}

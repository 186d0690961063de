package client

import (
	"context"

	"github.com/convlog/convlog/fold"
)

// Checkpoints returns the thread's checkpoint index (fold.State's
// Checkpoints: its newest framework checkpoints with the sequences of
// their events; nil when it has none) and the thread version it holds. It
// reads the snapshot's head and folds the log's tail after it, as
// [Client.State] does, so it includes every acknowledged event without
// reading the history's chunks. The index is shared with the client's
// caches: read it, never modify it.
//
// Errors: as [Client.State].
func (c *Client) Checkpoints(ctx context.Context, tenant, thread string) (*fold.CheckpointIndex, uint64, error) {
	if p := c.route(tenant, thread); p != c {
		return p.Checkpoints(ctx, tenant, thread)
	}
	if err := c.check(); err != nil {
		return nil, 0, err
	}
	s, err := c.headState(ctx, tenant, thread)
	if err != nil {
		return nil, 0, err
	}
	if err := notFound(s); err != nil {
		return nil, 0, err
	}
	return s.Checkpoints, s.Version, nil
}

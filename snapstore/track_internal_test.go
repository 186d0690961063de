package snapstore

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
)

// The tracker trusts a head read after a mark unless the watch delivered,
// since the mark, an update of that head newer than the revision read (the
// read raced it), or more updates than it keeps, or lost the watch; an
// update delivered later withdraws the trust.
func TestTrackerTrustsOnlyWhatNoDeliveryContradicts(t *testing.T) {
	srv := natstest.Run(t)
	newTracker := func() *tracker {
		tr := &tracker{nc: srv.NC, trusted: map[string]uint64{}}
		tr.start()
		return tr
	}

	tr := newTracker()
	m := tr.mark()
	tr.deliver("a.other", 11, 0)
	tr.trust("a.t", 10, m)
	require.True(t, tr.trusts("a.t", 10), "an update of another head")
	require.False(t, tr.trusts("a.t", 9), "another revision")
	tr.deliver("a.t", 12, 0)
	require.False(t, tr.trusts("a.t", 10), "after a newer update of it")

	m = tr.mark()
	tr.deliver("a.t", 13, 0)
	tr.trust("a.t", 12, m)
	require.False(t, tr.trusts("a.t", 12), "the read raced a newer update delivered before its trust")

	m = tr.mark()
	tr.deliver("a.t", 13, 0) // redelivered after a reset: not newer than what was read
	tr.trust("a.t", 13, m)
	require.True(t, tr.trusts("a.t", 13))

	m = tr.mark()
	for i := range trackRing + 1 {
		tr.deliver("a.other", uint64(100+i), 0)
	}
	tr.trust("a.u", 5, m)
	require.False(t, tr.trusts("a.u", 5), "more deliveries since the mark than the ring keeps")

	// Lost: nothing trusted, marks taken before are void; a delivery with
	// none pending makes it current again.
	tr = newTracker()
	tr.trust("a.t", 10, tr.mark())
	require.True(t, tr.trusts("a.t", 10))
	m = tr.mark()
	tr.lose()
	require.False(t, tr.trusts("a.t", 10))
	tr.trust("a.t", 10, m)
	require.False(t, tr.trusts("a.t", 10), "trusted while lost")
	tr.deliver("a.x", 20, 3)
	tr.trust("a.t", 10, tr.mark())
	require.False(t, tr.trusts("a.t", 10), "current again with updates still pending")
	tr.deliver("a.x", 23, 0)
	tr.trust("a.t", 10, m)
	require.False(t, tr.trusts("a.t", 10), "a mark taken before the loss")
	tr.trust("a.t", 10, tr.mark())
	require.True(t, tr.trusts("a.t", 10))

	// A connection that is not connected vouches for nothing.
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	tr = &tracker{nc: nc, trusted: map[string]uint64{}}
	tr.start()
	tr.trust("a.t", 10, tr.mark())
	require.True(t, tr.trusts("a.t", 10))
	nc.Close()
	require.False(t, tr.trusts("a.t", 10), "a closed connection")
}

// A head whose chunk turned out purged is not trusted any more.
func TestTrackerDistrust(t *testing.T) {
	srv := natstest.Run(t)
	tr := &tracker{nc: srv.NC, trusted: map[string]uint64{}}
	tr.start()
	tr.trust("a.t", 10, tr.mark())
	require.True(t, tr.trusts("a.t", 10))
	tr.distrust("a.t")
	require.False(t, tr.trusts("a.t", 10))
}

package ports

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// Free hands out distinct ports below the kernel's ephemeral range that
// can be listened on.
func TestFreeAvoidsTheEphemeralRange(t *testing.T) {
	lo := EphemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := Free()
		require.NoError(t, err)
		require.GreaterOrEqual(t, p, 10_000)
		require.Less(t, p, lo, "below the ephemeral range")
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		require.NoError(t, err)
		require.NoError(t, l.Close())
	}
}

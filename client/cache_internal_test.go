package client

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// The state cache is bounded by bytes as well as by count: states whose
// newest messages are large (an image part) are evicted before the count
// is reached.
func TestStateCacheIsBoundedByBytes(t *testing.T) {
	c := newStateCache(4096)
	image := strings.Repeat("A", 1<<20)
	for i := range 200 {
		s := fold.NewState("acme", fmt.Sprint("t", i))
		s.Version = uint64(i + 1)
		s.Messages = []events.Message{{Role: events.RoleUser, Content: events.Parts(events.Part{Type: "image_url", URL: image})}}
		c.put(threadRef{"acme", fmt.Sprint("t", i)}, s)
	}
	require.LessOrEqual(t, c.c.Cost(), int64(stateCacheBytes))
	require.Less(t, c.c.Len(), 40, "200 states of 1 MiB each do not all stay")
	require.NotNil(t, c.get(threadRef{"acme", "t199"}), "the newest stays")
}

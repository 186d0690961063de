package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/projector"
)

// State reads a thread's key-value state (every key or a prefix) at its
// current version, from the snapshot's head plus the log's tail, with or
// without a projector; SetStateIfAbsent sets a key once however many
// writers race for it.
func TestStateKeysAndSetIfAbsent(t *testing.T) {
	for _, projected := range []bool{false, true} {
		t.Run(fmt.Sprintf("projector running: %v", projected), func(t *testing.T) {
			s := clienttest.New(t)
			c := s.Client
			if projected {
				clienttest.RunProjector(t, s.JS, projector.Config{})
			}
			ctx := context.Background()
			tenant := events.DefaultTenant
			th, _ := clienttest.Thread(t, c, clienttest.RepliesOff(events.DefaultTenant, ""), 0)
			for _, k := range []string{"ckpt/1", "ckpt/2", "other"} {
				_, err := c.SetState(ctx, tenant, th, k, map[string]string{"k": k})
				require.NoError(t, err)
			}
			// A long history, so that a projected thread's messages are in chunks.
			for i := range 20 {
				_, err := c.Append(ctx, tenant, th, []events.Event{clienttest.User(strings.Repeat("x", 4000) + fmt.Sprint(i))}, client.AnyVersion())
				require.NoError(t, err)
			}
			v, err := c.DeleteState(ctx, tenant, th, "ckpt/2")
			require.NoError(t, err)

			st, err := c.State(ctx, tenant, th, "ckpt/")
			require.NoError(t, err)
			require.Equal(t, v, st.Version, "the state includes the last acknowledged event")
			require.Equal(t, map[string]json.RawMessage{"ckpt/1": json.RawMessage(`{"k":"ckpt/1"}`)}, st.KV)
			all, err := c.State(ctx, tenant, th, "")
			require.NoError(t, err)
			require.Len(t, all.KV, 2)

			const writers = 6
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for i := range writers {
				wg.Go(func() { _, errs[i] = c.SetStateIfAbsent(ctx, tenant, th, "lock", i) })
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				if err == nil {
					won++
				} else {
					require.ErrorIs(t, err, client.ErrStateKeyExists)
				}
			}
			require.Equal(t, 1, won, "exactly one writer sets the key")
			_, err = c.SetStateIfAbsent(ctx, tenant, th, "ckpt/1", "again")
			require.ErrorIs(t, err, client.ErrStateKeyExists)

			_, err = c.State(ctx, tenant, "no-such-thread", "")
			require.ErrorIs(t, err, client.ErrThreadNotFound)
		})
	}
}

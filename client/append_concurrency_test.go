package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// TestSixteenWritersOnOneThreadLandEveryAppendExactlyOnce is docs/design.md
// invariant 3 under contention: 16 goroutines (on 4 clients, i.e. 4
// services with their own caches and connections) append to one thread with
// optimistic concurrency and retry each conflict with the same events at
// the version they learn. Every append lands exactly once, no turn is
// interleaved with another, and each writer's appends are in its order.
func TestSixteenWritersOnOneThreadLandEveryAppendExactlyOnce(t *testing.T) {
	t.Parallel() // mostly waits on fsyncs: overlaps well with other tests
	for _, tc := range []struct {
		name      string
		replicas  int
		turn      bool
		perWriter int
	}{
		{"when each append is one user message, on a single-replica stream", 1, false, 8},
		// Atomic batches on R1 file streams are staged in a file store of
		// their own and synced at commit, and a batch that
		// loses the race pays it too: fewer turns keep the test short.
		{"when each append is a two-event turn of a tool call and its result, on a single-replica stream", 1, true, 2},
		{"when each append is a two-event turn of a tool call and its result, on a three-replica stream", 3, true, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var env *appendEnv
			var clients []*client.Client
			if tc.replicas == 1 {
				s := natstest.Run(t)
				env = newEnvOn(t, s.NC, provision.Config{})
				clients = append(clients, env.c)
				for range 3 {
					nc, err := s.Connect()
					require.NoError(t, err)
					t.Cleanup(nc.Close)
					clients = append(clients, env.newClient(t, nc))
				}
			} else {
				cl := natstest.RunCluster(t, 3)
				nc, _ := cl.Connect(t)
				env = newEnvOn(t, nc, provision.Config{Replicas: 3})
				clients = append(clients, env.c)
				for range 3 {
					nc, _ := cl.Connect(t)
					clients = append(clients, env.newClient(t, nc))
				}
			}
			contend(t, env, clients, 16, tc.perWriter, tc.turn)
		})
	}
}

// contend runs writers goroutines appending perWriter appends each to one
// new thread and checks the outcome on the stream.
func contend(t *testing.T, env *appendEnv, clients []*client.Client, writers, perWriter int, turn bool) {
	ctx := context.Background()
	thread, _ := env.createThread(t, client.CreateOptions{})
	tenant := events.DefaultTenant

	// appended[w][i] is the result of writer w's i-th append.
	appended := make([][]client.AppendResult, writers)
	conflicts := make([]int, writers)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			c := clients[w%len(clients)]
			// Half the writers learn the version by reading the thread,
			// half from conflict errors and their own results.
			byRead := w%2 == 0
			th, err := c.Get(ctx, tenant, thread, client.Consistent())
			if err != nil {
				errs <- err
				return
			}
			version := th.Version
			for i := range perWriter {
				var evs []events.Event
				if turn {
					evs = toolTurn(fmt.Sprintf("call_w%d_%d", w, i))
				} else {
					evs = []events.Event{userEvent(fmt.Sprintf("writer %d message %d", w, i))}
				}
				evs = completeEvents(tenant, thread, evs) // ids fixed across retries
				for {
					res, err := c.Append(ctx, tenant, thread, evs, client.ExpectVersion(version))
					var ce *client.ConflictError
					if errors.As(err, &ce) {
						conflicts[w]++
						if byRead || ce.Actual == 0 {
							th, err := c.Get(ctx, tenant, thread, client.Consistent())
							if err != nil {
								errs <- err
								return
							}
							version = th.Version
						} else {
							version = ce.Actual
						}
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("writer %d append %d: %w", w, i, err)
						return
					}
					// Duplicate is possible: a send whose ack was late (a
					// slow machine) was repeated, or a conflict raced with
					// it. The stream check below is what counts.
					appended[w] = append(appended[w], res)
					version = res.Version
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := 0
	for _, n := range conflicts {
		total += n
	}
	t.Logf("%d writers x %d appends: %d conflicts retried", writers, perWriter, total)
	require.Positive(t, total, "the writers did contend")

	per := 1
	if turn {
		per = 2
	}
	msgs := env.stored(t, tenant, thread)
	require.Len(t, msgs, 1+writers*perWriter*per, "every append landed exactly once")
	pos := map[string]int{}
	for i, m := range msgs {
		_, dup := pos[m.ID]
		require.False(t, dup, "event %s stored twice", m.ID)
		pos[m.ID] = i
	}
	for w := range writers {
		require.Len(t, appended[w], perWriter)
		last := 0
		for _, res := range appended[w] {
			for j, e := range res.Events {
				i, ok := pos[e.ID]
				require.True(t, ok, "appended event %s is on the thread", e.ID)
				require.Equal(t, msgs[i].Seq, e.Seq, "the result's sequence is where the event is stored")
				if j > 0 {
					require.Equal(t, pos[res.Events[j-1].ID]+1, i, "the turn is not interleaved")
					require.Equal(t, msgs[i-1].Seq+1, msgs[i].Seq, "a turn takes consecutive stream sequences")
				}
			}
			first := pos[res.Events[0].ID]
			require.Greater(t, first, last, "writer %d's appends are in its order", w)
			last = first
		}
	}

	// The fold agrees: a valid history in stream order, nothing rejected,
	// nothing pending, at the version of the last event.
	th, err := env.c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Zero(t, th.RejectedCount)
	require.Empty(t, th.Pending)
	require.Equal(t, msgs[len(msgs)-1].Seq, th.Version)
	require.Len(t, th.Messages, writers*perWriter*per)
	for i, m := range th.Messages {
		require.Equal(t, msgs[i+1].Seq, m.Seq, "projected message %d is in stream order", i)
		require.Equal(t, msgs[i+1].ID, m.EventID)
	}
}

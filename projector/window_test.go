package projector_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
)

// Plain publishes (no OCC header) to one projector instance are folded
// from their triggers: the instance's delivery order proves each one's
// previous event, so after a thread's first event no step reads the log.
// With two instances sharing the consumer (each sees gaps) the result is
// the same, only read from the log.
func TestPlainPublishesAreChainedByDeliveryOrder(t *testing.T) {
	for _, instances := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) {
			e := newEnv(t)
			var (
				mu       sync.Mutex
				reads    int // steps that read the log
				steps    int
				firstOf  = map[string]uint64{}
				readTail int // reads by steps that started past a thread's first event
			)
			cfg := projector.Config{OnStep: func(s projector.Step) {
				mu.Lock()
				defer mu.Unlock()
				steps++
				if s.LogReads > 0 {
					reads++
					if s.From >= firstOf[s.Thread] && firstOf[s.Thread] != 0 {
						readTail++
					}
				}
			}}
			for range instances {
				e.start(t, cfg)
			}
			const threads, rounds = 20, 30
			c := &clock{t: time.Unix(1700000000, 0)}
			var created []events.Event
			for i := range threads {
				created = append(created, c.ev("win", fmt.Sprintf("t%d", i), events.ThreadCreated{}))
			}
			seqs := e.publishAsync(t, created)
			mu.Lock()
			for i, s := range seqs {
				firstOf[fmt.Sprintf("t%d", i)] = s
			}
			mu.Unlock()
			last := map[string]uint64{}
			for r := range rounds {
				var evs []events.Event
				for i := range threads {
					evs = append(evs, c.ev("win", fmt.Sprintf("t%d", i), events.UserMessage{Content: events.Text(fmt.Sprintf("round %d", r))}))
				}
				for i, s := range e.publishAsync(t, evs) { // plain publishes: no OCC header
					last[fmt.Sprintf("t%d", i)] = s
				}
			}
			for i := range threads {
				th := fmt.Sprintf("t%d", i)
				e.waitVersion(t, "win", th, last[th])
				snap, err := e.snaps.Load(context.Background(), "win", th)
				require.NoError(t, err)
				requireSameState(t, e.fold(t, "win", th), snap.State, "thread %s", th)
				require.Equal(t, rounds, snap.State.MessageCount())
			}
			mu.Lock()
			defer mu.Unlock()
			t.Logf("%d instance(s): %d steps, %d read the log, %d of them past the thread's first event", instances, steps, reads, readTail)
			if instances == 1 {
				require.Zero(t, readTail, "a single instance read the log for a plain trigger it had the previous event of")
				require.LessOrEqual(t, reads, threads, "only each thread's first event needs a read")
			}
		})
	}
}

package projector_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// Snapshots are derived data. A head
// or index entry the projector cannot read (garbage, or a newer format) is
// rebuilt from the log at the thread's next event, the rebuild is
// reported (the convlog_projector_errors_total metric), and no trigger is
// left unacked. Before, the projector retried the thread every few seconds
// for ever and held its trigger.
func TestUnreadableSnapshotsAreRebuiltFromTheLog(t *testing.T) {
	newer, err := msgpack.Marshal(map[string]any{"format": 99, "gen": 1})
	require.NoError(t, err)
	cases := []struct {
		name   string
		key    func(tenant, thread string) string
		value  []byte
		reason string
	}{
		{"a garbage head", snapstore.HeadKey, []byte("\xc1 not msgpack"), projector.FailureSnapshotRebuilt},
		{"a head in a newer format", snapstore.HeadKey, newer, projector.FailureSnapshotRebuilt},
		{"a garbage index entry", snapstore.IndexKey, []byte("\xc1 not msgpack"), projector.FailureIndexRebuilt},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var mu sync.Mutex
			var failures []projector.Failure
			e.start(t, projector.Config{OnFailure: func(f projector.Failure) {
				mu.Lock()
				defer mu.Unlock()
				failures = append(failures, f)
			}})
			ctx := context.Background()
			c := &clock{t: time.Unix(1700000000, 0)}
			thread := fmt.Sprintf("t%d", i)
			e.publish(t, c.ev("acme", thread, events.ThreadCreated{Title: "hello"}))
			for j := range 200 { // past the tail: the head names chunks
				e.publish(t, c.ev("acme", thread, events.UserMessage{Content: content512(j)}))
			}
			last := e.publish(t, c.ev("acme", thread, events.AssistantMessage{Content: events.Text("answer")}))
			e.waitVersion(t, "acme", thread, last)
			e.waitIndex(t, "acme", thread, last)

			bucket := e.res.Snapshots
			if tc.reason == projector.FailureIndexRebuilt {
				bucket = e.res.Index
			}
			_, err := bucket.Put(ctx, tc.key("acme", thread), tc.value)
			require.NoError(t, err)

			last = e.publish(t, c.ev("acme", thread, events.UserMessage{Content: events.Text("after the damage")}))
			e.waitVersion(t, "acme", thread, last)
			snap, err := e.snaps.Load(ctx, "acme", thread)
			require.NoError(t, err)
			requireSameState(t, e.fold(t, "acme", thread), snap.State)
			require.Equal(t, last, e.waitIndex(t, "acme", thread, last).Version)
			e.waitConsumerIdle(t, "convlog-projector")
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, failures, "the rebuild is reported")
			require.Equal(t, tc.reason, failures[0].Reason)
			require.Equal(t, thread, failures[0].Thread)
		})
	}
}

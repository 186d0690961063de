package audit_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
)

func natstestRun(b *testing.B) *natstest.Server { return natstest.Run(b) }

// BenchmarkVerifyThread verifies one thread of 10,000 events (about 500
// bytes each) against its checkpoints, and replays the same thread, in one
// run; metric events/s of each (bench/run.sh's replay section has the
// same pair; the target: verify at least at the replay rate).
func BenchmarkVerifyThread(b *testing.B) {
	const n = 10_000
	ns := newWorld(b, "")
	ctx := context.Background()
	_, _, _, err := ns.c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "long"})
	require.NoError(b, err)
	text := strings.Repeat("x", 400)
	var last uint64
	for i := 0; i < n-1; i += 100 {
		var evs []events.Event
		for j := 0; j < 100 && i+j < n-1; j++ {
			evs = append(evs, events.Event{Payload: events.UserMessage{Content: events.Text(fmt.Sprintf("%s %d", text, i+j))}})
		}
		res, err := ns.c.Append(ctx, "acme", "long", evs, client.AnyVersion())
		require.NoError(b, err)
		last = res.Version
	}
	require.Eventually(b, func() bool { return ns.covered.Load() >= last }, time.Minute, 10*time.Millisecond)
	opts := audit.VerifyOptions{Trusted: []ed25519.PublicKey{ns.key.Public().(ed25519.PublicKey)}}
	// The same thread replayed (read and folded, client.Get as of its
	// last sequence): the rate verify is measured against.
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			th, err := ns.c.Get(ctx, "acme", "long", client.AtSeq(last))
			require.NoError(b, err)
			require.Equal(b, n-1, th.MessageCount())
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			rep, err := audit.Verify(ctx, ns.ns.JS, audit.Scope{Tenant: "acme", Thread: "long"}, opts)
			require.NoError(b, err)
			require.True(b, rep.OK)
			require.EqualValues(b, n, rep.Verified)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkAppendsWithACheckpointer measures what the checkpointer costs
// the writers: concurrent single-event appends over 64 threads, with no
// checkpointer and with one running (cadence 1 s, as agentd serve runs
// it), in one run; metric appends/s of each.
func BenchmarkAppendsWithACheckpointer(b *testing.B) {
	for _, with := range []bool{false, true} {
		name := "without"
		if with {
			name = "with"
		}
		b.Run(name, func(b *testing.B) {
			ns := natstestRun(b)
			ctx := context.Background()
			c, err := client.New(ctx, ns.NC, client.Config{Provision: true})
			require.NoError(b, err)
			if with {
				_, key, err := ed25519.GenerateKey(nil)
				require.NoError(b, err)
				cp, err := audit.NewCheckpointer(ns.JS, audit.Config{Key: key})
				require.NoError(b, err)
				cctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); _ = cp.Run(cctx) }()
				defer func() { cancel(); <-done }()
				<-cp.Ready()
			}
			for i := range 64 {
				_, _, _, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: fmt.Sprintf("t%d", i)})
				require.NoError(b, err)
			}
			text := strings.Repeat("x", 400)
			var next atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					_, err := c.Append(ctx, "acme", fmt.Sprintf("t%d", i%64), []events.Event{{Payload: events.UserMessage{Content: events.Text(text)}}}, client.AnyVersion())
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

package projector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
)

// A projector stopped in the middle of a burst, followed at once by the
// server's shutdown (what `agentd serve` does on SIGTERM), loses a few
// triggers in transit (delivered to its pull request after the drain began;
// nats.go cannot withdraw a pull request). The restarted projector gets
// them after AckWait: with the default of 5 s every trigger is acked within
// 10 s. With an AckWait of 30 s this fails in every round (1 to
// 32 triggers waited 30 s and their threads' snapshots lagged meanwhile).
func TestGracefulRestartCatchesUpWithinAckWait(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			srv := natstest.RunConfig(t, embedded.Config{StoreDir: dir})
			res, err := provision.Ensure(ctx, srv.JS, provision.Config{})
			require.NoError(t, err)
			e := envOf(t, srv, res)
			stop := e.start(t, projector.Config{})
			threads := make([]string, 20)
			for i := range threads {
				threads[i] = fmt.Sprintf("t%d", i)
				e.publish(t, events.Event{Tenant: "default", Thread: threads[i], Payload: events.ThreadCreated{}})
			}
			for i := range 2000 {
				e.publish(t, events.Event{Tenant: "default", Thread: threads[i%len(threads)], Payload: events.UserMessage{Content: events.Text(fmt.Sprintf("m%d", i))}})
			}
			stop()
			srv.NC.Close()
			srv.Shutdown()

			srv = natstest.RunConfig(t, embedded.Config{StoreDir: dir})
			res, err = provision.Ensure(ctx, srv.JS, provision.Config{})
			require.NoError(t, err)
			e = envOf(t, srv, res)
			e.start(t, projector.Config{}) // default AckWait
			cons, err := srv.JS.Consumer(ctx, res.Stream.CachedInfo().Config.Name, "convlog-projector")
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				info, err := cons.Info(ctx)
				return err == nil && info.NumPending == 0 && info.NumAckPending == 0
			}, 10*time.Second, 20*time.Millisecond, "the restarted projector has every trigger acked within 10 s")
		})
	}
}

// Shutdown stops a running projector and returns once Run has returned,
// with every trigger it received acked or handed back (none left pending
// on the consumer beyond what AckWait brings back); before Run it makes
// Run return at once.
func TestShutdownStopsRunAndWaits(t *testing.T) {
	e := newEnv(t)
	p, err := projector.New(e.js, projector.Config{})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	<-p.Ready()
	v := e.publish(t, events.Event{Tenant: "default", Thread: "t1", Payload: events.ThreadCreated{}})
	e.waitVersion(t, "default", "t1", v)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Shutdown(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	default:
		t.Fatal("Shutdown returned before Run did")
	}

	early, err := projector.New(e.js, projector.Config{Durable: "early"})
	require.NoError(t, err)
	require.NoError(t, early.Shutdown(ctx))
	require.NoError(t, early.Run(context.Background()), "Run after Shutdown returns at once")
}

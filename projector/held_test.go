package projector_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
)

// MaxTriggerBytes bounds what an instance holds: with its one worker stuck
// in a step, it takes deliveries until the triggers it holds keep
// MaxTriggerBytes (as Held counts them), and no more; once the worker goes
// on, every trigger is folded and acked and Held is back to zero.
func TestMaxTriggerBytesBoundsWhatIsHeld(t *testing.T) {
	const maxBytes, threads = 256 << 10, 2_000
	e := newEnv(t)
	entered, stuck := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p, _ := e.startProjector(t, projector.Config{Workers: 1, MaxTriggerBytes: maxBytes, Logger: testLogger(t),
		OnApply: func(projector.Applied) { once.Do(func() { close(entered); <-stuck }) }})
	var c clock
	evs := make([]events.Event, threads)
	for i := range evs {
		evs[i] = c.ev("acme", fmt.Sprintf("t%d", i), events.ThreadCreated{})
	}
	e.publishAsync(t, evs)
	<-entered

	// Wait until the dispatcher stops taking deliveries.
	held := p.Held()
	for still := 0; still < 20; still++ {
		time.Sleep(25 * time.Millisecond)
		if now := p.Held(); now != held {
			held, still = now, 0
		}
	}
	t.Logf("held with the worker stuck: %+v", held)
	require.Less(t, held.Triggers, threads, "it took every delivery")
	perTrigger := held.Bytes / held.Triggers
	require.Greater(t, perTrigger, 1024, "a trigger counts at least nats.go's message: %+v", held)
	require.LessOrEqual(t, held.Bytes, maxBytes+perTrigger, "it went on taking deliveries over MaxTriggerBytes")
	require.Greater(t, held.Bytes, maxBytes-perTrigger, "it stopped short of MaxTriggerBytes")

	close(stuck)
	e.waitConsumerIdle(t, projector.DefaultConfig().Durable)
	require.Eventually(t, func() bool { return p.Held() == projector.Held{} }, 10*time.Second, 10*time.Millisecond, "held after every trigger was acked: %+v", p.Held())
}

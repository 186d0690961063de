package projector_test

import (
	"testing"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
)

func TestDebugLongSteps(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	e.start(t, projector.Config{OnStep: func(s projector.Step) {
		t.Logf("%v step %d->%d events %d chunks %d head %d took %s", time.Since(start).Round(time.Millisecond), s.From, s.To, s.Events, s.ChunksWritten, s.HeadBytes, s.Took)
	}})
	c := &clock{t: time.Unix(1700000000, 0)}
	evs := []events.Event{c.ev("l", "t", events.ThreadCreated{})}
	for i := 0; i < 20_000; i++ {
		evs = append(evs, c.ev("l", "t", events.UserMessage{Content: content512(i)}))
	}
	seqs := e.publishAsync(t, evs)
	t.Logf("published in %s", time.Since(start))
	e.waitVersion(t, "l", "t", seqs[len(seqs)-1])
	t.Logf("projected in %s", time.Since(start))
}

package projector_test

import (
	"context"
	"strconv"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/projector"
)

func BenchmarkProfNext(b *testing.B) {
	e := newEnv(b)
	watch := newApplyWatch()
	tb, _ := strconv.Atoi(os.Getenv("TAILB")); e.start(b, projector.Config{TailBytes: tb, OnApply: watch.onApply, OnStep: watch.onStep})
	c := &clock{t: time.Unix(1700000000, 0)}
	evs := []events.Event{c.ev("bench", "t", events.ThreadCreated{})}
	for i := 0; i < 1000; i++ {
		evs = append(evs, c.ev("bench", "t", events.UserMessage{Content: content512(i)}))
	}
	seqs := e.publishAsync(b, evs)
	watch.wait(b, "t", seqs[len(seqs)-1])
	e.waitConsumerIdle(b, "convlog-projector")
	f, _ := os.Create("/tmp/x/next.out")
	pprof.StartCPUProfile(f)
	i := 0
	cpu := cpuTime()
	for b.Loop() {
		seq := e.publish(b, c.ev("bench", "t", events.UserMessage{Content: content512(i)}))
		watch.wait(b, "t", seq)
		i++
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
	pprof.StopCPUProfile()
	f.Close()
}

func BenchmarkProfLoad(b *testing.B) {
	e := newEnv(b)
	watch := newApplyWatch()
	e.start(b, projector.Config{OnApply: watch.onApply, OnStep: watch.onStep})
	c := &clock{t: time.Unix(1700000000, 0)}
	evs := []events.Event{c.ev("bench", "t", events.ThreadCreated{})}
	for i := 0; i < 1000; i++ {
		evs = append(evs, c.ev("bench", "t", events.UserMessage{Content: content512(i)}))
	}
	seqs := e.publishAsync(b, evs)
	watch.wait(b, "t", seqs[len(seqs)-1])
	e.waitConsumerIdle(b, "convlog-projector")
	f, _ := os.Create("/tmp/x/load.out")
	pprof.StartCPUProfile(f)
	cpu := cpuTime()
	for b.Loop() {
		e.snaps.Load(context.Background(), "bench", "t")
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
	pprof.StopCPUProfile()
	f.Close()
}

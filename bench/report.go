package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// labels name the systems in the tables.
var labels = map[string]string{
	sysConvlog:            "convlog",
	sysConvlogCons:        "convlog (consistent)",
	sysConvlogWarm:        "convlog (chunk cache warm)",
	sysConvlogView:        "convlog GetView (chunk cache warm)",
	sysConvlogViewLocal:   "convlog GetView (chunk cache warm, in-process connection)",
	sysConvlogViewTracked: "convlog GetView (chunk cache warm, in-process connection, heads tracked)",
	sysRaw:                "raw JetStream",
	sysRawEnc:             "raw JetStream, encoding each event",
	sysRawKV:              "raw KV",
	sysPG:                 "PostgreSQL",
	sysPGAsync:            "PostgreSQL, sync commit off",
	sysRedis:              "Redis (everysec)",
}

// md accumulates the report.
type md struct{ strings.Builder }

func (m *md) p(format string, args ...any) { fmt.Fprintf(&m.Builder, format+"\n", args...) }

func (m *md) row(cells ...string) { m.p("| %s |", strings.Join(cells, " | ")) }

func (m *md) header(cells ...string) {
	m.row(cells...)
	seps := make([]string, len(cells))
	for i := range seps {
		seps[i] = "---"
		if i > 0 {
			seps[i] = "---:"
		}
	}
	m.row(seps...)
}

// textHeader starts a table whose columns are all left-aligned text.
func (m *md) textHeader(cells ...string) {
	m.row(cells...)
	seps := make([]string, len(cells))
	for i := range seps {
		seps[i] = "---"
	}
	m.row(seps...)
}

// Markdown renders res; out is where it will be written (for relative
// links), notes a hand-written analysis appended when the file exists.
func Markdown(res *Results, out, notes string) string {
	var m md
	m.p("# convlog benchmarks")
	m.p("")
	m.p("Every figure below was measured by [`bench/`](bench/) in **one run on one machine**: convlog next to raw")
	m.p("JetStream (the same server, the same bytes and headers), PostgreSQL and Redis, each started by the run")
	m.p("itself on loopback. Ratios compare figures of this same run. To reproduce:")
	m.p("")
	m.p("```sh")
	m.p("bench/run.sh            # full run: installs PostgreSQL and Redis (Debian packages) if missing, starts them, runs, tears down")
	m.p("bench/run.sh -quick     # development run, about 3 minutes; prints the report (-out, -png to write it)")
	m.p("go run -C bench . -quick # convlog and raw JetStream only, no PostgreSQL or Redis")
	m.p("```")
	m.p("")
	m.p("This report: `%s` (%s mode), %s in all.", res.Command, res.Mode, res.Took.Round(time.Second))
	if res.Merged != "" {
		m.p("Added from another run (`-merge`): %s.", res.Merged)
	}
	m.p("")
	machine(&m, res)
	targets(&m, res)
	if res.Append != nil {
		appendSection(&m, res)
	}
	if res.Get != nil {
		getSection(&m, res, out)
	}
	if res.Lag != nil {
		lagSection(&m, res)
	}
	if res.Replay != nil {
		replaySection(&m, res)
	}
	if res.Turn != nil {
		turnSection(&m, res)
	}
	if res.Memory != nil {
		memorySection(&m, res.Memory, "## 6. Memory")
	}
	if res.Scale != nil {
		memorySection(&m, res.Scale, "### 6a. Memory at a million threads (issue 22, target 5)")
	}
	if res.Soak != nil {
		soakSection(&m, res.Soak)
	}
	if res.Cluster != nil {
		clusterSection(&m, res)
	}
	if notes != "" {
		if b, err := os.ReadFile(notes); err == nil {
			m.p("%s", strings.TrimSpace(string(b)))
			m.p("")
		}
	}
	return m.String()
}

func machine(m *md, res *Results) {
	mc := res.Machine
	m.p("## Machine")
	m.p("")
	m.textHeader("", "")
	m.row("CPU", fmt.Sprintf("%s, %d cores (GOMAXPROCS %d)", mc.CPU, mc.Cores, mc.GOMAXPROCS))
	m.row("memory", fmtBytes(mc.Memory))
	m.row("kernel", mc.Kernel)
	m.row("Go", mc.Go)
	m.row("nats-server", orNA(mc.NATSServer)+" embedded in the bench process (internal/embedded), JetStream file store, 1 replica, default sync (fsync every 2 min)")
	m.row("PostgreSQL", orNA(mc.Postgres)+", own data dir, default settings: fsync on, synchronous_commit on")
	m.row("Redis", orNA(mc.Redis)+" (Debian's package), appendonly yes, appendfsync "+orNA(res.RedisFsync)+", no RDB snapshots")
	m.row("date", mc.Date.Format(time.RFC3339))
	var loads []string
	for _, l := range res.Load {
		loads = append(loads, fmt.Sprintf("%s: %s", l[0], l[1]))
	}
	m.row("load average (1/5/15 min) at each section's start", strings.Join(loads, "; "))
	m.p("")
	m.p("The machine is shared with other engineers' test runs, so the load average above is not zero and")
	m.p("absolute figures are noisy. Systems are measured in rounds, interleaved (sequential appends alternating one")
	m.p("by one and concurrent writers window by window, in a rotating order; Gets in an order shuffled every")
	m.p("iteration, so that no system always follows the same one), so that background load falls on all of them")
	m.p("alike; ratios are more stable than absolute numbers. A target's ratio is the median of the ratios taken")
	m.p("within each round, with the lowest and highest in parentheses. All clients")
	m.p("(and the embedded nats-server) run in the bench process; PostgreSQL and Redis run as their own")
	m.p("processes. Everything talks TCP over loopback.")
	m.p("")
}

func orNA(s string) string {
	if s == "" {
		return "not run"
	}
	return s
}

// target is one line of the targets table.
type target struct{ name, measured, verdict string }

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func targets(m *md, res *Results) {
	var ts []target
	na := func(name, why string) { ts = append(ts, target{name, why, "n/a"}) }
	if a := res.Append; a != nil {
		cr := a.ConcRate[sysConvlog]
		for _, b := range []struct{ sys, what string }{
			{sysRaw, "pre-encoded bytes"},
			{sysRawEnc, "encoding each event"},
		} {
			c, r := a.Seq[sysConvlog], a.Seq[b.sys]
			if r.N == 0 {
				continue // an older -json without this baseline
			}
			sr := roundRatio(a.SeqRatio[b.sys], float64(c.P50), float64(r.P50))
			ts = append(ts, target{"append p50 <= 1.25x raw JetStream (sequential), raw " + b.what,
				fmt.Sprintf("%s; pooled p50s %s vs %s", fmtSpread(sr), fmtDur(c.P50), fmtDur(r.P50)),
				verdict(sr.Median <= 1.25)})
			rr := a.ConcRate[b.sys]
			cc := roundRatio(a.ConcRatio[b.sys], cr, rr)
			ts = append(ts, target{"concurrent append throughput >= 0.8x raw JetStream, raw " + b.what,
				fmt.Sprintf("%s; median round's appends/s %s vs %s", fmtSpread(cc), fmtRate(cr), fmtRate(rr)), verdict(cc.Median >= 0.8)})
		}
		if pr := a.ConcRate[sysPG]; pr > 0 {
			ts = append(ts, target{"concurrent append throughput >= 3x PostgreSQL",
				fmt.Sprintf("%s vs %s = %s", fmtRate(cr), fmtRate(pr), ratio(cr, pr)), verdict(cr >= 3*pr)})
		} else {
			na("concurrent append throughput >= 3x PostgreSQL", "PostgreSQL not run")
		}
	}
	if g := res.Get; g != nil {
		if r := g.row(1000); r != nil {
			// The targets use the Get with the chunk cache off: every
			// byte read from KV, as the baselines read theirs.
			c := r.D[sysConvlog]
			if k := r.D[sysRawKV]; k.Measured() {
				kr := r.ratio(sysConvlog, sysRawKV)
				measured := fmt.Sprintf("%s (chunk cache off); pooled p50s %s vs %s", fmtSpread(kr), fmtDur(c.P50), fmtDur(k.P50))
				if w := r.D[sysConvlogWarm]; w.Measured() {
					measured += fmt.Sprintf("; cache warm: %s (p50 %s)", fmtSpread(r.ratio(sysConvlogWarm, sysRawKV)), fmtDur(w.P50))
				}
				ts = append(ts, target{"Get of 1,000 messages <= 1.5x raw KV get of the same bytes", measured,
					verdict(kr.Median <= 1.5)})
			}
			if rd := r.D[sysRedis]; rd.Measured() {
				ts = append(ts, target{"Get of 1,000 messages <= 1.5x Redis LRANGE",
					fmt.Sprintf("%s vs %s = %s", fmtDur(c.P50), fmtDur(rd.P50), durRatio(c.P50, rd.P50)), verdict(float64(c.P50) <= 1.5*float64(rd.P50))})
			} else {
				na("Get of 1,000 messages <= 1.5x Redis LRANGE", "Redis not run")
			}
			if v, rd := r.D[sysConvlogView], r.D[sysRedis]; v.Measured() && rd.Measured() {
				ts = append(ts, target{"warm Get of 1,000 messages <= 0.1x Redis LRANGE (issue 22: GetView, no copy)",
					fmt.Sprintf("%s vs %s = %s (Get with the cache warm: %s = %s)", fmtDur(v.P50), fmtDur(rd.P50), durRatio(v.P50, rd.P50),
						fmtDur(r.D[sysConvlogWarm].P50), durRatio(r.D[sysConvlogWarm].P50, rd.P50)), verdict(float64(v.P50) <= 0.1*float64(rd.P50))})
			}
			if v, rd := r.D[sysConvlogViewLocal], r.D[sysRedis]; v.Measured() && rd.Measured() {
				ts = append(ts, target{"warm Get of 1,000 messages <= 0.1x Redis LRANGE, in-process connection (Redis over loopback TCP)",
					fmt.Sprintf("%s vs %s = %s", fmtDur(v.P50), fmtDur(rd.P50), durRatio(v.P50, rd.P50)), verdict(float64(v.P50) <= 0.1*float64(rd.P50))})
			}
			if v, rd := r.D[sysConvlogViewTracked], r.D[sysRedis]; v.Measured() && rd.Measured() {
				ts = append(ts, target{"warm Get of 1,000 messages <= 0.1x Redis LRANGE, in-process connection, heads tracked (agentd serve's client: client.Config.TrackSnapshots)",
					fmt.Sprintf("%s vs %s = %s", fmtDur(v.P50), fmtDur(rd.P50), durRatio(v.P50, rd.P50)), verdict(float64(v.P50) <= 0.1*float64(rd.P50))})
			}
			if pg := r.D[sysPG]; pg.Measured() {
				ts = append(ts, target{"Get of 1,000 messages faster than PostgreSQL",
					fmt.Sprintf("%s vs %s = %s", fmtDur(c.P50), fmtDur(pg.P50), durRatio(c.P50, pg.P50)), verdict(c.P50 < pg.P50)})
			} else {
				na("Get of 1,000 messages faster than PostgreSQL", "PostgreSQL not run")
			}
		}
		if e, ok := g.growth(); ok {
			ts = append(ts, target{"Get time grows no faster than the thread's bytes",
				fmt.Sprintf("time grows as bytes^%.2f from 1,000 to %s messages", e, fmtInt(g.Rows[len(g.Rows)-1].N)), verdict(e <= 1.05)})
		}
		first, last := g.Rows[0], g.Rows[len(g.Rows)-1]
		if first.Next.Measured() && last.Next.Measured() && last != first {
			ts = append(ts, target{fmt.Sprintf("next-event projection at %s messages <= 1.5x at %s", fmtInt(last.N), fmtInt(first.N)),
				fmt.Sprintf("%s vs %s (p50 lag) = %s", fmtDur(last.Next.P50), fmtDur(first.Next.P50), durRatio(last.Next.P50, first.Next.P50)),
				verdict(float64(last.Next.P50) <= 1.5*float64(first.Next.P50))})
		}
	}
	if l := res.Lag; l != nil {
		for _, r := range l.Rows {
			if r.Rate == 1000 && !r.Split {
				how := "writers through client/ (conditional publishes)"
				if !r.OCC {
					how = "plain publishes (no OCC header: chained by the projector's delivery order)"
				}
				ts = append(ts, target{"projection lag p99 < 10 ms at 1,000 events/s, " + how,
					fmt.Sprintf("p99 %s (p50 %s)", fmtDur(r.D.P99), fmtDur(r.D.P50)), verdict(r.D.P99 < 10*time.Millisecond)})
			}
		}
	}
	if l := res.Lag; l != nil {
		for _, r := range l.Rows {
			if r.Rate != 5000 {
				continue
			}
			how := "conditional"
			if !r.OCC {
				how = "plain"
			}
			where := "one process (agentd serve's shape)"
			if r.Split {
				where = "nats-server in its own process (deploy/'s shape)"
			}
			ts = append(ts, target{"projection lag p99 < 5 ms at 5,000 events/s over 1,000 threads, " + how + " publishes, " + where + " (issue 22)",
				fmt.Sprintf("p99 %s (p50 %s; %d GC cycles in the bench process)", fmtDur(r.D.P99), fmtDur(r.D.P50), r.GCCycles), verdict(r.D.P99 < 5*time.Millisecond)})
			if r.EventBytes > 0 && !r.Split {
				ts = append(ts, target{"KV bytes written per event byte at 5,000 events/s cut >= 4x (issue 22), " + how,
					fmt.Sprintf("%.1f against %.1f before deltas = %.1fx less", r.Amplification(), ampBefore5k, ampBefore5k/r.Amplification()),
					verdict(r.Amplification()*4 <= ampBefore5k)})
			}
		}
		if l.CatchUp > 0 {
			rate := float64(l.Backlog) / l.CatchUp.Seconds()
			ts = append(ts, target{"catch-up after a projector outage >= 10x 5,000 events/s (issue 22)",
				fmt.Sprintf("%s events (%s s at 5,000/s) over %s threads in %s: %s", fmtInt(l.Backlog), fmtInt(l.Backlog/5000), fmtInt(l.BacklogThreads),
					l.CatchUp.Round(time.Millisecond), fmtRate(rate)), verdict(rate >= 50_000)})
		}
	}
	if r := res.Replay; r != nil {
		v := r.Rates[replayConvlog]
		ts = append(ts, target{"replay >= 100,000 events/s", fmtRate(v) + " (read from the log and fold)", verdict(v >= 100_000)})
		if d := r.Rates[replayDecode]; d > 0 {
			ts = append(ts, target{"replay >= 500,000 events/s, read from the log and fold (issue 22)",
				fmt.Sprintf("%s; the limits: decoding the same bytes in memory %s (%.2fx of it), reading them through a consumer without decoding %s",
					fmtRate(v), fmtRate(d), v/d, fmtRate(r.Rates[replayConsumer])), verdict(v >= 500_000)})
			f := r.Rates[replayFold]
			ts = append(ts, target{"fold alone >= 1,000,000 events/s, messages in memory (issue 22)",
				fmt.Sprintf("%s (%.2fx the decode-only rate %s)", fmtRate(f), f/d, fmtRate(d)), verdict(f >= 1_000_000)})
		}
		if a, ok := r.Rates[replayVerify]; ok {
			ts = append(ts, target{"audit verify >= the replay rate (issue 20)", fmt.Sprintf("%s (%.2fx the replay)", fmtRate(a), a/v), verdict(a >= v)})
		}
	}
	if r := res.Soak; r != nil && len(r.Samples) > 0 {
		base, end := r.Samples[r.Base], r.Samples[len(r.Samples)-1]
		for _, c := range []struct {
			what      string
			base, end ChildMem
		}{{"projector", base.Projector, end.Projector}, {"client", base.Reader, end.Reader}} {
			gh, gr := growth(c.base.HeapAlloc, c.end.HeapAlloc), growth(c.base.RSS, c.end.RSS)
			ts = append(ts, target{fmt.Sprintf("soak (%s at %s/s): %s heap and RSS at the end no more than 10%% above %s (issue 22: within 10%%; a shrink passes)", r.For, fmtInt(r.Rate), c.what, base.At.Round(time.Second)),
				fmt.Sprintf("heap %s -> %s (%+.1f%%), RSS %s -> %s (%+.1f%%)", fmtBytes(c.base.HeapAlloc), fmtBytes(c.end.HeapAlloc), 100*gh, fmtBytes(c.base.RSS), fmtBytes(c.end.RSS), 100*gr),
				verdict(gh <= 0.1 && gr <= 0.1)})
		}
	}
	if len(ts) == 0 {
		return
	}
	ratioTargets(m, res)
	m.p("## Targets (issues 3, 4, 5, 9 and 22)")
	m.p("")
	m.textHeader("target", "measured (this run)", "verdict")
	for _, t := range ts {
		m.row(t.name, t.measured, t.verdict)
	}
	m.p("")
}

// ratioTargets writes the targets judged as ratios to a limit measured in
// the same run: each line gives the ratio, the limit's figure and the
// verdict.
func ratioTargets(m *md, res *Results) {
	var ts []target
	if a := res.Append; a != nil && a.Seq[sysRawEnc].Measured() {
		c, r := a.Seq[sysConvlog], a.Seq[sysRawEnc]
		cr, rr := a.ConcRate[sysConvlog], a.ConcRate[sysRawEnc]
		cc := roundRatio(a.ConcRatio[sysRawEnc], cr, rr)
		ts = append(ts, target{fmt.Sprintf("append, %d writers: appends/s >= 0.85x raw JetStream encoding each event", res.appendWriters()),
			fmt.Sprintf("%s (limit: raw %s, convlog %s; median rounds)", fmtSpread(cc), fmtRate(rr), fmtRate(cr)), verdict(cc.Median >= 0.85)})
		sr := roundRatio(a.SeqRatio[sysRawEnc], float64(c.P50), float64(r.P50))
		ts = append(ts, target{"append, sequential: p50 <= 1.15x raw JetStream encoding each event",
			fmt.Sprintf("%s (limit: raw p50 %s, convlog %s; pooled)", fmtSpread(sr), fmtDur(r.P50), fmtDur(c.P50)), verdict(sr.Median <= 1.15)})
		if a.CPU[sysRawEnc] > 0 {
			cpu := roundRatio(a.CPURatio[sysRawEnc], float64(a.CPU[sysConvlog]), float64(a.CPU[sysRawEnc]))
			ts = append(ts, target{"append: CPU per append (getrusage of the bench process, the embedded server included) <= 1.5x the raw writer encoding each event",
				fmt.Sprintf("%s (limit: raw %s, convlog %s per append; median rounds)", fmtSpread(cpu), fmtDur(a.CPU[sysRawEnc]), fmtDur(a.CPU[sysConvlog])), verdict(cpu.Median <= 1.5)})
		}
	}
	if c := res.Cluster; c != nil && c.Append != nil && c.Append.CPU[sysRawEnc] > 0 {
		a := c.Append
		cpu := roundRatio(a.CPURatio[sysRawEnc], float64(a.CPU[sysConvlog]), float64(a.CPU[sysRawEnc]))
		ts = append(ts, target{"append: CPU per append of the writers' process, the servers in processes of their own (section 7: 3 nodes, replicas 3) <= 1.5x the raw writer encoding each event",
			fmt.Sprintf("%s (limit: raw %s, convlog %s per append; median rounds)", fmtSpread(cpu), fmtDur(a.CPU[sysRawEnc]), fmtDur(a.CPU[sysConvlog])), verdict(cpu.Median <= 1.5)})
	}
	if r := res.Replay; r != nil && r.Sealing.Open > 0 {
		ts = append(ts, target{"opening one sealed event <= 0.5 µs",
			fmt.Sprintf("%s (decoding the clear event: %s; %.2fx)", fmtDur(r.Sealing.Open), fmtDur(r.Sealing.Decode), float64(r.Sealing.Open)/float64(max(1, r.Sealing.Decode))),
			verdict(r.Sealing.Open <= 500*time.Nanosecond)})
		ts = append(ts, target{"sealing one event <= 0.5 µs", fmtDur(r.Sealing.Seal), verdict(r.Sealing.Seal <= 500*time.Nanosecond)})
	}
	if g := res.Get; g != nil {
		if r := g.row(1000); r != nil && r.D[sysRawKV].Measured() {
			kr := r.ratio(sysConvlog, sysRawKV)
			ts = append(ts, target{"cold Get of 1,000 messages (chunk cache off) <= 1.25x one raw KV get of the same bytes",
				fmt.Sprintf("%s (limit: raw KV get p50 %s, convlog %s; pooled)", fmtSpread(kr), fmtDur(r.D[sysRawKV].P50), fmtDur(r.D[sysConvlog].P50)),
				verdict(kr.Median <= 1.25)})
		}
	}
	if r := res.Replay; r != nil {
		if c := r.Rates[replayConsumer]; c > 0 {
			v := r.Rates[replayConvlog]
			cr := roundRatio(r.ConsumerRatio, v, c)
			ts = append(ts, target{"replay (read + open + fold) >= 0.9x reading the same events through a consumer without decoding",
				fmt.Sprintf("%s (limit: consumer read %s, replay %s; medians; %s events)", fmtSpread(cr), fmtRate(c), fmtRate(v), fmtInt(r.Events)), verdict(cr.Median >= 0.9)})
		}
	}
	if l := res.Lag; l != nil {
		for _, r := range l.Rows {
			if r.Rate != 5000 || !r.Consumer.Measured() {
				continue
			}
			how := "conditional"
			if !r.OCC {
				how = "plain"
			}
			q := roundRatio(r.Ratio, float64(r.D.P99), float64(r.Consumer.P99))
			// The 10 ms bound is of the p99 of every event of the rate
			// (pooled), not of the median round's: a round's p99 leaves
			// out the rounds whose tail was worst.
			p99 := cmp.Or(r.RoundP99, r.D.P99)
			name := fmt.Sprintf("projection lag p99 at 5,000 events/s, %s publishes, server in process: <= 3x a plain consumer's delivery lag p99 and <= 10 ms", how)
			// The ratio is the rounds' geometric mean: a round's ratio
			// follows whether one stall or queue landed in its window,
			// and every round counts by its logarithm, so that the
			// figure holds between runs that the median of a few rounds
			// does not.
			ok := q.typical() <= 3 && r.D.P99 <= 10*time.Millisecond
			if r.Split {
				name = fmt.Sprintf("projection lag p99 at 5,000 events/s, %s publishes, server in its own process: <= 3x a plain consumer's delivery lag p99", how)
				ok = q.typical() <= 3
			}
			ts = append(ts, target{name, fmt.Sprintf("%s (limit: consumer p99 %s, projection %s; pooled; projection p99 median round %s)",
				fmtGeoSpread(q), fmtDur(r.Consumer.P99), fmtDur(r.D.P99), fmtDur(p99)), verdict(ok)})
		}
	}
	if len(ts) == 0 {
		return
	}
	m.p("## Targets as ratios to a limit measured in the same run (issue 41)")
	m.p("")
	m.textHeader("target", "ratio (limit in the same run)", "verdict")
	for _, t := range ts {
		m.row(t.name, t.measured, t.verdict)
	}
	m.p("")
}

// roundRatio is s, or, when s was not measured (the -json of a run that
// kept no per-round ratios), the ratio of the pooled figures a/b as one
// round.
func roundRatio(s Spread, a, b float64) Spread {
	if s.Measured() || a <= 0 || b <= 0 {
		return s
	}
	return spreadOf([]float64{a / b})
}

// ratio is the per-round ratio of system a's Get p50 to system b's, or of
// their pooled p50s (see roundRatio).
func (r *GetRow) ratio(a, b string) Spread {
	return roundRatio(r.Ratios[ratioKey(a, b)], float64(r.D[a].P50), float64(r.D[b].P50))
}

// row returns the row of thread length n.
func (g *GetResults) row(n int) *GetRow {
	for _, r := range g.Rows {
		if r.N == n {
			return r
		}
	}
	return nil
}

// growth returns the exponent e in time ~ bytes^e of the snapshot Get,
// fitted between the 1,000-message row and the longest.
func (g *GetResults) growth() (float64, bool) {
	a, b := g.row(1000), g.Rows[len(g.Rows)-1]
	if a == nil || b == a || !a.D[sysConvlog].Measured() || !b.D[sysConvlog].Measured() {
		return 0, false
	}
	return math.Log(float64(b.D[sysConvlog].P50)/float64(a.D[sysConvlog].P50)) / math.Log(float64(b.EventBytes)/float64(a.EventBytes)), true
}

func appendSection(m *md, res *Results) {
	a := res.Append
	m.p("## 1. Append one message (durable ack)")
	m.p("")
	m.p("One ~600-byte event (a user message with 512 bytes of text), each append acknowledged by the store:")
	m.p("")
	m.p("- **convlog**: `client.Append(..., client.ExpectVersion(v))`: completes and validates the event, checks it")
	m.p("  against the thread's cached state with the projector's fold, then one JetStream publish with")
	m.p("  `Nats-Msg-Id`, `Nats-Expected-Last-Subject-Sequence` and `Nats-Expected-Stream`;")
	m.p("- **raw JetStream**: `PublishMsg` of the same msgpack bytes with the same headers, on the same")
	m.p("  connection and server, to a stream with the same configuration (nothing validated); the bytes")
	m.p("  are encoded once, before the run;")
	m.p("- **raw JetStream, encoding each event**: the same, but each append encodes a new event")
	m.p("  (`events.Marshal` of a fresh envelope, its id the `Nats-Msg-Id`), as any writer of the event must;")
	m.p("  still nothing validated, no version read, no state kept;")
	m.p("- **PostgreSQL**: `INSERT` of the same bytes into `(thread_id, seq, created_at, body bytea)` with")
	m.p("  primary key `(thread_id, seq)` (the OCC equivalent: seq = the version read + 1) and an index on")
	m.p("  `(thread_id, created_at)`, `synchronous_commit = on` (the commit waits for the WAL fsync); the")
	m.p("  `sync commit off` column is the same with `synchronous_commit = off`;")
	m.p("- **Redis**: `RPUSH` of the same bytes, no version check.")
	m.p("")
	m.p("convlog's appends here go to a stream and buckets of their own (the same configuration as convlog's")
	m.p("default ones) so that the later sections' projector does not have to catch up with them.")
	m.p("")
	m.p("**Durability differs**, read the ratios with it in mind: JetStream acknowledges once the message is")
	m.p("written to its file store (the OS page cache; nats-server fsyncs every 2 minutes by default, a single")
	m.p("replica survives a process crash but not a power loss; production durability comes from 3 replicas);")
	m.p("PostgreSQL with synchronous_commit on has fsynced its WAL (the strongest here); Redis with")
	m.p("appendfsync everysec may lose the last second on a crash of the machine, like PostgreSQL with")
	m.p("synchronous_commit off. The projector is not running during this section (appends never wait for it).")
	m.p("")
	sys := a.Systems
	cols := []string{"figure"}
	for _, s := range sys {
		cols = append(cols, labels[s])
	}
	cols = append(cols, "convlog / raw JetStream", "convlog / raw JetStream, encoding", "convlog / PostgreSQL", "convlog / Redis")
	m.header(cols...)
	lat := func(name string, get func(string) time.Duration) {
		cells := []string{name}
		for _, s := range sys {
			cells = append(cells, fmtDur(get(s)))
		}
		c := get(sysConvlog)
		cells = append(cells, durRatio(c, get(sysRaw)), durRatio(c, get(sysRawEnc)), durRatio(c, get(sysPG)), durRatio(c, get(sysRedis)))
		m.row(cells...)
	}
	// spreads is the row of per-round ratios of rs, the pooled figures' as
	// one round when rs has none.
	spreads := func(name string, rs map[string]Spread, get func(string) float64) {
		cells := []string{name}
		for range sys {
			cells = append(cells, "")
		}
		for _, b := range []string{sysRaw, sysRawEnc, sysPG, sysRedis} {
			cells = append(cells, fmtSpread(roundRatio(rs[b], get(sysConvlog), get(b))))
		}
		m.row(cells...)
	}
	lat("sequential p50", func(s string) time.Duration { return a.Seq[s].P50 })
	spreads("sequential p50, ratio per round: median (min-max)", a.SeqRatio, func(s string) float64 { return float64(a.Seq[s].P50) })
	lat("sequential p99", func(s string) time.Duration { return a.Seq[s].P99 })
	lat(fmt.Sprintf("%d writers / %s threads: p50", res.appendWriters(), fmtInt(res.appendThreads())), func(s string) time.Duration { return a.Conc[s].P50 })
	lat(fmt.Sprintf("%d writers / %s threads: p99", res.appendWriters(), fmtInt(res.appendThreads())), func(s string) time.Duration { return a.Conc[s].P99 })
	cells := []string{fmt.Sprintf("%d writers: appends/s (ratio > 1: convlog faster)", res.appendWriters())}
	for _, s := range sys {
		cells = append(cells, fmtRate(a.ConcRate[s]))
	}
	c := a.ConcRate[sysConvlog]
	cells = append(cells, ratio(c, a.ConcRate[sysRaw]), ratio(c, a.ConcRate[sysRawEnc]), ratio(c, a.ConcRate[sysPG]), ratio(c, a.ConcRate[sysRedis]))
	m.row(cells...)
	spreads(fmt.Sprintf("%d writers: appends/s, ratio per round: median (min-max)", res.appendWriters()), a.ConcRatio, func(s string) float64 { return a.ConcRate[s] })
	if a.CPU[sysConvlog] > 0 {
		lat(fmt.Sprintf("%d writers: CPU of the bench process per append (getrusage; the embedded server included)", res.appendWriters()), func(s string) time.Duration { return a.CPU[s] })
		spreads(fmt.Sprintf("%d writers: CPU per append, ratio per round: median (min-max)", res.appendWriters()), a.CPURatio, func(s string) float64 { return float64(a.CPU[s]) })
	}
	m.p("")
	m.p("Latency ratios below 1 mean convlog is faster. Samples: %s sequential and %s concurrent appends per",
		fmtInt(a.Seq[sysConvlog].N), fmtInt(a.Conc[sysConvlog].N))
	m.p("system for convlog, pooled over %d interleaved rounds; throughput is the median round's. The \"ratio per", res.appendRounds())
	m.p("round\" rows take convlog's figure over the baseline's within each round (in which the systems alternate,")
	m.p("so they share its background load) and give the median over the rounds, with the lowest and highest; the")
	m.p("targets use that median.")
	m.p("")
}

func getSection(m *md, res *Results, out string) {
	g := res.Get
	m.p("## 2. Get a whole thread")
	m.p("")
	m.p("Threads of N messages (user and assistant alternating, 512 bytes of text each; built with client appends of")
	m.p("atomic 1,000-event turns), read whole:")
	m.p("")
	m.p("- **convlog (chunk cache off)**: `client.Get` after the projector caught up, by a client with")
	m.p("  `ChunkCacheBytes: -1`: one KV get of the snapshot head plus the history chunks (8 at a time), decoded")
	m.p("  into `[]events.Message`, every byte read from KV (the figure the targets use);")
	m.p("- **convlog (chunk cache warm)**: the same by a client with the default 64 MiB cache of decoded chunks,")
	m.p("  which the warm-up round filled: one KV get of the head, then the cached messages copied into a new")
	m.p("  `[]events.Message` (chunks never change, so a chunk the head names is served from the cache);")
	m.p("- **convlog GetView (chunk cache warm)**: `client.GetView` by the same client: the head's get and no copy")
	m.p("  of the history (a `ThreadView` addresses the cached chunks' messages, shared and read-only);")
	m.p("- **convlog GetView (chunk cache warm, in-process connection)**: the same on a client whose connection")
	m.p("  is in process (`nats.InProcessServer`), as `agentd serve`'s HTTP API reads its embedded server: no")
	m.p("  loopback TCP for the head's get (Redis is read over loopback TCP);")
	m.p("- **convlog GetView (chunk cache warm, in-process connection, heads tracked)**: the same by a client")
	m.p("  with `client.Config.TrackSnapshots`, as `agentd serve`'s: a watch of the snapshot bucket's heads")
	m.p("  (an ordered consumer, headers only) vouches that a head read before is unchanged, and the view skips")
	m.p("  the head's get (client-side caching with server-assisted invalidation, as Redis's CLIENT TRACKING;")
	m.p("  Redis here is read without it); a changed head is read again;")
	m.p("- **convlog (consistent)**: `client.Get(..., client.Consistent())`, chunk cache off: the same plus a")
	m.p("  read of the log past the snapshot (empty here) so the answer includes every acknowledged event (why")
	m.p("  that empty read costs milliseconds on the older threads: see the analysis at the end);")
	m.p("- **raw KV**: one JetStream KV get of a value holding the thread's events (the same bytes as the log,")
	m.p("  PostgreSQL and Redis hold), not decoded; impossible beyond the 1 MiB max_payload;")
	m.p("- **PostgreSQL**: `SELECT seq, created_at, body ... WHERE thread_id = $1 ORDER BY created_at` (index")
	m.p("  `(thread_id, created_at)`), rows scanned into Go values, bodies not decoded;")
	m.p("- **Redis**: `LRANGE key 0 -1`, values not decoded.")
	m.p("")
	m.p("So convlog's figures include decoding into structured messages, the baselines' do not. Every Get was")
	m.p("checked to return the whole thread (N messages, or N+1 events with `thread.created`).")
	m.p("")
	cols := []string{"messages", "log bytes"}
	for _, s := range g.Systems {
		l := labels[s]
		switch s {
		case sysRedis:
			l = "Redis"
		case sysConvlog:
			l = "convlog (chunk cache off)"
		}
		cols = append(cols, l+" p50 (p99)")
	}
	warm := g.Rows[0].D[sysConvlogWarm].Measured()
	cols = append(cols, "convlog / raw KV", "convlog / PostgreSQL", "convlog / Redis")
	if warm {
		cols = append(cols, "convlog cache warm / raw KV")
	}
	m.header(cols...)
	for _, r := range g.Rows {
		cells := []string{fmtInt(r.N), fmtBytes(uint64(r.EventBytes))}
		for _, s := range g.Systems {
			d := r.D[s]
			switch {
			case r.Notes[s] != "":
				cells = append(cells, r.Notes[s])
			case d.Measured():
				cells = append(cells, fmt.Sprintf("%s (%s)", fmtDur(d.P50), fmtDur(d.P99)))
			default:
				cells = append(cells, "–")
			}
		}
		both := func(b string) string {
			if !r.D[b].Measured() {
				return "–"
			}
			return fmtSpread(r.ratio(sysConvlog, b)) + "; consistent " + fmtSpread(r.ratio(sysConvlogCons, b))
		}
		cells = append(cells, both(sysRawKV), both(sysPG), both(sysRedis))
		if warm {
			if !r.D[sysConvlogWarm].Measured() || !r.D[sysRawKV].Measured() {
				cells = append(cells, "–")
			} else {
				cells = append(cells, fmtSpread(r.ratio(sysConvlogWarm, sysRawKV)))
			}
		}
		m.row(cells...)
	}
	m.p("")
	m.p("Samples per system: %s. A thread length's Gets are split into %d consecutive rounds (every system", getSamples(g), max(1, res.Params.Get.Rounds))
	m.p("read once per iteration, in a shuffled order); each ratio is the median over the rounds of the ratio of")
	m.p("the two systems' p50s in the round, with the lowest and highest; below 1 means convlog is faster. The")
	m.p("convlog ratios are of the Get with the chunk cache off (and of the consistent one), unless marked warm.")
	if g.CollectFrom > 0 {
		m.p("From %s messages on, every Get of every system starts after a forced garbage collection, so that", fmtInt(g.CollectFrom))
		m.p("the garbage of the read before it (a 100,000-element LRANGE leaves about 70 MB in this process, which all")
		m.p("the clients share) is not collected during its read.")
	}
	m.p("")
	if res.chartPath != "" {
		link := res.chartPath
		if out != "" {
			if rel, err := filepath.Rel(filepath.Dir(out), res.chartPath); err == nil {
				link = rel
			}
		}
		m.p("![Get latency against thread length, log-log](%s)", filepath.ToSlash(link))
		m.p("")
	}
	m.p("Cost per KiB of the thread (convlog snapshot Get with the chunk cache off, p50), and what a snapshot Get")
	m.p("reads from KV with the cache off and warm:")
	m.p("")
	m.header("messages", "log bytes", "snapshot bytes read (cache off)", "bytes read (cache warm)", "chunks", "convlog µs per KiB", "PostgreSQL µs per KiB", "Redis µs per KiB")
	for _, r := range g.Rows {
		per := func(s string) string {
			d := r.D[s]
			if !d.Measured() {
				return "–"
			}
			return fmt.Sprintf("%.2f", float64(d.P50.Microseconds())/(float64(r.EventBytes)/1024))
		}
		headBytes := "–"
		if r.HeadBytes > 0 {
			headBytes = fmtBytes(uint64(r.HeadBytes))
		}
		m.row(fmtInt(r.N), fmtBytes(uint64(r.EventBytes)), fmtBytes(uint64(r.SnapshotBytes)), headBytes, fmt.Sprintf("%d", r.Chunks),
			per(sysConvlog), per(sysPG), per(sysRedis))
	}
	m.p("")
	if g.Rows[0].Next.Measured() {
		m.p("### Projecting the next event, by thread length")
		m.p("")
		m.p("One event appended to each of the threads above, one at a time, while nothing else is written: the")
		m.p("projection lag (OnApply `Lag`: the event's stream timestamp to its snapshot head written) and the")
		m.p("projection step's own time (OnStep `Took`: read the new events, fold, write chunks if due, CAS the head).")
		m.p("")
		m.header("messages in the thread", "lag p50", "lag p99", "step p50", "step p99", "lag p50 / shortest thread's")
		for _, r := range g.Rows {
			m.row(fmtInt(r.N), fmtDur(r.Next.P50), fmtDur(r.Next.P99), fmtDur(r.Step.P50), fmtDur(r.Step.P99),
				durRatio(r.Next.P50, g.Rows[0].Next.P50))
		}
		m.p("")
		m.p("%d events per length.", g.Rows[0].Next.N)
		m.p("")
	}
}

func getSamples(g *GetResults) string {
	var s []string
	for _, r := range g.Rows {
		s = append(s, fmt.Sprintf("%d at %s messages", r.D[sysConvlog].N, fmtInt(r.N)))
	}
	return strings.Join(s, ", ")
}

func lagSection(m *md, res *Results) {
	l := res.Lag
	m.p("## 3. Projection lag at a steady rate")
	m.p("")
	m.p("User messages published at a paced, steady rate, round robin over %s threads (async publishes of valid", fmtInt(res.lagThreads()))
	m.p("events, so the publisher is never the bottleneck), with the projector (%d workers, in process) keeping the", l.workers())
	m.p("snapshots up to date. Lag is OnApply's `Lag` of every event of the measured window (after a warm-up):")
	m.p("from the event's stream timestamp to the moment the snapshot head holding it was written. PostgreSQL and")
	m.p("Redis have no projection (a reader of them decodes and folds on every read), so there is no ratio here.")
	m.p("Each row starts after a forced garbage collection, so that what ran before it is not collected during it.")
	if l.GOGC != 0 {
		m.p("The bench process runs the section under `agentd serve`'s collector settings (`memtune.Set`): GOGC %d", l.GOGC)
		m.p("under a soft memory limit of %.1f GiB.", float64(l.MemoryLimit)/(1<<30))
	}
	m.p("")
	if p := res.Params.Lag; p.Rounds > 0 {
		var at []string
		for _, rate := range slices.Sorted(maps.Keys(p.RoundsAt)) {
			at = append(at, fmt.Sprintf("; %d at %s/s", p.rounds(rate), fmtInt(rate)))
		}
		m.p("Each rate runs both kinds of publish, each on threads of its own, in %d interleaved rounds%s: a round publishes", p.Rounds, strings.Join(at, ""))
		m.p("a warm-up (%s), then a window (%s) of each kind at the rate (which kind first alternating round by round), then waits", fmtDur(p.Warmup), fmtDur(p.window()))
		m.p("until everything is projected, so that both kinds and the plain consumer they are judged against share the")
		m.p("machine's load and no round inherits the previous one's backlog. Each window gives its kind the ratio of the")
		m.p("projection lag p99 of its events to the plain consumer's p99 of the same events; the ratio column is the")
		m.p("geometric mean over the rounds (every round counts, one far round by its share) with the median, lowest")
		m.p("and highest, the other lag columns pool the kind's windows. The GC,")
		m.p("allocation, KV, backlog and drain columns are of the whole run of the rate, both kinds (drain: the longest")
		m.p("round's).")
	} else {
		m.p("Each rate is run twice, on threads of its own, one window each.")
	}
	m.p("")
	m.p("**Conditional**: every event carries its thread's version in")
	m.p("`Nats-Expected-Last-Subject-Sequence` (taken from the thread's previous publish ack), as `client.Append` and")
	m.p("agentd write every event; the projector folds such an event straight onto the head it chains onto. **Plain**:")
	m.p("no such header, as a writer that publishes to the stream directly might; a single projector instance then")
	m.p("knows each event's predecessor from the order of its consumer's deliveries (consecutive consumer sequences),")
	m.p("and folds it the same way; instances that share the consumer see gaps and check the log with one get per event.")
	m.p("")
	m.header("publishes", "nats-server", "target rate", "achieved", "events measured", "lag p50", "lag p99", "lag max",
		"plain consumer's delivery lag p50 / p99", "lag p99 / consumer's p99 (rounds' geometric mean)", "max consumer backlog", "drained after the last publish",
		"KV bytes written per event byte (heads / deltas / chunks / index)", "GC cycles of the bench process (GC CPU)", "heap objects allocated per event in the bench process")
	for _, r := range l.Rows {
		how := "conditional"
		if !r.OCC {
			how = "plain"
		}
		where := "in process"
		if r.Split {
			where = "own process"
		}
		amp := "n/a"
		if r.EventBytes > 0 {
			per := func(n uint64) string { return fmt.Sprintf("%.1f", float64(n)/float64(r.EventBytes)) }
			amp = fmt.Sprintf("**%.1f** (%s / %s / %s / %s)", r.Amplification(), per(r.KV.HeadBytes), per(r.KV.DeltaBytes), per(r.KV.ChunkBytes), per(r.KV.IndexBytes))
		}
		cons, consRatio, allocs := "–", "–", "–"
		if r.Consumer.Measured() {
			cons, consRatio = fmtDur(r.Consumer.P50)+" / "+fmtDur(r.Consumer.P99), fmtGeoSpread(roundRatio(r.Ratio, float64(r.D.P99), float64(r.Consumer.P99)))
		}
		if r.Allocs > 0 {
			allocs = fmt.Sprintf("%.0f", r.Allocs)
		}
		m.row(how, where, fmtRate(float64(r.Rate)), fmtRate(r.Achieved), fmtInt(r.Measured)+" of "+fmtInt(r.Published),
			fmtDur(r.D.P50), fmtDur(r.D.P99), fmtDur(r.D.Max), cons, consRatio, fmtInt(r.MaxBehind), fmtDur(r.Drain), amp,
			fmt.Sprintf("%d (%s)", r.GCCycles, r.GCCPU.Round(time.Millisecond)), allocs)
	}
	m.p("")
	m.p("**nats-server**: \"in process\" rows run the embedded server, the publisher and the projector in the bench")
	m.p("process, as `agentd serve` runs them (the projector on an in-process connection, as agentd's; the publisher")
	m.p("on TCP, as another service); \"own process\" rows run the server in a child process of its own, as")
	m.p("deploy/ does, with the publisher and the projector still in the bench process. In one process the server's")
	m.p("heap (its message block cache: every block written or read stays cached 10 s) is most of what each garbage")
	m.p("collection marks, and the lag's tail follows the collections: the GC column counts those that ran during the")
	m.p("row's warm-up and window.")
	m.p("")
	m.p("**The limit**: beside the projector, a plain consumer (nats.go's ordered consumer on a connection of its")
	m.p("own, no filter subject as the projector's, nothing decoded) receives the same row's events; its delivery lag")
	m.p("is the stream timestamp to receipt.")
	m.p("The projection lag cannot be below it: the projector receives each event the same way, then folds it and")
	m.p("writes the head. Heap objects per event count every allocation of the bench process during the row")
	m.p("(runtime/metrics), divided by the events published: the publisher's, the plain consumer's, the projector's")
	m.p("and, in process, the server's.")
	m.p("")
	m.p("**Write amplification** (issue 22, target 1): the bytes the projector wrote to KV during the row (heads,")
	m.p("deltas, chunks and index entries as stored, sealed; from `projector.Projector.KVWritten`) divided by the bytes of")
	m.p("the events published in it (warm-up included, as stored). Every projection step writes the messages it")
	m.p("added once, as a delta, a head that carries the state and the chunk list but no messages, and the index")
	m.p("entry; deltas are joined into the open chunks once they reach 16-32 KiB, and open chunks merge like a binary counter (snapstore's package doc). Before")
	m.p("deltas (the full run of 2026-11-26, commit eacfe93) the head carried those messages and was rewritten")
	m.p("with every event: %.1f at 1,000/s and %.1f at 5,000/s.", ampBefore1k, ampBefore5k)
	m.p("")
	if l.Backlog > 0 {
		m.p("**Catch-up**: with the projector stopped, %s events were published round robin over %s new threads;", fmtInt(l.Backlog), fmtInt(l.BacklogThreads))
		m.p("restarted, it projected them in %s: **%s**. That is its rate when each projection step folds", l.CatchUp.Round(time.Millisecond), fmtRate(float64(l.Backlog)/l.CatchUp.Seconds()))
		m.p("many events of a thread; at a steady rate spread over as many threads each event is a step of its own,")
		m.p("which costs more per event, so the steady rate it can hold with a bounded lag is lower.")
		m.p("")
	}
}

func replaySection(m *md, res *Results) {
	r := res.Replay
	m.p("## 4. Replay: fold a thread from the log")
	m.p("")
	m.p("One thread of %s events (the longest of section 2), folded from its first event into the projected", fmtInt(r.Events))
	m.p("state; events per second, median of %d runs per way.", res.replayReps())
	m.p("")
	m.header("way", "events/s", "convlog replay / this")
	c := r.Rates[replayConvlog]
	for _, w := range r.Order {
		m.row(w, fmtRate(r.Rates[w]), ratio(c, r.Rates[w]))
	}
	m.p("")
	m.p("A ratio above 1 means convlog's replay is faster than that way.")
	if r.ConsumerRatio.Measured() {
		m.p("Against the consumer read, run by run (each run reads the thread %d times with convlog's replay and %d times", pairRepeat(r.Events), pairRepeat(r.Events))
		m.p("through the consumer, one read at a time in the order AB BA AB ..., each read timed alone after a collection,")
		m.p("and takes the fastest read of each, the one the machine's other load disturbed least; then every other way")
		m.p("once, in a rotating order): %s.", fmtSpread(r.ConsumerRatio))
	}
	m.p("")
	if sc := r.Sealing; sc.Open > 0 {
		m.p("**Sealing**, per event, over the thread's first %s events (threadkey's `SealEvent` and `OpenEvent`, the", fmtInt(min(r.Events, sealSample)))
		m.p("thread's key cached; median of the runs): sealing %s, opening %s, decoding the clear event %s.", fmtDur(sc.Seal), fmtDur(sc.Open), fmtDur(sc.Decode))
		m.p("")
	}
}

func turnSection(m *md, res *Results) {
	t := res.Turn
	m.p("## 5. Agent turn overhead (offline model)")
	m.p("")
	m.p("Agent workers (`agentd/worker`, the offline `demo` model with the built-in tools) and the HTTP API")
	m.p("(`agentd/httpapi`, served on loopback) run in the bench process on the same client, as in `agentd serve`.")
	m.p("For each turn a user message is appended (`client.Append`), and from its acknowledgement the time until")
	m.p("the final assistant message arrives is taken by two readers of the thread that were connected before:")
	m.p("an SSE stream (`GET /v1/threads/{id}/events`, `Accept: text/event-stream`) and `client.Watch`. The offline")
	m.p("model answers in microseconds, so this is convlog's own overhead: the worker's delivery, a consistent")
	m.p("read, the model call, the append of the turn, and the delivery to the reader. \"echo\" is one model")
	m.p("step; \"tool\" is a calculator call, its result and the final answer (two model steps, two appends).")
	m.p("")
	m.header("turn", "over SSE p50", "over SSE p99", "client.Watch p50", "client.Watch p99", "worker's own time p50", "worker's own time p99", "turns")
	for _, k := range t.Kinds {
		m.row(k, fmtDur(t.SSE[k].P50), fmtDur(t.SSE[k].P99), fmtDur(t.Watch[k].P50), fmtDur(t.Watch[k].P99),
			fmtDur(t.Worker[k].P50), fmtDur(t.Worker[k].P99), fmt.Sprintf("%d", t.SSE[k].N))
	}
	m.p("")
	m.p("There is no baseline here: PostgreSQL and Redis have no agent workers; the figure to compare with is a")
	m.p("real model's latency (hundreds of milliseconds to seconds).")
	m.p("")
}

func memorySection(m *md, r *MemResults, heading string) {
	m.p("%s", heading)
	m.p("")
	m.p("A fresh nats-server, projector and agent worker, **each in its own process** (the bench binary re-executed")
	m.p("in a role), so that each figure is that part's own. %s threads of %d messages (%d bytes of text each,", fmtInt(r.Threads), r.Messages, r.Content)
	m.p("%s events, %s in the stream) were published like an import (each thread's events back to back) and", fmtInt(r.Events), fmtBytes(r.StreamBytes))
	m.p("projected (%s for publishing and projecting: %s); then %s threads got one more user", r.LoadTook.Round(time.Second), fmtRate(float64(r.Events)/r.LoadTook.Seconds()), fmtInt(r.WorkerTurns))
	m.p("message each, answered by the worker (%s turns in %s: %s).", fmtInt(r.Turns), r.TurnsTook.Round(time.Second), fmtRate(float64(r.Turns)/r.TurnsTook.Seconds()))
	if r.Reads > 0 {
		m.p("Then a client process (`client.New` and `Get`, as a reading service) read %s threads spread over all", fmtInt(r.Reads))
		m.p("of them, 8 at a time (%s: %s).", r.ReadsTook.Round(time.Millisecond), fmtRate(float64(r.Reads)/r.ReadsTook.Seconds()))
	}
	m.p("")
	m.p("Heap is the Go runtime's live heap after a forced GC (`runtime.ReadMemStats`: HeapAlloc, in the process")
	m.p("itself); RSS is the kernel's resident set (VmRSS), which also holds freed heap the runtime has not returned")
	m.p("yet, and peak is VmHWM. The server's figures include JetStream's in-memory indexes of the stream and")
	m.p("buckets (per-subject state: one subject per thread, plus the snapshot and index keys).")
	m.p("")
	m.header("process", "idle: heap / RSS", "after load: heap / RSS", "after worker turns: heap / RSS", "peak RSS", "goroutines")
	hr := func(c ChildMem) string {
		if c.RSS == 0 && c.HeapAlloc == 0 {
			return "–"
		}
		return fmtBytes(c.HeapAlloc) + " / " + fmtBytes(c.RSS)
	}
	m.row("nats-server", hr(r.ServerIdle), hr(r.ServerLoaded), hr(r.ServerAfter), fmtBytes(r.ServerAfter.HWM), fmt.Sprintf("%d", r.ServerAfter.Goroutines))
	m.row("projector", hr(r.ProjectorIdle), hr(r.ProjectorLoaded), hr(r.ProjectorAfter), fmtBytes(r.ProjectorAfter.HWM), fmt.Sprintf("%d", r.ProjectorAfter.Goroutines))
	m.row("agent worker", hr(r.WorkerIdle), "(started after the load)", hr(r.WorkerAfter), fmtBytes(r.WorkerAfter.HWM), fmt.Sprintf("%d", r.WorkerAfter.Goroutines))
	if r.Reads > 0 {
		m.row(fmt.Sprintf("client (%s Gets)", fmtInt(r.Reads)), hr(r.ReaderIdle), "(started after the load)", hr(r.ReaderAfter), fmtBytes(r.ReaderAfter.HWM), fmt.Sprintf("%d", r.ReaderAfter.Goroutines))
	}
	m.p("")
	if r.Threads > 0 && r.ServerLoaded.HeapAlloc > r.ServerIdle.HeapAlloc {
		perThread := float64(r.ServerLoaded.HeapAlloc-r.ServerIdle.HeapAlloc) / float64(r.Threads)
		m.p("The server's cost per thread: %s of heap (its heap after the load less idle, over %s threads: each", fmtBytes(uint64(perThread)), fmtInt(r.Threads))
		m.p("thread is a subject of the stream, a head and an index key, and the stream's message index).")
		m.p("")
	}
	m.p("`agentd serve` runs the server, the projector and the worker in one process: its footprint is about the sum of their rows.")
	m.p("")
}

func soakSection(m *md, r *SoakResults) {
	if len(r.Samples) == 0 {
		return
	}
	base, end := r.Samples[r.Base], r.Samples[len(r.Samples)-1]
	m.p("### 6b. Soak: %s at %s events/s (issue 22, target 5)", r.For, fmtInt(r.Rate))
	m.p("")
	m.p("A fresh nats-server, projector and a reading client (`client.Get`), each in its own process as above;")
	m.p("%s events/s of %d-byte messages published round robin over %s threads for %s (every thread grows to", fmtInt(r.Rate), r.Content, fmtInt(r.Threads), r.For)
	m.p("%s messages: chunks are cut along the way), the client reading %d threads per second; %s in the stream at the end.", fmtInt(int(r.For.Seconds())*r.Rate/max(r.Threads, 1)), r.ReadsPerSec, fmtBytes(r.StreamBytes))
	m.p("Memory is read every %s (heap after a forced GC, and RSS, as above); the end is compared with the sample at %s.", r.Every, base.At.Round(time.Second))
	m.p("")
	m.header("after", "published", "projector heap / RSS", "client heap / RSS", "nats-server heap / RSS", "KV bytes per event byte so far")
	for i, s := range r.Samples {
		if i != 0 && i != r.Base && i != len(r.Samples)-1 && i%max(len(r.Samples)/10, 1) != 0 {
			continue
		}
		m.row(s.At.Round(time.Second).String(), fmtInt(s.Published),
			fmtBytes(s.Projector.HeapAlloc)+" / "+fmtBytes(s.Projector.RSS),
			fmtBytes(s.Reader.HeapAlloc)+" / "+fmtBytes(s.Reader.RSS),
			fmtBytes(s.Server.HeapAlloc)+" / "+fmtBytes(s.Server.RSS), soakAmplification(s))
	}
	m.p("")
	m.p("End against %s: projector heap %+.1f%%, RSS %+.1f%%; client heap %+.1f%%, RSS %+.1f%%; nats-server heap %+.1f%%, RSS %+.1f%%.",
		base.At.Round(time.Second),
		100*growth(base.Projector.HeapAlloc, end.Projector.HeapAlloc), 100*growth(base.Projector.RSS, end.Projector.RSS),
		100*growth(base.Reader.HeapAlloc, end.Reader.HeapAlloc), 100*growth(base.Reader.RSS, end.Reader.RSS),
		100*growth(base.Server.HeapAlloc, end.Server.HeapAlloc), 100*growth(base.Server.RSS, end.Server.RSS))
	m.p("")
	m.p("KV bytes per event byte: what the projector wrote to KV (heads, chunks, deltas, index entries, as stored) over")
	m.p("the bytes of the events published, both since the start: as threads grow past the cut point their open chunks")
	m.p("merge (snapstore's package doc), which section 3's young threads do not show.")
	m.p("")
}

// soakAmplification is s's KV bytes per event byte so far ("-" before
// anything was published or where the projector did not report it).
func soakAmplification(s SoakSample) string {
	if s.EventBytes == 0 || s.Projector.KVBytes == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(s.Projector.KVBytes)/float64(s.EventBytes))
}

// Accessors for parameters the report prints (kept with the results).
func (r *Results) appendWriters() int { return r.Params.Append.Writers }
func (r *Results) appendThreads() int { return r.Params.Append.Threads }
func (r *Results) appendRounds() int  { return r.Params.Append.Rounds }
func (r *Results) lagThreads() int    { return r.Params.Lag.Threads }
func (r *Results) replayReps() int    { return r.Params.ReplayReps }

// The write amplification of the last full run before deltas (commit
// eacfe93, section 3, conditional rows): the baseline the target's 4x cut
// is measured against.
const ampBefore1k, ampBefore5k = 6.4, 21.2

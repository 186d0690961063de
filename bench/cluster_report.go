package main

import (
	"fmt"
	"slices"
	"time"
)

// clusterSection reports the cluster section and the capacity model that
// follows from it.
func clusterSection(m *md, res *Results) {
	c := res.Cluster
	a := c.Append
	m.p("## 7. A 3-node cluster (replicas 3)")
	m.p("")
	m.p("Three real `nats-server` processes (%s) on loopback, each with its own store, routes between all", c.Servers)
	m.p("of them (no TLS here; `deploy/clustertest` runs the deployment's TLS configs), the stream and buckets")
	m.p("with 3 replicas, one partition (K=1: one stream, one stream leader). The writers of the append section")
	m.p("(same sizes) against raw JetStream on the same cluster, same stream configuration, interleaved rounds:")
	m.p("")
	m.header("figure", labels[sysConvlog], labels[sysRaw], labels[sysRawEnc], "convlog / raw JetStream", "convlog / raw, encoding")
	lat := func(name string, get func(string) time.Duration) {
		m.row(name, fmtDur(get(sysConvlog)), fmtDur(get(sysRaw)), fmtDur(get(sysRawEnc)),
			durRatio(get(sysConvlog), get(sysRaw)), durRatio(get(sysConvlog), get(sysRawEnc)))
	}
	p := res.Params.Cluster.Append
	lat("sequential p50", func(s string) time.Duration { return a.Seq[s].P50 })
	lat("sequential p99", func(s string) time.Duration { return a.Seq[s].P99 })
	lat(fmt.Sprintf("%d writers / %s threads: p50", p.Writers, fmtInt(p.Threads)), func(s string) time.Duration { return a.Conc[s].P50 })
	lat(fmt.Sprintf("%d writers / %s threads: p99", p.Writers, fmtInt(p.Threads)), func(s string) time.Duration { return a.Conc[s].P99 })
	r := a.ConcRate
	m.row(fmt.Sprintf("%d writers: appends/s (ratio > 1: convlog faster)", p.Writers), fmtRate(r[sysConvlog]), fmtRate(r[sysRaw]), fmtRate(r[sysRawEnc]),
		ratio(r[sysConvlog], r[sysRaw]), ratio(r[sysConvlog], r[sysRawEnc]))
	m.p("")
	if len(c.Pauses) > 0 {
		ps := slices.Clone(c.Pauses)
		slices.Sort(ps)
		var cells []string
		for _, d := range c.Pauses {
			cells = append(cells, fmtDur(d))
		}
		m.p("**Killing the stream leader** (SIGKILL of its process) while 8 writers append (`client.Append`, which")
		m.p("retries with the same event id), then restarting it: the longest time without an acknowledged append")
		m.p("was %s (kills: %s); %s appends acknowledged, %d failed after the client's retries, **%d acknowledged",
			fmtDur(ps[len(ps)-1]), joinCells(cells), fmtInt(c.Acked), c.Failed, c.Lost)
		m.p("appends missing** from the log afterwards.")
		m.p("")
	}
	partitionedSection(m, res)
	capacityModel(m, res)
}

// partitionedSection reports the run on a deployment of K partitions.
func partitionedSection(m *md, res *Results) {
	pr := res.Cluster.Partitioned
	if pr == nil {
		return
	}
	a, k1 := pr.Append, res.Cluster.Append
	p := res.Params.Cluster.Append
	m.p("### K=%d partitions", pr.K)
	m.p("")
	m.p("The same appends on a deployment of %d partitions (`--partitions %d`: a stream and buckets per partition,", pr.K, pr.K)
	m.p("threads placed by `events.Partition`), R3, on the same three processes; provisioning spread the")
	m.p("partitions' stream leaders over %s. Raw JetStream (one stream) measured again in the same rounds:", joinCells(pr.Leaders))
	m.p("")
	m.header("figure", "convlog K="+fmt.Sprint(pr.K), "convlog K=1 (above)", labels[sysRaw], "K / raw JetStream", "K / K=1")
	m.row("sequential p50", fmtDur(a.Seq[sysConvlog].P50), fmtDur(k1.Seq[sysConvlog].P50), fmtDur(a.Seq[sysRaw].P50),
		durRatio(a.Seq[sysConvlog].P50, a.Seq[sysRaw].P50), durRatio(a.Seq[sysConvlog].P50, k1.Seq[sysConvlog].P50))
	m.row("sequential p99", fmtDur(a.Seq[sysConvlog].P99), fmtDur(k1.Seq[sysConvlog].P99), fmtDur(a.Seq[sysRaw].P99),
		durRatio(a.Seq[sysConvlog].P99, a.Seq[sysRaw].P99), durRatio(a.Seq[sysConvlog].P99, k1.Seq[sysConvlog].P99))
	m.row(fmt.Sprintf("%d writers: appends/s (ratio > 1: faster)", p.Writers), fmtRate(a.ConcRate[sysConvlog]), fmtRate(k1.ConcRate[sysConvlog]),
		fmtRate(a.ConcRate[sysRaw]), ratio(a.ConcRate[sysConvlog], a.ConcRate[sysRaw]), ratio(a.ConcRate[sysConvlog], k1.ConcRate[sysConvlog]))
	m.p("")
	m.p("Per partition leader that is %s (r_leader of the model below, with every node leading one", fmtRate(a.ConcRate[sysConvlog]/float64(pr.K)))
	m.p("partition and following the others); the total against K=1's one leader is the ratio in the last column.")
	m.p("")
	if len(pr.Pauses) > 0 {
		var cells, others []string
		for i := range pr.Pauses {
			cells = append(cells, fmtDur(pr.Pauses[i]))
			others = append(others, fmtDur(pr.OtherPauses[i]))
		}
		m.p("**Killing partition 0's stream leader** under 8 writers spread over the partitions, then restarting it")
		m.p("(and provisioning again before the next kill, which moves the leaders back to one node each):")
		m.p("the longest pause of a thread of partition 0 was %s per kill; of a thread of another partition %s", joinCells(cells), joinCells(others))
		m.p("(their leaders were elsewhere, though the killed node held their replicas); %s appends acknowledged,", fmtInt(pr.Acked))
		m.p("%d failed after the client's retries, **%d acknowledged appends missing** afterwards.", pr.Failed, pr.Lost)
		m.p("")
	}
}

func joinCells(cells []string) string {
	out := ""
	for i, c := range cells {
		if i > 0 {
			out += ", "
		}
		out += c
	}
	return out
}

// capacityModel writes the capacity model from this run's figures.
func capacityModel(m *md, res *Results) {
	r3 := res.Cluster.Append.ConcRate[sysConvlog]
	if r3 <= 0 {
		return
	}
	cores := float64(res.Machine.Cores)
	if cores <= 0 {
		cores = 2
	}
	// Replica-events one core handled: every event was stored by 3
	// replicas, and the writers ran on the same cores (so this is a lower
	// bound of what a node's core does for the log alone).
	perCore := 3 * r3 / cores
	m.p("### Capacity model")
	m.p("")
	m.p("Measured here: one partition (one stream leader, R3) took **%s** from %d writers, with the three", fmtRate(r3), res.Params.Cluster.Append.Writers)
	m.p("nodes and the writers sharing %d cores. Every event is stored by its leader and two followers, so these", int(cores))
	m.p("cores did about **%s replica-writes per core** (a lower bound for a node's core: the writers'", fmtRate(perCore))
	m.p("encoding, validation and TLS-less client I/O ran on them too).")
	m.p("")
	m.p("Model, for N nodes of c cores and K partitions (streams and buckets whose leaders spread over the nodes):")
	m.p("")
	m.p("    events/s(N, K, c) ≈ min( K × r_leader ,  N × c × w / 3 )")
	m.p("")
	m.p("- `w` is replica-writes per second per core (%s measured here), `/ 3` because each event is written by three", fmtRate(perCore))
	m.p("  replicas; the second term is the whole cluster's CPU spent on the log, spread evenly when every node")
	m.p("  leads K/N partitions and follows 2K/N;")
	m.p("- `r_leader` is the most one partition's leader takes when it is not short of CPU: its raft pipeline")
	m.p("  and file store are serial per stream. It was not measurable here (the run is CPU-bound); %s is", fmtRate(r3))
	m.p("  a lower bound;")
	m.p("- assumed: partitions carry equal load (tenants and threads hashed evenly), appends dominate (reads")
	m.p("  are served by direct gets of any replica and by the KV snapshots, and scale with replicas), the")
	m.p("  projector's KV writes (about one head and index write per event, replicated) are not counted, and")
	m.p("  the network is not the limit (about %s/s of replication per node at these sizes).", fmtBytes(uint64(r3*600*2)))
	m.p("")
	m.header("nodes N", "cores c", "partitions K", "events/s (lower bound: r_leader = measured)", "limited by")
	for _, row := range []struct{ n, c, k int }{{3, 2, 1}, {3, 4, 1}, {3, 4, 3}, {5, 4, 5}, {9, 8, 9}, {9, 8, 27}} {
		byLeaders := float64(row.k) * r3
		byCPU := float64(row.n*row.c) * perCore / 3
		limit := "partition leaders (add partitions)"
		if byCPU < byLeaders {
			limit = "CPU (add nodes)"
		}
		m.row(fmt.Sprint(row.n), fmt.Sprint(row.c), fmt.Sprint(row.k), fmtRate(min(byLeaders, byCPU)), limit)
	}
	m.p("")
	m.p("With K=1 a cluster never takes more than one leader's rate however many nodes it has; partitions")
	m.p("remove that bound. On this machine K=3 cannot be 3 times faster: the three nodes and the writers share")
	m.p("%d cores, so the run is bound by the second term (CPU), not by one leader.", int(cores))
	m.p("")
}

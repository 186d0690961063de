//go:build cluster

package clustertest

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
)

const (
	// loadThreads is how many threads each load phase writes to.
	loadThreads = 100
	// maxWritePause bounds the write pause of any disruption: a new stream
	// leader is elected in about 5 s, and clients reconnect at once.
	maxWritePause = 30 * time.Second
	// progressAcks is how many acknowledged appends show that the cluster
	// takes writes again after a disruption.
	progressAcks = 300
)

// topology is docker-compose.yml run as local processes, plus the test's
// own client.
type topology struct {
	nats     *natsCluster
	serve    *proc // compose service "agentd"
	workers  *proc // compose service "workers"
	httpAddr string
	// auditKey is agentd serve's audit signing key file (compose:
	// --audit-key, moved into the test's directory).
	auditKey string

	nc   *nats.Conn
	js   jetstream.JetStream
	c    *client.Client
	logs *logCounter
}

// startTopology starts the three NATS nodes, agentd serve and the
// workers-only agentd with the compose file's commands, and connects a
// client to all three nodes.
func startTopology(t *testing.T) *topology {
	t.Helper()
	natsBin, agentdBin := buildBinaries(t)
	compose, _ := loadCompose(t)
	dir := t.TempDir()
	top := &topology{}
	start := time.Now()
	top.nats = startNATSCluster(t, dir, natsBin, agentdBin)
	t.Logf("NATS cluster of %d nodes healthy in %s: %s", len(top.nats.nodes), time.Since(start).Round(time.Millisecond), top.nats.url())

	top.httpAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	agentd := func(service string) *proc {
		s := compose.Services[service]
		args := make([]string, 0, len(s.Command))
		for _, a := range s.Command {
			switch {
			case strings.HasPrefix(a, "--nats-url="):
				a = "--nats-url=" + top.nats.url()
			case strings.HasPrefix(a, "--tls-ca="):
				a = "--tls-ca=" + top.nats.ca
			case strings.HasPrefix(a, "--http-addr=") && a != "--http-addr=":
				a = "--http-addr=" + top.httpAddr
			case strings.HasPrefix(a, "--audit-key="):
				top.auditKey = filepath.Join(dir, service+"-audit-ed25519.pem")
				a = "--audit-key=" + top.auditKey
			}
			args = append(args, a)
		}
		env := []string{"CONVLOG_LOG_LEVEL=debug", "CONVLOG_DATA_DIR=" + filepath.Join(dir, service+"-data")}
		for k, v := range s.Environment {
			if strings.HasPrefix(v, "${") {
				v = "default:" + testAPIKey // the compose file requires it from the environment
			}
			env = append(env, k+"="+v)
		}
		p := newProc(t, dir, service, agentdBin, args, env)
		p.restartPolicy = s.Restart == "unless-stopped"
		return p
	}
	top.serve, top.workers = agentd("agentd"), agentd("workers")

	top.serve.start(t)
	require.NoError(t, poll(60*time.Second, 50*time.Millisecond, func() error {
		if !top.serve.running() {
			return fmt.Errorf("agentd serve exited")
		}
		return httpOK("http://" + top.httpAddr + "/healthz")
	}), "agentd serve ready")
	top.workers.start(t)
	require.NoError(t, poll(60*time.Second, 50*time.Millisecond, func() error {
		if !top.workers.running() {
			return fmt.Errorf("agentd (workers) exited")
		}
		if !top.workers.logContains("agentd ready") {
			return errNotYet
		}
		return nil
	}), "agentd workers ready")
	t.Logf("agentd serve and workers ready after %s", time.Since(start).Round(time.Millisecond))
	// The API key from the environment guards the HTTP API.
	require.Equal(t, http.StatusUnauthorized, httpStatus(t, "http://"+top.httpAddr+"/v1/threads", ""))
	require.Equal(t, http.StatusOK, httpStatus(t, "http://"+top.httpAddr+"/v1/threads", testAPIKey))

	nc, err := nats.Connect(top.nats.url(), nats.Name("clustertest"), nats.RootCAs(top.nats.ca), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.ReconnectJitter(50*time.Millisecond, 0))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	top.nc = nc
	top.js, err = jetstream.New(nc)
	require.NoError(t, err)
	top.logs = newLogCounter()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	top.c, err = client.New(ctx, nc, client.Config{Producer: "clustertest", Logger: slog.New(top.logs)})
	require.NoError(t, err)
	t.Cleanup(top.c.Close)
	// agentd --partitions=3 --replicas=3: three R3 partition streams whose
	// leaders are on three different nodes at start (provision spreads
	// them), as are their snapshot buckets'.
	require.Len(t, top.c.Partitions(), len(natsNodes), "agentd --partitions=3")
	require.NoError(t, top.leadersSpread(t))
	return top
}

// leadersSpread checks that the partitions' stream leaders are on
// different nodes, and so are their snapshot buckets' (every partition R3),
// and logs them; it returns an error naming two partitions led by one node.
func (top *topology) leadersSpread(t *testing.T) error {
	t.Helper()
	for _, kind := range []string{"stream", "snapshot bucket"} {
		leaders := map[string]string{}
		for _, pc := range top.c.Partitions() {
			name := pc.Config().Resources.Stream
			if kind == "snapshot bucket" {
				name = "KV_" + pc.Config().Resources.SnapshotBucket
			}
			info, err := streamInfo(top.js, name)
			if err != nil {
				return err
			}
			require.Equal(t, len(natsNodes), info.Config.Replicas, "agentd --replicas=3 provisioned an R3 %s", name)
			if info.Cluster == nil || info.Cluster.Leader == "" {
				return fmt.Errorf("%s has no leader", name)
			}
			if other, ok := leaders[info.Cluster.Leader]; ok {
				return fmt.Errorf("the %s leaders of %s and %s are both on %s", kind, other, name, info.Cluster.Leader)
			}
			leaders[info.Cluster.Leader] = name
		}
		t.Logf("partition %s leaders: %v", kind, leaders)
	}
	return nil
}

// testAPIKey is the API key of tenant "default" given to agentd serve.
const testAPIKey = "clustertest-key"

// httpStatus GETs url with the bearer key (none when empty).
func httpStatus(t *testing.T, url, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func httpOK(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// metrics reads agentd serve's convlog_* counters (name{labels} -> value).
func (top *topology) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + top.httpAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "convlog_agent_turns_total") && !strings.HasPrefix(line, "convlog_agent_conflicts_total") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// requireAlive checks that both agentd processes run (restarted by the
// compose restart policy if they exited) and logs their unexpected exits.
func (top *topology) requireAlive(t *testing.T) {
	t.Helper()
	for _, p := range []*proc{top.serve, top.workers} {
		require.NoError(t, poll(10*time.Second, 50*time.Millisecond, func() error {
			if !p.running() {
				return fmt.Errorf("%s is not running", p.name)
			}
			return nil
		}))
		if exits := p.unexpectedExits(); len(exits) > 0 {
			t.Logf("%s exited %d times and was restarted (compose restart policy): %v", p.name, len(exits), exits)
		}
	}
}

// report logs what a phase saw.
func (top *topology) report(t *testing.T, l *load, ps map[string]pauses) {
	t.Helper()
	var names []string
	for k := range ps {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t.Logf("%s: longest write pause %s; longest pause between answered user messages %s", k,
			ps[k].write.Round(time.Millisecond), ps[k].answered.Round(time.Millisecond))
	}
	t.Logf("load %s: %d appends acknowledged (%d as duplicates of an earlier attempt), %d Append calls repeated after an unknown outcome, %d conflicts, %d stale consistent reads right after an ack, %d answers awaited, the slowest %s after its user message",
		l.name, l.acked.Load(), l.duplicates.Load(), l.retried.Load(), l.conflicts.Load(), l.stale.Load(), l.answered.Load(), l.slowestAnswer().Round(time.Millisecond))
	counts := top.logs.snapshot()
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("test client log since the start %q: %d", k, counts[k])
	}
	for _, p := range []*proc{top.serve, top.workers} {
		t.Logf("%s log since the start: %d publish retries, %d duplicates resolved, %d turns to redeliver, %d NATS disconnects",
			p.name, countLines(p.log, `"retrying append"`), countLines(p.log, `"append was already stored"`),
			countLines(p.log, `"turn failed; will be redelivered"`), countLines(p.log, `"NATS disconnected"`))
	}
	m := top.metrics(t)
	var mk []string
	for k := range m {
		mk = append(mk, k)
	}
	slices.Sort(mk)
	for _, k := range mk {
		t.Logf("agentd serve metric since the start %s = %v", k, m[k])
	}
}

func (res checked) log(t *testing.T) {
	t.Logf("checked %d threads: %d events, %d acknowledged appends each stored once, %d user messages each answered once, %d snapshots equal to the fold, %d stale reads while settling",
		res.threads, res.events, res.acked, res.userMessages, res.snapshots, res.staleReads)
}

// TestClusterSurvivesNodeLoss runs docker-compose.yml's topology as
// processes and disrupts the NATS cluster under load; see the package doc.
func TestClusterSurvivesNodeLoss(t *testing.T) {
	begin := time.Now()
	logf := func(t *testing.T, format string, args ...any) {
		t.Helper()
		t.Logf("[%5.1fs] "+format, append([]any{time.Since(begin).Seconds()}, args...)...)
	}
	top := startTopology(t)
	stream := top.c.Config().Resources.Stream
	var loads []*load
	newLoad := func(t *testing.T, name string) *load {
		l := startLoad(top.c, name, loadThreads)
		loads = append(loads, l)
		t.Cleanup(l.halt)
		l.waitRounds(t, 2, 60*time.Second)
		logf(t, "load %s: %d threads answered twice each", name, loadThreads)
		return l
	}
	settle := func(t *testing.T, l *load, ps map[string]pauses) {
		t.Helper()
		loadErr := l.finish()
		top.report(t, l, ps)
		require.NoError(t, loadErr)
		for k, p := range ps {
			require.Less(t, p.write, maxWritePause, "write pause after the %s", k)
		}
		top.requireAlive(t)
		logf(t, "load %s stopped; verifying every thread", l.name)
		verify(t, top.nc, top.js, top.c, top.nats, loads...).log(t)
		rep := top.auditVerify(t)
		logf(t, "verified; audit: %d events of %d threads verified against %d signed checkpoints, none differ", rep.Verified, rep.Threads, rep.Checkpoints)
	}

	t.Run("a node and then the stream leader are killed and restarted under load", func(t *testing.T) {
		l := newLoad(t, "loss")
		ps := map[string]pauses{}

		leader := top.nats.streamLeader(t, top.js, stream)
		victim := top.nats.nodes[0]
		if victim == leader {
			victim = top.nats.nodes[1]
		}
		t0 := time.Now()
		top.nats.kill9(t, victim)
		logf(t, "killed %s (kill -9), not partition 0's stream leader (%s); with partitions it leads another partition", victim.name, leader.name)
		l.waitProgress(t, t0, progressAcks, 3*time.Second, 60*time.Second)
		top.nats.restart(t, victim)
		logf(t, "restarted %s: healthy %s after the kill", victim.name, time.Since(t0).Round(time.Millisecond))
		l.waitProgress(t, time.Now(), progressAcks, time.Second, 60*time.Second)
		ps["kill -9 of a node that does not lead partition 0 ("+victim.name+")"] = l.pauses(t0, time.Now())

		leader = top.nats.streamLeader(t, top.js, stream)
		t1 := time.Now()
		top.nats.kill9(t, leader)
		logf(t, "killed the stream leader %s (kill -9)", leader.name)
		l.waitProgress(t, t1, progressAcks, 3*time.Second, 60*time.Second)
		logf(t, "writes resumed; new stream leader %s", top.nats.streamLeader(t, top.js, stream).name)
		top.nats.restart(t, leader)
		logf(t, "restarted %s: healthy %s after the kill", leader.name, time.Since(t1).Round(time.Millisecond))
		l.waitProgress(t, time.Now(), progressAcks, time.Second, 60*time.Second)
		ps["kill -9 of partition 0's stream leader ("+leader.name+")"] = l.pauses(t1, time.Now())

		settle(t, l, ps)
		// agentd serve moves the leaders back to one node each
		// (--rebalance-interval, 1 minute by default).
		t2 := time.Now()
		require.NoError(t, poll(150*time.Second, time.Second, func() error { return top.leadersSpread(t) }), "leaders spread again")
		logf(t, "partition leaders on three different nodes again %s after the checks", time.Since(t2).Round(time.Second))
	})

	t.Run("a rolling restart of all three nodes under load", func(t *testing.T) {
		l := newLoad(t, "roll")
		ps := map[string]pauses{}
		for _, n := range top.nats.nodes {
			t0 := time.Now()
			n.proc.stop(t, syscall.SIGTERM, 30*time.Second)
			top.nats.restart(t, n)
			logf(t, "restarted %s (SIGTERM): healthy after %s", n.name, time.Since(t0).Round(time.Millisecond))
			l.waitProgress(t, time.Now(), progressAcks, time.Second, 60*time.Second)
			ps["restart of "+n.name] = l.pauses(t0, time.Now())
		}
		settle(t, l, ps)
	})

	t.Run("an erased thread leaves no readable byte on any node", func(t *testing.T) {
		top.eraseLeavesNothing(t, logf)
	})
}

// auditVerify waits until agentd serve's checkpoints cover the whole
// stream and checks that they verify: through the node losses and
// restarts, no event of any thread is altered, missing or inserted, and
// the checkpoint chain is whole.
// onlyUncovered reports whether every problem of rep is events no
// checkpoint covers yet (audit.KindUncovered).
func onlyUncovered(rep *audit.Report) bool {
	for _, p := range rep.Problems {
		if p.Kind != audit.KindUncovered {
			return false
		}
	}
	return true
}

func (top *topology) auditVerify(t *testing.T) *audit.Report {
	t.Helper()
	require.NotEmpty(t, top.auditKey, "the compose file gives agentd serve --audit-key")
	key, err := audit.LoadKey(top.auditKey)
	require.NoError(t, err)
	opts := audit.VerifyOptions{Trusted: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	var rep *audit.Report
	require.NoError(t, poll(60*time.Second, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		if rep, err = audit.VerifyPartitions(ctx, top.js, audit.Scope{}, opts, httpapi.AuditPartitions(top.c, audit.Scope{})); err != nil {
			return err
		}
		if !rep.OK && !onlyUncovered(rep) {
			return nil // a difference: fail below, not by timeout
		}
		if !rep.OK {
			// A restarted node's checkpointer has not signed its backlog
			// yet: the events are overdue, not changed; ask again.
			return fmt.Errorf("%d events overdue for a checkpoint", rep.ProblemCount)
		}
		if rep.Unsigned != 0 {
			return fmt.Errorf("%d events not yet checkpointed", rep.Unsigned)
		}
		return nil
	}), "audit verify")
	require.True(t, rep.OK, "audit verify: %d problems, first at %d: %+v", rep.ProblemCount, rep.FirstBadSeq, rep.Problems)
	require.NotZero(t, rep.Verified)
	return rep
}

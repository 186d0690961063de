package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/ports"
	"github.com/convlog/convlog/internal/provision"
)

// ClusterParams size the cluster section.
type ClusterParams struct {
	// Append sizes the appends, as the append section (replicas 3).
	Append AppendParams
	// Kills is how many times the stream leader is killed under load.
	Kills int
	// KillLoad is how long the writers run around each kill.
	KillLoad time.Duration
	// Partitions is K of the partitioned run that follows the K=1 run
	// (the same appends and kills on a deployment of K partitions, R3);
	// 0 or 1 skips it.
	Partitions int
}

// ClusterResults are the cluster section's figures.
type ClusterResults struct {
	// Servers is the nats-server version of the nodes.
	Servers string
	Append  *AppendResults
	// Pauses are the longest gaps between two acknowledged appends of
	// the writers around each kill of the stream leader; Lost counts
	// acknowledged appends missing from the log afterwards (must be 0).
	Pauses []time.Duration
	Lost   int
	// Acked is how many appends were acknowledged during the kills, and
	// Failed how many failed after the client's retries.
	Acked, Failed int
	// Partitioned is the same on a deployment of Params.Partitions
	// partitions (nil when not run); there a kill stops one partition's
	// leader: Pauses are the longest gaps of its threads, OtherPauses
	// those of the other partitions' threads.
	Partitioned *PartitionedResults
}

// PartitionedResults are the cluster figures of a partitioned deployment.
type PartitionedResults struct {
	K      int
	Append *AppendResults
	// Leaders are the partitions' stream leaders at start (server names,
	// in partition order).
	Leaders             []string
	Pauses, OtherPauses []time.Duration
	Acked, Failed, Lost int
}

// clusterNode is one nats-server process of the cluster.
type clusterNode struct {
	name, conf, url string
	log             string // the process's output
	cmd             *exec.Cmd
	done            chan struct{}
}

// benchCluster is three nats-server processes on loopback, each with its
// own store, routes between all of them, no TLS and no authentication (the
// cluster test, deploy/clustertest, runs the deployment's own TLS configs;
// here only the cost of replication is measured).
type benchCluster struct {
	bin   string
	dir   string
	nodes []*clusterNode
}

// startCluster writes the configs of three nodes into dir and starts them.
func startCluster(ctx context.Context, bin, dir string) (*benchCluster, error) {
	c := &benchCluster{bin: bin, dir: dir}
	var routes []string
	addrs := make([][2]int, 3)
	for i := range addrs {
		for j := range 2 {
			p, err := ports.Free()
			if err != nil {
				return nil, err
			}
			addrs[i][j] = p
		}
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", addrs[i][1]))
	}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		store := filepath.Join(dir, name)
		if err := os.MkdirAll(store, 0o755); err != nil {
			return nil, err
		}
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
max_payload: 1MB
jetstream { store_dir: %q }
cluster { name: bench, listen: 127.0.0.1:%d, routes: [%s] }
`, name, addrs[i][0], store, addrs[i][1], strings.Join(routes, ", "))
		path := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, &clusterNode{name: name, conf: path, url: fmt.Sprintf("nats://127.0.0.1:%d", addrs[i][0]),
			log: filepath.Join(dir, name+".log")})
	}
	for _, n := range c.nodes {
		if err := c.start(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	// Ready when JetStream has a meta leader: account information is
	// answered.
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, n := range c.nodes {
			select {
			case <-n.done:
				c.Close()
				return nil, fmt.Errorf("node %s exited at start: %s", n.name, tail(n.log, 2000))
			default:
			}
		}
		nc, err := nats.Connect(c.urls())
		if err == nil {
			js, _ := jetstream.New(nc)
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = js.AccountInfo(actx)
			cancel()
			nc.Close()
			if err == nil {
				return c, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.Close()
			return nil, fmt.Errorf("cluster not ready after 60 s: %w (node n1's log: %s)", err, tail(c.nodes[0].log, 2000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tail returns the last n bytes of the file at path (or why not).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-n):])
}

func (c *benchCluster) start(n *clusterNode) error {
	out, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.cmd = exec.Command(c.bin, "-c", n.conf)
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	n.cmd.Stdout, n.cmd.Stderr = out, out
	if err := n.cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	defer out.Close() // the child has its own descriptor
	n.done = make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	return nil
}

func (c *benchCluster) urls() string {
	var us []string
	for _, n := range c.nodes {
		us = append(us, n.url)
	}
	return strings.Join(us, ",")
}

// kill stops node name with SIGKILL and waits for it.
func (c *benchCluster) kill(name string) (*clusterNode, error) {
	for _, n := range c.nodes {
		if n.name == name {
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
			<-n.done
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %q", name)
}

// Close kills every node.
func (c *benchCluster) Close() {
	for _, n := range c.nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
			<-n.done
		}
	}
}

// RunCluster measures convlog on a 3-node cluster of real nats-server
// processes (bin), with replicas 3: the append section's sequential and
// concurrent appends against raw JetStream on the same cluster (same
// stream configuration, R3), then the write pause when the stream leader
// is killed under load (the longest gap between two acknowledged appends
// of 8 writers, each retrying as client.Append does), checking that no
// acknowledged append is lost.
func RunCluster(ctx context.Context, bin, dir string, p ClusterParams, log func(string, ...any)) (*ClusterResults, error) {
	c, err := startCluster(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	nc, err := nats.Connect(c.urls(), nats.Name("convlog-bench-cluster"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	res := &ClusterResults{Servers: nc.ConnectedServerVersion()}
	r3 := appendResources
	r3.Replicas = 3
	e := &Env{NC: nc, JS: js}
	if e.AppendClient, err = client.New(ctx, nc, client.Config{Provision: true, Resources: r3, NoQuotas: true}); err != nil {
		return nil, err
	}
	raw := provision.Config{Stream: rawStream, SubjectPrefix: rawPrefix, Replicas: 3}.StreamConfig()
	if _, err := js.CreateOrUpdateStream(ctx, raw); err != nil {
		return nil, fmt.Errorf("raw stream: %w", err)
	}
	if err := waitSettled(ctx, js); err != nil {
		return nil, err
	}
	log("cluster: appends, replicas 3")
	if res.Append, err = RunAppend(ctx, e, &Baselines{}, p.Append, log); err != nil {
		return nil, err
	}
	for k := range p.Kills {
		log("cluster: kill %d of the stream leader", k+1)
		k, err := killLeaderUnderLoad(ctx, c, e.AppendClient, js, r3.Stream, p.KillLoad)
		if err != nil {
			return nil, err
		}
		res.Pauses = append(res.Pauses, k.pause)
		res.Acked += k.acked
		res.Failed += k.failed
		res.Lost += k.lost
	}
	if p.Partitions > 1 {
		if res.Partitioned, err = runPartitioned(ctx, c, e, js, p, log); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// partitionedResources are the partitioned run's deployment: names of its
// own (and its own config bucket, where K is recorded).
var partitionedResources = provision.Config{Stream: "CONVLOG_PARTS", SubjectPrefix: "cparts", SnapshotBucket: "cparts_snapshots",
	IndexBucket: "cparts_threads", KeyBucket: "cparts_keys", ConfigBucket: "cparts_config", Replicas: 3}

// runPartitioned runs the appends and the leader kills on a deployment of
// p.Partitions partitions; the kills stop partition 0's stream leader.
func runPartitioned(ctx context.Context, c *benchCluster, e *Env, js jetstream.JetStream, p ClusterParams, log func(string, ...any)) (*PartitionedResults, error) {
	rc := partitionedResources
	rc.Partitions = p.Partitions
	var cl *client.Client
	if err := whileRecovering(ctx, 10*time.Second, func(ctx context.Context) (err error) {
		cl, err = client.New(ctx, e.NC, client.Config{Provision: true, Resources: rc, NoQuotas: true})
		return err
	}); err != nil {
		return nil, err
	}
	if err := waitSettled(ctx, js); err != nil {
		return nil, err
	}
	out := &PartitionedResults{K: p.Partitions}
	for _, pc := range cl.Partitions() {
		st, err := js.Stream(ctx, pc.Config().Resources.Stream)
		if err != nil {
			return nil, err
		}
		info, err := st.Info(ctx)
		if err != nil || info.Cluster == nil {
			return nil, fmt.Errorf("partition stream %s: no cluster info (%v)", pc.Config().Resources.Stream, err)
		}
		out.Leaders = append(out.Leaders, info.Cluster.Leader)
	}
	log("cluster: appends, %d partitions, replicas 3 (leaders %v)", p.Partitions, out.Leaders)
	k1 := e.AppendClient
	e.AppendClient = cl
	defer func() { e.AppendClient = k1 }()
	var err error
	if out.Append, err = RunAppend(ctx, e, &Baselines{}, p.Append, log); err != nil {
		return nil, err
	}
	stream := cl.Partitions()[0].Config().Resources.Stream
	for k := range p.Kills {
		if k > 0 {
			// A restarted node leads nothing: provisioning again moves the
			// leaders back to one node each (provision spreads them), so
			// that every kill stops exactly one partition's leader.
			if err := whileRecovering(ctx, 10*time.Second, func(ctx context.Context) error {
				_, err := provision.Ensure(ctx, js, rc)
				return err
			}); err != nil {
				return nil, err
			}
		}
		log("cluster: kill %d of partition 0's stream leader", k+1)
		k, err := killLeaderUnderLoad(ctx, c, cl, js, stream, p.KillLoad)
		if err != nil {
			return nil, err
		}
		out.Pauses = append(out.Pauses, k.pause)
		out.OtherPauses = append(out.OtherPauses, k.otherPause)
		out.Acked += k.acked
		out.Failed += k.failed
		out.Lost += k.lost
	}
	return out, nil
}

// whileRecovering runs f, each attempt given the time attempt, until it
// succeeds, fails otherwise than by a timeout, or ctx ends. Right after a
// node was killed and restarted, a request to the cluster (a stream or
// bucket update while provisioning, a batched direct get while reading a
// thread back) can go unanswered while the node catches up or a group
// elects its leader: NATS does not resend a request, and one bounded only
// by ctx would wait for ctx's deadline (a provisioning, a direct get),
// failing TestClusterSectionTiny. The section measures appends and checks that every
// acknowledged one is stored, not how long a lost request waits.
func whileRecovering(ctx context.Context, attempt time.Duration, f func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// waitSettled waits, up to 60 s, until every stream of the cluster (KV
// buckets included) has a leader and all its replicas are current: a
// stream just created, or a node just restarted, may not answer yet (a KV
// get then finds no responders, at the first append after
// provisioning).
func waitSettled(ctx context.Context, js jetstream.JetStream) error {
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		// Each request gets 2 s: one the cluster leaves unanswered is
		// asked again, not waited for until the deadline.
		why := ""
		lctx, lcancel := context.WithTimeout(wctx, 2*time.Second)
		names := js.StreamNames(lctx)
		for name := range names.Name() {
			if why != "" {
				continue // drain the lister
			}
			sctx, scancel := context.WithTimeout(wctx, 2*time.Second)
			why = unsettled(sctx, js, name)
			scancel()
		}
		if err := names.Err(); err != nil && why == "" {
			why = fmt.Sprintf("listing streams: %v", err)
		}
		lcancel()
		if why == "" {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("cluster: streams not settled after 60 s: %s", why)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// unsettled says why stream name is not settled ("" when it is): its
// info is not answered, or provision.ReplicasCurrent says why.
func unsettled(ctx context.Context, js jetstream.JetStream, name string) string {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Sprintf("stream %s: %v", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Sprintf("stream %s: %v", name, err)
	}
	if info.Cluster == nil {
		return fmt.Sprintf("stream %s has no cluster information", name)
	}
	if err := provision.ReplicasCurrent(info); err != nil {
		return err.Error()
	}
	return ""
}

// killed is what one kill of the stream leader under load showed.
type killed struct {
	// pause is the longest time without an acknowledged append from the
	// kill on; acked and failed count the appends; lost counts acked
	// appends not in the log afterwards.
	pause               time.Duration
	acked, failed, lost int
	// otherPause is pause for the threads of other streams (partitions)
	// than the killed leader's (0 when every thread is in its stream).
	otherPause time.Duration
}

// killLeaderUnderLoad runs 8 writers (one thread each; with partitions,
// spread over them) for d, kills the leader of stream's process at d/3 and
// restarts it at 2d/3. A pause is a thread's longest time without an
// acknowledged append from the kill on, the longest over the threads of
// stream (pause) and of other streams (otherPause).
func killLeaderUnderLoad(ctx context.Context, c *benchCluster, cl *client.Client, js jetstream.JetStream, stream string, d time.Duration) (killed, error) {
	const writers = 8
	type ack struct {
		thread string
		id     string
		at     time.Time
	}
	var mu sync.Mutex
	var acks []ack
	payload := events.UserMessage{Content: events.Text(text(0, appendSize))}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	failed := 0
	for range writers {
		_, id, _, err := cl.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
		if err != nil {
			return killed{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				ev := events.Event{ID: events.NewID(), Payload: payload}
				actx, acancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := cl.Append(actx, tenant, id, []events.Event{ev}, client.AnyVersion())
				acancel()
				if err != nil {
					if wctx.Err() != nil {
						return
					}
					mu.Lock()
					failed++
					mu.Unlock()
					continue
				}
				mu.Lock()
				acks = append(acks, ack{thread: id, id: ev.ID, at: time.Now()})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(d / 3)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		cancel()
		wg.Wait()
		return killed{}, err
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		cancel()
		wg.Wait()
		return killed{}, fmt.Errorf("stream leader: %v", err)
	}
	killedAt := time.Now()
	n, err := c.kill(info.Cluster.Leader)
	if err != nil {
		cancel()
		wg.Wait()
		return killed{}, err
	}
	time.Sleep(d / 3)
	if err := c.start(n); err != nil {
		cancel()
		wg.Wait()
		return killed{}, err
	}
	wg.Wait()
	if err := waitSettled(ctx, js); err != nil {
		return killed{}, err
	}
	// Each thread's longest gap between acknowledgements from the kill on
	// (until the writers stopped).
	var pause, otherPause time.Duration
	last := map[string]time.Time{}
	gap := map[string]time.Duration{}
	for _, a := range acks {
		if a.at.Before(killedAt) {
			continue
		}
		l, ok := last[a.thread]
		if !ok {
			l = killedAt
		}
		gap[a.thread] = max(gap[a.thread], a.at.Sub(l))
		last[a.thread] = a.at
	}
	for th, g := range gap {
		if cl.For(tenant, th).Config().Resources.Stream == stream {
			pause = max(pause, g)
		} else {
			otherPause = max(otherPause, g)
		}
	}
	// Every acknowledged append is in its thread (read after the restart).
	lost := 0
	ids := map[string]map[string]bool{}
	for _, a := range acks {
		if ids[a.thread] == nil {
			seen := map[string]bool{}
			if err := whileRecovering(ctx, 30*time.Second, func(rctx context.Context) error {
				clear(seen)
				for ev, err := range cl.Events(rctx, tenant, a.thread, 0, 0) {
					if err != nil {
						return err
					}
					seen[ev.ID] = true
				}
				return nil
			}); err != nil {
				return killed{}, err
			}
			ids[a.thread] = seen
		}
		if !ids[a.thread][a.id] {
			lost++
		}
	}
	return killed{pause: pause, otherPause: otherPause, acked: len(acks), failed: failed, lost: lost}, nil
}

//go:build cluster

package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/provision"
)

// natsNode is one nats-server process running a deploy/nats config file.
type natsNode struct {
	name                    string
	clientPort, clusterPort int
	httpPort                int
	conf, storeDir          string
	proc                    *proc
}

// natsCluster is the three nodes of docker-compose.yml as local processes.
type natsCluster struct {
	nodes []*natsNode
	// tlsDir holds the TLS files (agentd tls init, as compose's certs
	// service writes them); ca is its CA file, which clients trust.
	tlsDir, ca string
}

// startNATSCluster writes each deploy/nats/<node>.conf with loopback ports
// and a temporary store_dir into dir, starts the three nodes, and waits
// until each reports healthy.
func startNATSCluster(t *testing.T, dir, bin, agentdBin string) *natsCluster {
	t.Helper()
	root := moduleRoot(t)
	c := &natsCluster{tlsDir: filepath.Join(dir, "tls")}
	c.ca = filepath.Join(c.tlsDir, "ca.pem")
	makeTLS(t, agentdBin, c.tlsDir)
	for _, name := range natsNodes {
		n := &natsNode{name: name, clientPort: freePort(t), clusterPort: freePort(t), httpPort: freePort(t),
			storeDir: filepath.Join(dir, name, "data")}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		src, err := os.ReadFile(filepath.Join(root, "deploy", "nats", n.name+".conf"))
		require.NoError(t, err)
		out, err := rewriteConfig(string(src), n, c.nodes, c.tlsDir)
		require.NoError(t, err, "config of %s", n.name)
		n.conf = filepath.Join(dir, n.name, n.name+".conf")
		require.NoError(t, os.MkdirAll(n.storeDir, 0o755))
		require.NoError(t, os.WriteFile(n.conf, []byte(out), 0o644))
		// The compose command is ["--config", "/etc/nats/<node>.conf"].
		n.proc = newProc(t, dir, n.name, bin, []string{"--config", n.conf}, nil)
	}
	for _, n := range c.nodes {
		n.proc.start(t)
	}
	for _, n := range c.nodes {
		c.waitHealthy(t, n, 30*time.Second)
	}
	c.requireTLS(t)
	return c
}

// requireTLS checks that every node requires TLS of its clients and of its
// routes, verifying the peers' certificates (its /varz), and that a client
// without TLS is refused.
func (c *natsCluster) requireTLS(t *testing.T) {
	t.Helper()
	for _, n := range c.nodes {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/varz", n.httpPort))
		require.NoError(t, err)
		var v struct {
			TLSRequired bool `json:"tls_required"`
			Cluster     struct {
				TLSRequired bool `json:"tls_required"`
				TLSVerify   bool `json:"tls_verify"`
			} `json:"cluster"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		require.NoError(t, err)
		require.True(t, v.TLSRequired, "%s requires TLS of clients", n.name)
		require.True(t, v.Cluster.TLSRequired && v.Cluster.TLSVerify, "%s: routes use mutual TLS", n.name)
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", n.clientPort), nats.MaxReconnects(0), nats.Timeout(2*time.Second))
		if err == nil {
			nc.Close()
		}
		require.Error(t, err, "%s: a client without TLS is refused", n.name)
	}
}

// rewriteConfig makes a deploy/nats config file runnable on this machine:
// the client, monitoring and cluster listeners move to n's loopback ports,
// the routes to the peers' loopback cluster ports, store_dir to
// n.storeDir and the TLS files' directory to tlsDir. Everything else is
// kept byte for byte. Every substitution must match exactly once (the TLS
// directory six times: three files for clients, three for routes), so a
// config file that drifts fails here.
func rewriteConfig(src string, n *natsNode, all []*natsNode, tlsDir string) (string, error) {
	if got := strings.Count(src, `"`+natsTLSDir); got != 6 {
		return "", fmt.Errorf("%s: %q appears %d times, want 6 (cert, key and CA files of the client and route listeners)", n.name, natsTLSDir, got)
	}
	src = strings.ReplaceAll(src, `"`+natsTLSDir, `"`+tlsDir+"/")
	type sub struct {
		re   *regexp.Regexp
		repl string
	}
	subs := []sub{
		{regexp.MustCompile(fmt.Sprintf(`(?m)^listen: 0\.0\.0\.0:%d$`, natsClientPort)), fmt.Sprintf("listen: 127.0.0.1:%d", n.clientPort)},
		{regexp.MustCompile(fmt.Sprintf(`(?m)^http: 0\.0\.0\.0:%d$`, natsHTTPPort)), fmt.Sprintf("http: 127.0.0.1:%d", n.httpPort)},
		{regexp.MustCompile(fmt.Sprintf(`(?m)^(\s+)listen: 0\.0\.0\.0:%d$`, natsClusterPort)), fmt.Sprintf("${1}listen: 127.0.0.1:%d", n.clusterPort)},
		{regexp.MustCompile(`(?m)^(\s+)store_dir: "` + regexp.QuoteMeta(natsDataDir) + `"$`), fmt.Sprintf("${1}store_dir: %q", n.storeDir)},
	}
	for _, p := range all {
		subs = append(subs, sub{regexp.MustCompile(fmt.Sprintf(`nats-route://%s:%d\b`, p.name, natsClusterPort)),
			fmt.Sprintf("nats-route://127.0.0.1:%d", p.clusterPort)})
	}
	for _, s := range subs {
		if got := len(s.re.FindAllStringIndex(src, -1)); got != 1 {
			return "", fmt.Errorf("%s: %q matches %d times, want once", n.name, s.re, got)
		}
		src = s.re.ReplaceAllString(src, s.repl)
	}
	if strings.Contains(src, "0.0.0.0") {
		return "", fmt.Errorf("%s: a listener left on 0.0.0.0:\n%s", n.name, src)
	}
	return src, nil
}

// url is the comma-separated client URL list of every node.
func (c *natsCluster) url() string {
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, fmt.Sprintf("tls://127.0.0.1:%d", n.clientPort))
	}
	return strings.Join(urls, ",")
}

func (c *natsCluster) node(name string) *natsNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// healthz asks n's monitoring endpoint; nil when the node and its
// JetStream assets are healthy (current).
func (n *natsNode) healthz() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/healthz", n.httpPort), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s /healthz: %d %s %s", n.name, resp.StatusCode, body.Status, body.Error)
	}
	return nil
}

func (c *natsCluster) waitHealthy(t *testing.T, n *natsNode, d time.Duration) {
	t.Helper()
	require.NoError(t, poll(d, 50*time.Millisecond, func() error {
		if !n.proc.running() {
			return fmt.Errorf("%s exited", n.name)
		}
		return n.healthz()
	}))
}

// kill9 kills n with SIGKILL and waits for the exit.
func (c *natsCluster) kill9(t *testing.T, n *natsNode) {
	t.Helper()
	n.proc.stop(t, syscall.SIGKILL, 10*time.Second)
}

// restart starts n again with the same config and data and waits until it
// is healthy.
func (c *natsCluster) restart(t *testing.T, n *natsNode) {
	t.Helper()
	n.proc.start(t)
	c.waitHealthy(t, n, 60*time.Second)
}

// streamLeader returns the node that leads stream.
func (c *natsCluster) streamLeader(t *testing.T, js jetstream.JetStream, stream string) *natsNode {
	t.Helper()
	var leader *natsNode
	require.NoError(t, poll(30*time.Second, 50*time.Millisecond, func() error {
		info, err := streamInfo(js, stream)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("stream %s has no leader", stream)
		}
		if leader = c.node(info.Cluster.Leader); leader == nil {
			return fmt.Errorf("stream %s leader %q is not a node", stream, info.Cluster.Leader)
		}
		return nil
	}))
	return leader
}

// waitStreamCurrent waits until stream has a leader and every other
// replica is online and current, with no lag.
func (c *natsCluster) waitStreamCurrent(t *testing.T, js jetstream.JetStream, stream string, d time.Duration) {
	t.Helper()
	require.NoError(t, poll(d, 100*time.Millisecond, func() error {
		info, err := streamInfo(js, stream)
		if err != nil {
			return err
		}
		if info.Cluster == nil {
			return fmt.Errorf("stream %s has no cluster information", stream)
		}
		if info.Config.Replicas != len(c.nodes) {
			return fmt.Errorf("stream %s has %d replicas, want one per node (%d)", stream, info.Config.Replicas, len(c.nodes))
		}
		return provision.ReplicasCurrent(info)
	}))
}

func streamInfo(js jetstream.JetStream, stream string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// leaderLastSeq is the sequence of subject's last message as the stream
// leader has it: a JetStream API message get, which the leader answers,
// unlike a direct get, which any replica answers. 0 when the subject is
// empty.
func leaderLastSeq(nc *nats.Conn, stream, subject string) (uint64, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": subject})
	if err != nil {
		return 0, err
	}
	msg, err := nc.Request("$JS.API.STREAM.MSG.GET."+stream, req, 2*time.Second)
	if err != nil {
		return 0, err
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, err
	}
	if resp.Error != nil {
		if resp.Error.Code == 10037 { // no message found
			return 0, nil
		}
		return 0, fmt.Errorf("last of %s: %d %s", subject, resp.Error.Code, resp.Error.Description)
	}
	if resp.Message == nil {
		return 0, fmt.Errorf("last of %s: empty answer", subject)
	}
	return resp.Message.Seq, nil
}

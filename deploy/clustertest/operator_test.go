//go:build cluster

package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
	"github.com/convlog/convlog/internal/tenancy/tenancytest"
)

// startOperatorCluster writes an operator with `agentd operator init`
// into dir/ops and starts three nats-server processes in a cluster, each
// including the fragment `agentd operator server-conf` prints for a
// resolver directory of its own, and waits until each is healthy. It
// returns the cluster and the operator directory.
func startOperatorCluster(t *testing.T, dir, natsBin, agentdBin string) (*natsCluster, string) {
	t.Helper()
	ops := filepath.Join(dir, "ops")
	out, err := exec.Command(agentdBin, "operator", "init", "--dir", ops).CombinedOutput()
	require.NoError(t, err, "agentd operator init: %s", out)
	c := &natsCluster{}
	for _, name := range natsNodes {
		c.nodes = append(c.nodes, &natsNode{name: name, clientPort: freePort(t), clusterPort: freePort(t), httpPort: freePort(t),
			storeDir: filepath.Join(dir, name, "data")})
	}
	var routes []string
	for _, n := range c.nodes {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", n.clusterPort))
	}
	for _, n := range c.nodes {
		nodeDir := filepath.Join(dir, n.name)
		require.NoError(t, os.MkdirAll(n.storeDir, 0o755))
		frag, err := exec.Command(agentdBin, "operator", "server-conf", "--dir", ops, "--resolver-dir", filepath.Join(nodeDir, "jwt")).Output()
		require.NoError(t, err, "agentd operator server-conf")
		require.NoError(t, os.WriteFile(filepath.Join(nodeDir, "operator.conf"), frag, 0o644))
		n.conf = filepath.Join(nodeDir, n.name+".conf")
		require.NoError(t, os.WriteFile(n.conf, []byte(fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream { store_dir: %q }
cluster {
  name: convlog
  listen: 127.0.0.1:%d
  routes: [ %s ]
}
include 'operator.conf'
`, n.name, n.clientPort, n.httpPort, n.storeDir, n.clusterPort, strings.Join(routes, ", "))), 0o644))
		out, err := exec.Command(natsBin, "-t", "-c", n.conf).CombinedOutput()
		require.NoError(t, err, "nats-server -t: %s", out)
		n.proc = newProc(t, dir, n.name, natsBin, []string{"-c", n.conf}, nil)
	}
	for _, n := range c.nodes {
		n.proc.start(t)
	}
	for _, n := range c.nodes {
		c.waitHealthy(t, n, 30*time.Second)
	}
	return c, ops
}

// plainURL is the cluster's client URLs without TLS.
func (c *natsCluster) plainURL() string {
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", n.clientPort))
	}
	return strings.Join(urls, ",")
}

// TestOperatorModeClusterKeepsTenantsApart runs the 3-node cluster in
// operator/JWT mode: the operator, system account, CONVLOG account and
// server configuration from `agentd operator init`, a full resolver on
// each node, agentd serve as CONVLOG's user with R3 streams, and tenants
// alpha and beta made with `agentd operator tenant-create`. Beta writes a
// secret thread through its tenant client; alpha then performs the five
// reply-subject attacks and every request it may make with every hostile
// reply subject (tenancytest.HostileReplies). Afterwards beta's thread is
// as beta wrote it and beta received nothing, no subject outside alpha's
// changed in any stream (CONVLOG and each bucket), the registry holds no
// forged user, the projector's consumer is there and agentd serve still
// runs and answers. A user revoked with `agentd operator tenant-revoke`
// is disconnected and cannot connect again; beta still works.
func TestOperatorModeClusterKeepsTenantsApart(t *testing.T) {
	start := time.Now()
	natsBin, agentdBin := buildBinaries(t)
	dir := t.TempDir()
	cl, ops := startOperatorCluster(t, dir, natsBin, agentdBin)
	url := cl.plainURL()
	t.Logf("operator-mode cluster healthy after %s", time.Since(start).Round(time.Millisecond))

	agent := newProc(t, dir, "agentd", agentdBin, []string{"serve", "--nats-url", url, "--creds", filepath.Join(ops, "convlog.creds"),
		"--replicas", "3", "--workers", "0", "--http-addr", ""}, []string{"CONVLOG_DATA_DIR=" + filepath.Join(dir, "agentd-data")})
	// Restarted like compose's "restart: unless-stopped" while the new
	// cluster settles; from the attacks on it must not exit.
	agent.restartPolicy = true
	agent.start(t)
	waitLog(t, agent, "projector started", 60*time.Second)
	if exits := agent.unexpectedExits(); len(exits) > 0 {
		t.Logf("agentd serve exited while the cluster settled: %v", exits)
	}

	creds := map[string]string{}
	for _, tenant := range []string{"alpha", "beta"} {
		creds[tenant] = filepath.Join(dir, tenant+".creds")
		out, err := exec.Command(agentdBin, "operator", "tenant-create", tenant, "--dir", ops, "--nats-url", url,
			"--out", creds[tenant], "--json").CombinedOutput()
		require.NoError(t, err, "agentd operator tenant-create %s: %s", tenant, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adminNC, err := nats.Connect(url, nats.UserCredentials(filepath.Join(ops, "convlog.creds")))
	require.NoError(t, err)
	t.Cleanup(adminNC.Close)
	admin, err := client.New(ctx, adminNC, client.Config{})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	js := admin.JetStream()
	res := admin.Config().Resources.WithDefaults()

	tenantConn := func(tenant string, opts ...nats.Option) (*nats.Conn, *client.Client) {
		t.Helper()
		var nc *nats.Conn
		require.NoError(t, poll(20*time.Second, 100*time.Millisecond, func() error { // every node has the account
			nc, err = nats.Connect(url, append([]nats.Option{nats.UserCredentials(creds[tenant]),
				nats.CustomInboxPrefix(client.TenantInboxPrefix(tenant))}, opts...)...)
			return err
		}))
		t.Cleanup(nc.Close)
		c, err := client.New(ctx, nc, client.Config{Tenant: tenant})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return nc, c
	}

	// Beta writes its secret.
	const secret = "beta-SECRET-7f3a"
	betaNC, beta := tenantConn("beta")
	var v uint64
	require.NoError(t, poll(30*time.Second, 200*time.Millisecond, func() error { // the tenant service answers once serve runs
		_, _, v, err = beta.CreateThread(ctx, client.CreateOptions{Tenant: "beta", ThreadID: "bsecret"})
		return err
	}))
	_, err = beta.Append(ctx, "beta", "bsecret", []events.Event{{Payload: events.UserMessage{Content: events.Text(secret)}}}, client.ExpectVersion(v))
	require.NoError(t, err)
	betaBefore, err := admin.Get(ctx, "beta", "bsecret", client.Consistent())
	require.NoError(t, err)
	var betaSubs []*nats.Subscription
	for _, subj := range []string{res.SubjectPrefix + ".beta.>", tenancy.InboxPrefix("beta") + ".>"} {
		s, err := betaNC.SubscribeSync(subj)
		require.NoError(t, err)
		betaSubs = append(betaSubs, s)
	}
	require.NoError(t, betaNC.Flush())

	// Alpha has a thread, and on a subject of its own a registry record
	// that would make a key alpha holds a user of beta.
	alphaRevoked := make(chan struct{})
	var revokedOnce sync.Once
	alphaNC, alpha := tenantConn("alpha", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrAuthRevoked) {
			revokedOnce.Do(func() { close(alphaRevoked) })
		}
	}))
	_, _, v, err = alpha.CreateThread(ctx, client.CreateOptions{Tenant: "alpha", ThreadID: "athread"})
	require.NoError(t, err)
	_, err = alpha.Append(ctx, "alpha", "athread", []events.Event{{Payload: events.UserMessage{Content: events.Text("hello")}}}, client.ExpectVersion(v))
	require.NoError(t, err)
	forged, _ := nkeys.CreateUser()
	forgedKey, _ := forged.PublicKey()
	record, _ := json.Marshal(tenancy.User{Tenant: "beta", PublicKey: forgedKey, CreatedAt: time.Now().UTC()})
	_, stash := tenancytest.Subject(res, "alpha", "stash")
	_, err = alphaNC.Request(stash, record, 5*time.Second)
	require.NoError(t, err)
	// A message with no body: its direct get's answer is one a deletion
	// in the JetStream API accepts.
	emptyStream, empty := tenancytest.Subject(res, "alpha", "empty")
	_, err = alphaNC.Request(empty, nil, 5*time.Second)
	require.NoError(t, err)

	// Whatever reaches alpha's own subscriptions must hold nothing of beta's.
	var alphaSubs []*nats.Subscription
	for _, subj := range []string{res.SubjectPrefix + ".alpha.>", tenancy.InboxPrefix("alpha") + ".>"} {
		s, err := alphaNC.SubscribeSync(subj)
		require.NoError(t, err)
		alphaSubs = append(alphaSubs, s)
	}
	exitsBefore := len(agent.unexpectedExits())
	reg := registry(ctx, t, js, res)
	usersBefore, err := reg.List(ctx, "")
	require.NoError(t, err)
	before := settledOutsideState(ctx, t, js, "alpha")

	// The five attacks, then every request alpha may make with every
	// hostile reply subject.
	keyBucket := res.Partition(0).KeyBucket
	_, athread := tenancytest.Subject(res, "alpha", "athread")
	cStream, bsecret := tenancytest.Subject(res, "beta", "bsecret")
	stashStream, _ := tenancytest.Subject(res, "alpha", "stash")
	athreadStream, _ := tenancytest.Subject(res, "alpha", "athread")
	logLast := []byte(`{"thread":"athread"}`)
	attacks := []struct {
		subject, reply string
		data           []byte
	}{
		{"$JS.API.DIRECT.GET." + stashStream + "." + stash, "$KV." + res.TenantBucket + ".beta." + forgedKey, nil},
		{res.TenantAPI + ".alpha.log.last", "$KV." + keyBucket + ".beta.bsecret", logLast},
		{res.TenantAPI + ".alpha.log.last", "$JS.API.STREAM.PURGE.KV_" + keyBucket, logLast},
		{"$JS.API.DIRECT.GET." + athreadStream + "." + athread, "$JS.API.STREAM.PURGE." + cStream, nil},
		{"$JS.API.DIRECT.GET." + emptyStream + "." + empty, "$JS.API.CONSUMER.DELETE." + cStream + ".convlog-projector", nil},
		{athread, bsecret, []byte("x")},
	}
	for _, a := range attacks {
		m := nats.NewMsg(a.subject)
		m.Reply, m.Data = a.reply, a.data
		require.NoError(t, alphaNC.PublishMsg(m))
	}
	replies := tenancytest.HostileReplies(res, "alpha", "beta", "bsecret", forgedKey)
	requests := tenancytest.Requests(res, "alpha", "athread", "stash", "empty")
	for _, reply := range replies {
		for _, r := range requests {
			m := nats.NewMsg(r.Subject)
			m.Reply, m.Data = reply, r.Data
			require.NoError(t, alphaNC.PublishMsg(m))
		}
	}
	require.NoError(t, alphaNC.Flush())
	// Round trips on each path the attacks took; the answers that went
	// astray land nowhere anyone can see, so they get a moment more.
	_, err = alphaNC.Request("$JS.API.DIRECT.GET."+athreadStream+"."+athread, nil, 5*time.Second)
	require.NoError(t, err)
	_, err = alphaNC.Request(res.TenantAPI+".alpha.log.last", logLast, 5*time.Second)
	require.NoError(t, err)
	time.Sleep(time.Second)

	// Nothing of beta read or changed.
	for _, s := range betaSubs {
		if m, err := s.NextMsg(10 * time.Millisecond); err == nil {
			t.Errorf("LEAK: beta's subscription %s received %s: %q", s.Subject, m.Subject, m.Data)
		}
	}
	for _, s := range alphaSubs {
		for {
			m, err := s.NextMsg(10 * time.Millisecond)
			if err != nil {
				break
			}
			require.NotContains(t, string(m.Data), secret, "LEAK: alpha's %s received beta's secret on %s", s.Subject, m.Subject)
			for _, subj := range []string{m.Subject, m.Header.Get("Nats-Subject")} {
				require.False(t, tenancytest.OwnedBy(subj, "beta"), "LEAK: alpha's %s received a message of beta's %s", s.Subject, subj)
			}
		}
	}
	betaAfter, err := admin.Get(ctx, "beta", "bsecret", client.Consistent())
	require.NoError(t, err)
	require.Equal(t, betaBefore.Version, betaAfter.Version, "beta's thread version")
	require.Len(t, betaAfter.Messages, 1)
	require.Equal(t, secret, betaAfter.Messages[0].Content.Text)
	// Convlog's streams and consumers untouched; no forged user.
	after := settledOutsideState(ctx, t, js, "alpha")
	require.ElementsMatch(t, slices.Collect(maps.Keys(before)), slices.Collect(maps.Keys(after)), "streams")
	for name, st := range before {
		require.Equal(t, st.Subjects, after[name].Subjects, "stream %s: subjects outside alpha's", name)
		require.Equal(t, st.Consumers, after[name].Consumers, "stream %s: consumers", name)
	}
	_, err = js.Consumer(ctx, cStream, "convlog-projector")
	require.NoError(t, err, "the projector's consumer")
	usersAfter, err := reg.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, usersBefore, usersAfter, "the tenant registry")
	// agentd serve still runs: alpha's and beta's reads through its tenant
	// service work.
	require.True(t, agent.running(), "agentd serve runs")
	require.Len(t, agent.unexpectedExits(), exitsBefore, "agentd serve did not exit")
	_, err = alpha.Get(ctx, "alpha", "athread", client.Consistent())
	require.NoError(t, err)
	_, err = beta.List(ctx, "beta", client.ListOptions{})
	require.NoError(t, err)
	t.Logf("5 attacks and %d reply subjects x %d requests on a 3-node operator-mode cluster: nothing crossed", len(replies), len(requests))

	// A revoked user is cut off and refused; beta is not.
	out, err := exec.Command(agentdBin, "operator", "tenant-revoke", "alpha", "--dir", ops, "--nats-url", url).CombinedOutput()
	require.NoError(t, err, "agentd operator tenant-revoke: %s", out)
	select {
	case <-alphaRevoked:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not cut off the revoked user")
	}
	require.NoError(t, poll(10*time.Second, 100*time.Millisecond, func() error {
		if alphaNC.IsConnected() {
			return errors.New("the revoked user's connection is still up")
		}
		return nil
	}))
	for _, n := range cl.nodes {
		require.NoError(t, poll(10*time.Second, 100*time.Millisecond, func() error {
			nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", n.clientPort), nats.UserCredentials(creds["alpha"]), nats.MaxReconnects(0))
			if err == nil {
				nc.Close()
				return fmt.Errorf("%s accepts the revoked user", n.name)
			}
			return nil
		}))
	}
	_, err = beta.Get(ctx, "beta", "bsecret", client.Consistent())
	require.NoError(t, err)
	users, err := reg.List(ctx, "alpha")
	require.NoError(t, err)
	require.Empty(t, users, "alpha's users left the registry")
	require.True(t, agent.running(), "agentd serve runs")
	require.Len(t, agent.unexpectedExits(), exitsBefore, "agentd serve did not exit")
	// So does any other command run without --replicas.
	out, err = exec.Command(agentdBin, "tenant", "list", "--nats-url", url, "--creds", filepath.Join(ops, "convlog.creds")).CombinedOutput()
	require.NoError(t, err, "agentd tenant list: %s", out)
	// The operator commands left the deployment's R3 streams as they were.
	for name := range after {
		info, err := streamInfo(js, name)
		require.NoError(t, err)
		require.Equal(t, 3, info.Config.Replicas, "stream %s", name)
	}
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}

// registry is the tenant registry of res, read with js.
func registry(ctx context.Context, t *testing.T, js jetstream.JetStream, res provision.Config) *tenancy.Registry {
	t.Helper()
	kv, err := js.KeyValue(ctx, res.TenantBucket)
	require.NoError(t, err)
	return tenancy.NewRegistry(kv)
}

// settledOutsideState is tenancytest.OutsideState once two reads 300 ms
// apart agree (the projector writes snapshots after the events).
func settledOutsideState(ctx context.Context, t *testing.T, js jetstream.JetStream, tenant string) tenancytest.StreamState {
	t.Helper()
	var last tenancytest.StreamState
	require.NoError(t, poll(20*time.Second, 300*time.Millisecond, func() error {
		st, err := tenancytest.OutsideState(ctx, js, tenant)
		if err != nil {
			return err
		}
		same := last != nil && fmt.Sprint(st) == fmt.Sprint(last)
		last = st
		if !same {
			return errNotYet
		}
		return nil
	}))
	return last
}

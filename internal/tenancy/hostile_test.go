package tenancy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
	"github.com/convlog/convlog/internal/testlog"
	"github.com/convlog/convlog/projector"
)

// deployment is a real embedded server with authentication, convlog's
// resources, a projector and the tenant service, run as agentd serve runs
// them, and the registry's users applied to the server.
type deployment struct {
	srv   *embedded.Server
	admin *client.Client
	js    jetstream.JetStream
	reg   *tenancy.Registry
	seeds map[string][]byte
	res   provision.Config
	// adminSeed is the admin user's seed file (every permission).
	adminSeed string
	// oneAccount puts the tenants' users in convlog's account with their
	// permissions ([oneAccountConf]) in place of accounts of their own.
	oneAccount bool
	// serviceLog holds what the tenant service logs.
	serviceLog *testlog.Buffer
}

// newDeployment starts a deployment of k partitions (a projector each).
func newDeployment(t testing.TB, k int) *deployment { return newDeploymentOf(t, k, false) }

// newDeploymentOf starts a deployment of k partitions whose tenant users
// are in accounts of their own, or with oneAccount in convlog's.
func newDeploymentOf(t testing.TB, k int, oneAccount bool) *deployment {
	t.Helper()
	dir := t.TempDir()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, _ := kp.Seed()
	seedFile := filepath.Join(dir, "admin.nk")
	require.NoError(t, os.WriteFile(seedFile, seed, 0o600))
	res := provision.DefaultConfig()
	res.Partitions = k
	accounts, err := tenancy.AccountsConf(tenancy.AccountsConfig{Resources: res})
	require.NoError(t, err)
	srv, err := embedded.Start(embedded.Config{StoreDir: filepath.Join(dir, "js"), NKeySeed: seedFile,
		Accounts: accounts, GlobalAccount: tenancy.ConvlogAccount})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := &deployment{srv: srv, seeds: map[string][]byte{}, res: res, adminSeed: seedFile, oneAccount: oneAccount,
		serviceLog: &testlog.Buffer{}}
	d.admin, err = client.New(ctx, nc, client.Config{Provision: true, Resources: d.res})
	require.NoError(t, err)
	d.js = d.admin.JetStream()
	pctx, pcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for part := range k {
		p, err := projector.New(d.js, projector.Config{Partition: part})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Run(pctx) }()
	}
	t.Cleanup(func() { pcancel(); wg.Wait() })
	svc, err := tenancy.StartService(ctx, nc, d.js, tenancy.ServiceConfig{Logger: slog.New(slog.NewTextHandler(d.serviceLog, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })
	kv, err := d.js.KeyValue(ctx, d.res.TenantBucket)
	require.NoError(t, err)
	d.reg = tenancy.NewRegistry(kv)
	return d
}

// addUser registers a user of tenant and gives the server every
// registered user's account, as agentd serve does on each registry change.
func (d *deployment) addUser(t testing.TB, tenant string) {
	t.Helper()
	ctx := context.Background()
	_, seed, err := d.reg.Create(ctx, tenant, "test")
	require.NoError(t, err)
	d.seeds[tenant] = seed
	d.apply(t)
}

func (d *deployment) apply(t testing.TB) {
	t.Helper()
	users, err := d.reg.List(context.Background(), "")
	require.NoError(t, err)
	conf, err := tenancy.AccountsConf(tenancy.AccountsConfig{Resources: d.res, Users: users})
	if d.oneAccount {
		conf, err = oneAccountConf(d.res, users)
	}
	require.NoError(t, err)
	require.NoError(t, d.srv.SetAccounts(conf))
}

// oneAccountConf is the accounts block of tenant users inside convlog's
// account, each with its tenant's permissions ([tenancy.For]): the model
// that cannot stop reply subjects, kept as the baseline of the cost of
// accounts.
func oneAccountConf(res provision.Config, users []tenancy.User) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "accounts {\n  %s: {\n    jetstream: enabled\n    users: [\n", tenancy.ConvlogAccount)
	for _, u := range users {
		p, err := tenancy.For(res, u.Tenant)
		if err != nil {
			return "", err
		}
		b.WriteString(p.ServerConf(u.PublicKey))
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String(), nil
}

// tenantConn is a connection as one of tenant's users; errs collects
// the server's asynchronous errors (permission violations).
type tenantConn struct {
	nc   *nats.Conn
	mu   sync.Mutex
	errs []string
}

func (d *deployment) connect(t testing.TB, tenant string) *tenantConn {
	t.Helper()
	kp, err := nkeys.FromSeed(d.seeds[tenant])
	require.NoError(t, err)
	pub, _ := kp.PublicKey()
	tc := &tenantConn{}
	nc, err := nats.Connect(d.srv.ClientURL(), nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix(tenancy.InboxPrefix(tenant)),
		nats.MaxReconnects(0), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			tc.mu.Lock()
			tc.errs = append(tc.errs, err.Error())
			tc.mu.Unlock()
		}))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	tc.nc = nc
	return tc
}

// violation waits up to 2 s for the server's permission violation of
// kind ("Publish" or "Subscription") on subject.
func (tc *tenantConn) violation(kind, subject string) bool {
	want := `Permissions Violation for ` + kind + ` to "` + subject + `"`
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		tc.mu.Lock()
		for _, e := range tc.errs {
			if strings.Contains(e, want) {
				tc.mu.Unlock()
				return true
			}
		}
		tc.mu.Unlock()
	}
	return false
}

func (d *deployment) tenantClient(t testing.TB, tc *tenantConn, tenant string) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), tc.nc, client.Config{Tenant: tenant})
	require.NoError(t, err)
	return c
}

func userMessage(text string) []events.Event {
	return []events.Event{{Payload: events.UserMessage{Content: events.Text(text)}}}
}

// TestTenantUserReachesNothingOfAnotherTenant is the hostile-service
// test: with tenant A's credentials, every way to reach tenant B's
// data over NATS is tried against a real server; each must be denied by
// the server (or, for the tenant service's own subjects, answered with
// A's data or an error) and B's data must be unchanged afterwards. A's
// own client works over the same credentials. It runs on a deployment of
// one partition and on one of three, where every attempt that names a
// partition's stream, subjects or buckets is made on each partition.
func TestTenantUserReachesNothingOfAnotherTenant(t *testing.T) {
	for _, k := range []int{1, 3} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) { hostileTenant(t, k) })
	}
}

func hostileTenant(t *testing.T, k int) {
	d := newDeployment(t, k)
	d.addUser(t, "acme")
	d.addUser(t, "globex")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// B (globex) writes a secret through its own scoped client.
	bConn := d.connect(t, "globex")
	b := d.tenantClient(t, bConn, "globex")
	const secret = "globex-SECRET-7f3a"
	_, _, v, err := b.CreateThread(ctx, client.CreateOptions{Tenant: "globex", ThreadID: "secret"})
	require.NoError(t, err)
	res, err := b.Append(ctx, "globex", "secret", userMessage(secret), client.ExpectVersion(v))
	require.NoError(t, err)
	th, err := b.Get(ctx, "globex", "secret", client.AtLeastVersion(res.Version))
	require.NoError(t, err)
	require.Equal(t, secret, th.Messages[0].Content.Text)
	bKey, err := d.js.KeyValue(ctx, d.admin.For("globex", "secret").Config().Resources.KeyBucket)
	require.NoError(t, err)
	keyEntry, err := bKey.Get(ctx, "globex.secret")
	require.NoError(t, err)

	// A (acme) works with its own threads through the scoped client.
	aConn := d.connect(t, "acme")
	a := d.tenantClient(t, aConn, "acme")
	_, _, v, err = a.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "t1"})
	require.NoError(t, err)
	ra, err := a.Append(ctx, "acme", "t1", userMessage("hello"), client.ExpectVersion(v))
	require.NoError(t, err)
	got, err := a.Get(ctx, "acme", "t1", client.Consistent())
	require.NoError(t, err)
	require.Equal(t, "hello", got.Messages[0].Content.Text)
	w, err := a.Watch(ctx, "acme", "t1", client.WatchOptions{After: ra.Version})
	require.NoError(t, err)
	defer w.Stop()
	ra2, err := a.Append(ctx, "acme", "t1", []events.Event{{ID: "01933b6c-0000-7000-8000-000000000001",
		Payload: events.AssistantMessage{Content: events.Text("hi")}}}, client.ExpectVersion(ra.Version))
	require.NoError(t, err)
	select {
	case u := <-w.C:
		require.NoError(t, u.Err)
		require.Equal(t, ra2.Version, u.Event.Seq)
	case <-time.After(10 * time.Second):
		t.Fatal("the scoped watch delivered nothing")
	}
	// The same event id again: the duplicate check reads the stored
	// event by sequence through the service.
	dup, err := a.Append(ctx, "acme", "t1", []events.Event{{ID: "01933b6c-0000-7000-8000-000000000001",
		Payload: events.AssistantMessage{Content: events.Text("hi")}}}, client.ExpectVersion(ra.Version))
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	past, err := a.Get(ctx, "acme", "t1", client.AtSeq(ra.Version))
	require.NoError(t, err)
	require.Len(t, past.Messages, 1)
	require.Equal(t, "hello", past.Messages[0].Content.Text)
	// The listing reads the projected index: eventually t1.
	var page client.ListPage
	require.Eventually(t, func() bool {
		page, err = a.List(ctx, "acme", client.ListOptions{})
		return err == nil && len(page.Threads) == 1
	}, 10*time.Second, 10*time.Millisecond, "the scoped listing: %v %v", page, err)
	require.Equal(t, "t1", page.Threads[0].Thread)

	// The client refuses another tenant before NATS does.
	_, err = a.Get(ctx, "globex", "secret")
	require.ErrorIs(t, err, events.ErrOtherTenant)
	_, err = a.Erase(ctx, "acme", "t1", "test")
	require.ErrorIs(t, err, client.ErrTenantScoped)

	nc := aConn.nc
	type attempt struct {
		kind string
		try  func() (denied bool, detail string)
	}
	pub := func(subject string, hdr nats.Header, data []byte) func() (bool, string) {
		return func() (bool, string) {
			m := nats.NewMsg(subject)
			m.Header, m.Data = hdr, data
			if err := nc.PublishMsg(m); err != nil {
				return true, "client refused: " + err.Error()
			}
			_ = nc.Flush()
			return aConn.violation("Publish", subject), "publish " + subject
		}
	}
	var subs []*nats.Subscription
	sub := func(subject string) func() (bool, string) {
		return func() (bool, string) {
			s, err := nc.SubscribeSync(subject)
			if err != nil {
				return true, "client refused: " + err.Error()
			}
			subs = append(subs, s)
			_ = nc.Flush()
			return aConn.violation("Subscription", subject), "subscribe " + subject
		}
	}
	req := func(subject string, body any) func() (bool, string) {
		return func() (bool, string) {
			var data []byte
			switch v := body.(type) {
			case nil:
			case string:
				data = []byte(v)
			default:
				data, _ = json.Marshal(v)
			}
			rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer rcancel()
			m, err := nc.RequestWithContext(rctx, subject, data)
			if err == nil {
				return false, "answered: " + string(m.Data)
			}
			return aConn.violation("Publish", subject), "request " + subject + ": " + err.Error()
		}
	}
	// service calls A may make: the answer must hold nothing of B.
	service := func(op string, body any, check func(*nats.Msg) bool) func() (bool, string) {
		return func() (bool, string) {
			data, _ := json.Marshal(body)
			m, err := nc.Request("convlog.api.acme."+op, data, 5*time.Second)
			if err != nil {
				return false, err.Error()
			}
			return check(m), "answer: " + m.Header.Get("Nats-Service-Error-Code") + " " + m.Header.Get("Nats-Service-Error") + " " + string(m.Data)
		}
	}
	serviceError := func(code string) func(*nats.Msg) bool {
		return func(m *nats.Msg) bool { return m.Header.Get("Nats-Service-Error-Code") == code }
	}
	api := "$JS.API."
	// What names a partition's stream, subjects and buckets is tried on
	// every partition (one with K = 1).
	var attempts []attempt
	for i := range max(d.res.Partitions, 1) {
		r := d.res.Partition(i)
		attempts = append(attempts, []attempt{
			{"publish an event to B's thread (partition " + fmt.Sprint(i) + ")", pub(r.SubjectPrefix+".globex.secret", nil, []byte("x"))},
			{"publish an event to a new thread of B (partition " + fmt.Sprint(i) + ")", pub(r.SubjectPrefix+".globex.new", nil, []byte("x"))},
			{"publish a delta to B's thread (partition " + fmt.Sprint(i) + ")", pub(r.SubjectPrefix+".globex.secret.delta", nil, []byte("{}"))},
			{"publish an audit checkpoint (partition " + fmt.Sprint(i) + ")", pub(r.SubjectPrefix+".audit", nil, []byte("x"))},
			{"plant a data key for a future thread of B (partition " + fmt.Sprint(i) + ")", pub("$KV."+r.KeyBucket+".globex.future", nil, make([]byte, 41))},
			{"roll up (purge) the key bucket from A's own key (partition " + fmt.Sprint(i) + ")", pub("$KV."+r.KeyBucket+".acme.t1", nats.Header{"Nats-Rollup": []string{"all"}}, []byte{0})},
			{"forge B's snapshot head (partition " + fmt.Sprint(i) + ")", pub("$KV."+r.SnapshotBucket+".globex.secret", nil, []byte{0x80})},
			{"forge B's index entry (partition " + fmt.Sprint(i) + ")", pub("$KV."+r.IndexBucket+".globex.secret", nil, []byte{0x80})},
			{"subscribe to B's thread (partition " + fmt.Sprint(i) + ")", sub(r.SubjectPrefix + ".globex.secret")},
			{"subscribe to all of B's subjects (partition " + fmt.Sprint(i) + ")", sub(r.SubjectPrefix + ".globex.>")},
			{"subscribe to every thread (partition " + fmt.Sprint(i) + ")", sub(r.SubjectPrefix + ".>")},
			{"subscribe to every thread subject (partition " + fmt.Sprint(i) + ")", sub(r.SubjectPrefix + ".*.*")},
			{"subscribe to the thread keys' subjects (partition " + fmt.Sprint(i) + ")", sub("$KV." + r.KeyBucket + ".>")},
			{"batched direct get of the stream (partition " + fmt.Sprint(i) + ")", req(api+"DIRECT.GET."+r.Stream, map[string]any{"seq": 1, "batch": 100})},
			{"direct get of B's last event (body) (partition " + fmt.Sprint(i) + ")", req(api+"DIRECT.GET."+r.Stream, map[string]any{"last_by_subj": r.SubjectPrefix + ".globex.secret"})},
			{"direct get of B's last event (subject) (partition " + fmt.Sprint(i) + ")", req(api+"DIRECT.GET."+r.Stream+"."+r.SubjectPrefix+".globex.secret", nil)},
			{"direct get of B's snapshot head (partition " + fmt.Sprint(i) + ")", req(api+"DIRECT.GET."+"KV_"+r.SnapshotBucket+".$KV."+r.SnapshotBucket+".globex.secret", nil)},
			{"direct get of B's index entry (partition " + fmt.Sprint(i) + ")", req(api+"DIRECT.GET."+"KV_"+r.IndexBucket+".$KV."+r.IndexBucket+".globex.secret", nil)},
			{"direct get of B's data key (partition " + fmt.Sprint(i) + ")", req(api+"DIRECT.GET."+"KV_"+r.KeyBucket+".$KV."+r.KeyBucket+".globex.secret", nil)},
			{"direct get of the key bucket by sequence (partition " + fmt.Sprint(i) + ")", req(api+"DIRECT.GET."+"KV_"+r.KeyBucket, map[string]any{"seq": 1})},
			{"non-direct get by sequence (partition " + fmt.Sprint(i) + ")", req(api+"STREAM.MSG.GET."+r.Stream, map[string]any{"seq": 1})},
			{"stream info listing subjects (partition " + fmt.Sprint(i) + ")", req(api+"STREAM.INFO."+r.Stream, map[string]any{"subjects_filter": r.SubjectPrefix + ".>"})},
			{"KV keys of every tenant (stream info) (partition " + fmt.Sprint(i) + ")", req(api+"STREAM.INFO."+"KV_"+r.IndexBucket, map[string]any{"subjects_filter": ">"})},
			{"consumer with a wide filter (partition " + fmt.Sprint(i) + ")", req(api+"CONSUMER.CREATE."+r.Stream+".evil."+r.SubjectPrefix+".>", map[string]any{"stream_name": r.Stream,
				"config": map[string]any{"name": "evil", "filter_subject": r.SubjectPrefix + ".>", "ack_policy": "none"}})},
			{"consumer on A's own subjects delivering into B's keys (partition " + fmt.Sprint(i) + ")", req(api+"CONSUMER.CREATE."+r.Stream+".evil."+r.SubjectPrefix+".acme.>", map[string]any{"stream_name": r.Stream,
				"config": map[string]any{"name": "evil", "filter_subject": r.SubjectPrefix + ".acme.>", "deliver_subject": "$KV." + r.KeyBucket + ".globex.future", "ack_policy": "none"}})},
			{"legacy ephemeral consumer (partition " + fmt.Sprint(i) + ")", req(api+"CONSUMER.CREATE."+r.Stream, map[string]any{"stream_name": r.Stream, "config": map[string]any{"ack_policy": "none"}})},
			{"durable consumer (partition " + fmt.Sprint(i) + ")", req(api+"CONSUMER.DURABLE.CREATE."+r.Stream+".evil", map[string]any{"stream_name": r.Stream, "config": map[string]any{"durable_name": "evil"}})},
			{"KV watch of B's index (partition " + fmt.Sprint(i) + ")", req(api+"CONSUMER.CREATE."+"KV_"+r.IndexBucket+".evil.$KV."+r.IndexBucket+".globex.*", map[string]any{"stream_name": "KV_" + r.IndexBucket,
				"config": map[string]any{"name": "evil", "filter_subject": "$KV." + r.IndexBucket + ".globex.*", "ack_policy": "none"}})},
			{"pull from the projector's consumer (partition " + fmt.Sprint(i) + ")", req(api+"CONSUMER.MSG.NEXT."+r.Stream+".convlog-projector", map[string]any{"batch": 1})},
			{"list consumers (partition " + fmt.Sprint(i) + ")", req(api+"CONSUMER.LIST."+r.Stream, nil)},
			{"delete the projector's consumer (partition " + fmt.Sprint(i) + ")", req(api+"CONSUMER.DELETE."+r.Stream+".convlog-projector", nil)},
			{"purge B's thread (partition " + fmt.Sprint(i) + ")", req(api+"STREAM.PURGE."+r.Stream, map[string]any{"filter": r.SubjectPrefix + ".globex.secret"})},
			{"delete a message (partition " + fmt.Sprint(i) + ")", req(api+"STREAM.MSG.DELETE."+r.Stream, map[string]any{"seq": 1})},
			{"delete the key bucket (partition " + fmt.Sprint(i) + ")", req(api+"STREAM.DELETE."+"KV_"+r.KeyBucket, nil)},
			{"update the stream (partition " + fmt.Sprint(i) + ")", req(api+"STREAM.UPDATE."+r.Stream, map[string]any{"name": r.Stream, "subjects": []string{r.SubjectPrefix + ".>"}})},
			{"snapshot (back up) the stream (partition " + fmt.Sprint(i) + ")", req(api+"STREAM.SNAPSHOT."+r.Stream, map[string]any{"deliver_subject": "_INBOX_acme.snap"})},
		}...)
	}
	attempts = append(attempts, []attempt{
		{"register a user in the tenant registry", pub("$KV.convlog_tenants.acme.UEVIL", nil, []byte("{}"))},
		{"write a blob chunk", pub("$O.convlog_blobs.C.evil", nil, []byte("x"))},
		{"subscribe to everything", sub(">")},
		{"subscribe to the shared inboxes (others' replies)", sub("_INBOX.>")},
		{"subscribe to B's inboxes", sub("_INBOX_globex.>")},
		{"subscribe to the JetStream API", sub("$JS.API.>")},
		{"answer B's tenant service requests", sub("convlog.api.globex.>")},
		{"list streams", req(api+"STREAM.LIST", nil)},
		{"stream names", req(api+"STREAM.NAMES", nil)},
		{"account info", req(api+"INFO", nil)},
		{"blob store info", req(api+"STREAM.INFO.OBJ_convlog_blobs", nil)},
		{"system account ping", req("$SYS.REQ.SERVER.PING", nil)},
		{"service discovery", req("$SRV.INFO", nil)},
		{"B's tenant service: read B's log", req("convlog.api.globex.log.get", map[string]any{"thread": "secret", "from": 1, "batch": 10})},
		{"B's tenant service: list B's threads", req("convlog.api.globex.index.list", map[string]any{})},
		{"B's tenant service: create B's key", req("convlog.api.globex.key.create", map[string]any{"thread": "x", "record": make([]byte, 41)})},
		{"A's service: read a thread named like B's", service("log.get", map[string]any{"thread": "secret", "from": 1, "batch": 10},
			func(m *nats.Msg) bool {
				return m.Header.Get("Nats-Service-Error-Code") == "" && !strings.Contains(string(m.Data), "globex") && len(m.Data) < 16
			})},
		{"A's service: a thread id naming B's subject", service("log.get", map[string]any{"thread": "globex.secret", "from": 1, "batch": 10}, serviceError("400"))},
		{"A's service: a wildcard thread", service("log.get", map[string]any{"thread": "*", "from": 1, "batch": 10}, serviceError("400"))},
		{"A's service: store a tombstone as a key", service("key.create", map[string]any{"thread": "t2", "record": []byte{0}}, serviceError("400"))},
		{"A's service: list threads", service("index.list", map[string]any{"partition": events.Partition("acme", "t1", max(k, 1))},
			func(m *nats.Msg) bool {
				return !strings.Contains(string(m.Data), "secret") && strings.Contains(string(m.Data), "t1")
			})},
	}...)
	leaks := 0
	for _, at := range attempts {
		denied, detail := at.try()
		if !denied {
			leaks++
			t.Errorf("LEAK: %s: %s", at.kind, detail)
		}
	}
	// B writes again: no subscription of A may have received anything.
	_, err = b.Append(ctx, "globex", "secret", userMessage(secret+" again"), client.AnyVersion())
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	for _, s := range subs {
		if m, err := s.NextMsg(10 * time.Millisecond); err == nil {
			leaks++
			t.Errorf("LEAK: subscription %s received %q", s.Subject, m.Data)
		}
	}
	// B's data is as B wrote it: two messages, the same key, the
	// projector's consumer in place.
	bt, err := d.admin.Get(ctx, "globex", "secret", client.Consistent())
	require.NoError(t, err)
	require.Len(t, bt.Messages, 2)
	require.Equal(t, secret, bt.Messages[0].Content.Text)
	after, err := bKey.Get(ctx, "globex.secret")
	require.NoError(t, err)
	require.Equal(t, keyEntry.Revision(), after.Revision())
	_, err = bKey.Get(ctx, "globex.future")
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
	for _, pc := range d.admin.Partitions() {
		_, err = d.js.Consumer(ctx, pc.Config().Resources.Stream, "convlog-projector")
		require.NoError(t, err)
	}
	t.Logf("hostile tenant, %d partition(s): %d kinds of attempt, %d leaks", k, len(attempts), leaks)
	require.GreaterOrEqual(t, len(attempts), 30)
	require.Zero(t, leaks)

	// Revoking A's users closes A's connection; B's goes on.
	_, err = d.reg.Revoke(ctx, "acme", "")
	require.NoError(t, err)
	d.apply(t)
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 5*time.Second, 10*time.Millisecond)
	_, err = b.Get(ctx, "globex", "secret")
	require.NoError(t, err)
	require.Error(t, d.connectErr("acme"))
}

// connectErr returns the error of connecting as tenant's (revoked) user,
// nil if the server accepts it.
func (d *deployment) connectErr(tenant string) error {
	kp, err := nkeys.FromSeed(d.seeds[tenant])
	if err != nil {
		return err
	}
	pub, _ := kp.PublicKey()
	nc, err := nats.Connect(d.srv.ClientURL(), nats.Nkey(pub, kp.Sign), nats.MaxReconnects(0))
	if err == nil {
		nc.Close()
	}
	return err
}

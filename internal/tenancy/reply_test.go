package tenancy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	"github.com/convlog/convlog/projector"
)

// TestNoReplySubjectCrossesTenants is the hostile test of reply subjects:
// NATS never checks the reply subject a client sets, and whoever answers
// (nats-server for a publish acknowledgement or a direct get, agentd's
// tenant service) publishes there with its own rights. Tenant A (acme)
// sends every request it may make (an append, a delta, each direct get,
// each tenant service operation) with every reply subject that names
// another tenant's data or inbox or convlog's own streams, buckets,
// consumers and JetStream API. Afterwards nothing outside A's own
// subjects has changed in any stream, no consumer or stream is gone, the
// tenant registry holds no forged user, B (globex) received nothing, and
// the projector and the tenant service still work. Run on 1 and 3
// partitions.
func TestNoReplySubjectCrossesTenants(t *testing.T) {
	for _, k := range []int{1, 3} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) { replyAttacks(t, k) })
	}
}

// outsideState reads the state of every stream of the account, leaving
// out the subjects that belong to tenant.
func outsideState(ctx context.Context, t *testing.T, js jetstream.JetStream, tenant string) tenancytest.StreamState {
	t.Helper()
	st, err := tenancytest.OutsideState(ctx, js, tenant)
	require.NoError(t, err)
	return st
}

func replyAttacks(t *testing.T, k int) {
	d := newDeployment(t, k)
	d.addUser(t, "acme")
	d.addUser(t, "globex")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res := d.res.WithDefaults()

	// B writes a secret and listens on its thread and its inbox.
	bConn := d.connect(t, "globex")
	b := d.tenantClient(t, bConn, "globex")
	const secret = "globex-SECRET-41c9"
	_, _, v, err := b.CreateThread(ctx, client.CreateOptions{Tenant: "globex", ThreadID: "secret"})
	require.NoError(t, err)
	bWrote, err := b.Append(ctx, "globex", "secret", userMessage(secret), client.ExpectVersion(v))
	require.NoError(t, err)
	var bSubs []*nats.Subscription
	for i := range max(res.Partitions, 1) {
		s, err := bConn.nc.SubscribeSync(res.Partition(i).SubjectPrefix + ".globex.>")
		require.NoError(t, err)
		bSubs = append(bSubs, s)
	}
	bInbox, err := bConn.nc.SubscribeSync(tenancy.InboxPrefix("globex") + ".>")
	require.NoError(t, err)
	bSubs = append(bSubs, bInbox)
	require.NoError(t, bConn.nc.Flush())

	// A has a thread of its own, and a message on its own subject that
	// holds a user record of B's tenant for a key A owns (a direct get of
	// it answered into the tenant registry would register A's key as B's).
	aConn := d.connect(t, "acme")
	a := d.tenantClient(t, aConn, "acme")
	_, _, v, err = a.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "t1"})
	require.NoError(t, err)
	aWrote, err := a.Append(ctx, "acme", "t1", userMessage("hello"), client.ExpectVersion(v))
	require.NoError(t, err)
	forged, err := nkeys.CreateUser()
	require.NoError(t, err)
	forgedKey, _ := forged.PublicKey()
	record, _ := json.Marshal(tenancy.User{Tenant: "globex", PublicKey: forgedKey, CreatedAt: time.Now().UTC()})
	_, stash := tenancytest.Subject(res, "acme", "stash")
	_, err = aConn.nc.Request(stash, record, 5*time.Second)
	require.NoError(t, err)
	_, empty := tenancytest.Subject(res, "acme", "empty")
	_, err = aConn.nc.Request(empty, nil, 5*time.Second)
	require.NoError(t, err)

	// The projector has written every snapshot and index entry of what
	// is stored, so what changes below is the attacks' doing: each thread
	// has a snapshot at the version written, and each partition's
	// projector consumer has every trigger stored so far delivered and
	// acked (a step writes its chunks, head and index entry before it acks).
	for _, w := range []struct {
		tenant, thread string
		version        uint64
	}{{"globex", "secret", bWrote.Version}, {"acme", "t1", aWrote.Version}} {
		require.Eventually(t, func() bool {
			th, err := d.admin.Get(ctx, w.tenant, w.thread)
			return err == nil && th.FromSnapshot && th.Version >= w.version
		}, time.Minute, 10*time.Millisecond, "%s/%s has a snapshot at version %d", w.tenant, w.thread, w.version)
	}
	for i := range max(res.Partitions, 1) {
		require.NoError(t, provision.WaitConsumerDrained(ctx, d.js, res.Partition(i).Stream, projector.DefaultConfig().Durable))
	}
	before := outsideState(ctx, t, d.js, "acme")
	usersBefore, err := d.reg.List(ctx, "")
	require.NoError(t, err)

	// Every reply subject that names something not A's.
	replies := tenancytest.HostileReplies(res, "acme", "globex", "secret", forgedKey)
	require.GreaterOrEqual(t, len(replies), 40)

	// Every request A may make.
	requests := tenancytest.Requests(res, "acme", "t1", "stash", "empty")
	nc := aConn.nc
	for _, reply := range replies {
		for _, r := range requests {
			m := nats.NewMsg(r.Subject)
			m.Reply, m.Data = reply, r.Data
			require.NoError(t, nc.PublishMsg(m), "%s reply %s", r.Subject, reply)
		}
	}
	require.NoError(t, nc.Flush())
	// The answers are published by the server and the service after A's
	// publishes: give them time to land anywhere they could.
	time.Sleep(time.Second)

	// Nothing outside A's subjects changed, no stream or consumer is gone.
	after := outsideState(ctx, t, d.js, "acme")
	require.ElementsMatch(t, slices.Collect(maps.Keys(before)), slices.Collect(maps.Keys(after)), "streams")
	for name, st := range before {
		require.Equal(t, st.Subjects, after[name].Subjects, "stream %s: subjects outside acme's", name)
		require.Equal(t, st.Consumers, after[name].Consumers, "stream %s: consumers", name)
	}
	// No user was forged into the registry.
	usersAfter, err := d.reg.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, usersBefore, usersAfter)
	// B received nothing.
	for _, s := range bSubs {
		if m, err := s.NextMsg(10 * time.Millisecond); err == nil {
			t.Errorf("LEAK: B's subscription %s received %s: %q", s.Subject, m.Subject, m.Data)
		}
	}
	// B's thread is as B wrote it; A's client, the projector and the
	// tenant service still work.
	bt, err := d.admin.Get(ctx, "globex", "secret", client.Consistent())
	require.NoError(t, err)
	require.Len(t, bt.Messages, 1)
	require.Equal(t, secret, bt.Messages[0].Content.Text)
	got, err := a.Get(ctx, "acme", "t1", client.Consistent())
	require.NoError(t, err)
	r2, err := a.Append(ctx, "acme", "t1", []events.Event{{Payload: events.AssistantMessage{Content: events.Text("still here")}}},
		client.ExpectVersion(got.Version))
	require.NoError(t, err)
	_, err = a.Get(ctx, "acme", "t1", client.AtLeastVersion(r2.Version))
	require.NoError(t, err)
	for _, pc := range d.admin.Partitions() {
		_, err = d.js.Consumer(ctx, pc.Config().Resources.Stream, "convlog-projector")
		require.NoError(t, err)
	}
	t.Logf("%d reply subjects x %d requests, %d partition(s): nothing crossed", len(replies), len(requests), max(res.Partitions, 1))
}

// TestTenantServiceAnswersOnlyTheCallersInbox: a request to the tenant
// service whose reply subject is neither under the tenant's inbox prefix
// nor a cross-account response subject ("_R_.", which nats-server routes
// back to the importing account) is refused and not answered, so the
// service's full rights never publish to a subject the caller chose; the
// service logs the refusal with the reply subject and what it takes.
func TestTenantServiceAnswersOnlyTheCallersInbox(t *testing.T) {
	d := newDeployment(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, _, err := d.admin.CreateThread(ctx, client.CreateOptions{Tenant: "globex", ThreadID: "secret"})
	require.NoError(t, err)
	res := d.res.WithDefaults()
	keys, err := d.js.KeyValue(ctx, res.Partition(0).KeyBucket)
	require.NoError(t, err)
	key, err := keys.Get(ctx, "globex.secret")
	require.NoError(t, err)
	nc := d.admin.JetStream().Conn()
	// A reply into B's key: not answered, the key unchanged.
	m := nats.NewMsg(res.TenantAPI + ".acme.log.last")
	m.Reply, m.Data = "$KV."+res.Partition(0).KeyBucket+".globex.secret", []byte(`{"thread":"t1"}`)
	require.NoError(t, nc.PublishMsg(m))
	// A reply under the tenant's own inbox: answered.
	inbox := tenancy.InboxPrefix("acme") + ".ok"
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	m = nats.NewMsg(res.TenantAPI + ".acme.log.last")
	m.Reply, m.Data = inbox, []byte(`{"thread":"t1"}`)
	require.NoError(t, nc.PublishMsg(m))
	answer, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Contains(t, string(answer.Data), "seq")
	// The wrong reply was sent first, so its answer (if any) is stored by now.
	after, err := keys.Get(ctx, "globex.secret")
	require.NoError(t, err)
	require.Equal(t, key.Revision(), after.Revision(), "the key of globex/secret was overwritten by the service's answer")
	// An inbox of another tenant is refused too.
	other, err := nc.SubscribeSync(tenancy.InboxPrefix("globex") + ".x")
	require.NoError(t, err)
	m = nats.NewMsg(res.TenantAPI + ".acme.log.last")
	m.Reply, m.Data = tenancy.InboxPrefix("globex")+".x", []byte(`{"thread":"t1"}`)
	require.NoError(t, nc.PublishMsg(m))
	require.NoError(t, nc.Flush())
	_, err = sub.NextMsg(0) // nothing more on A's inbox
	require.Error(t, err)
	// An answer to the right inbox after it proves the wrong one was handled.
	m = nats.NewMsg(res.TenantAPI + ".acme.log.last")
	m.Reply, m.Data = inbox, []byte(`{"thread":"t1"}`)
	require.NoError(t, nc.PublishMsg(m))
	_, err = sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	_, err = other.NextMsg(time.Second)
	require.ErrorIs(t, err, nats.ErrTimeout, "the service answered into another tenant's inbox")
	for _, reply := range []string{"$KV." + res.Partition(0).KeyBucket + ".globex.secret", tenancy.InboxPrefix("globex") + ".x"} {
		require.Eventually(t, func() bool {
			for _, line := range strings.Split(d.serviceLog.String(), "\n") {
				if strings.Contains(line, "tenant service request refused: its reply subject is not the caller's inbox") &&
					strings.Contains(line, "tenant=acme") && strings.Contains(line, "reply="+reply) &&
					strings.Contains(line, tenancy.InboxPrefix("acme")+".>") {
					return true
				}
			}
			return false
		}, 5*time.Second, 10*time.Millisecond, "the refusal of reply %s is logged:\n%s", reply, d.serviceLog.String())
	}
}

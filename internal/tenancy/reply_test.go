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
	"github.com/convlog/convlog/internal/tenancy"
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

// streamState is every stream's subjects (message count each) outside
// tenant's own, and its consumers.
type streamState map[string]struct {
	Subjects  map[string]uint64
	Consumers []string
}

// outsideState reads the state of every stream of the account, leaving
// out the subjects that belong to tenant (a token equal to it after the
// subject prefix or the bucket name).
func outsideState(ctx context.Context, t *testing.T, js jetstream.JetStream, tenant string) streamState {
	t.Helper()
	out := streamState{}
	for name := range js.StreamNames(ctx).Name() {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
		require.NoError(t, err)
		subjects := map[string]uint64{}
		for subj, n := range info.State.Subjects {
			if !ownedBy(subj, tenant) {
				subjects[subj] = n
			}
		}
		var consumers []string
		for c := range s.ConsumerNames(ctx).Name() {
			consumers = append(consumers, c)
		}
		slices.Sort(consumers)
		out[name] = struct {
			Subjects  map[string]uint64
			Consumers []string
		}{subjects, consumers}
	}
	return out
}

// ownedBy reports whether subject is one of tenant's: a thread subject
// "<prefix>.T.…" or a KV key "$KV.<bucket>.T[.…]".
func ownedBy(subject, tenant string) bool {
	tokens := strings.Split(subject, ".")
	if tokens[0] == "$KV" {
		return len(tokens) > 2 && tokens[2] == tenant
	}
	return len(tokens) > 1 && tokens[1] == tenant
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
	_, err = b.Append(ctx, "globex", "secret", userMessage(secret), client.ExpectVersion(v))
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
	_, err = a.Append(ctx, "acme", "t1", userMessage("hello"), client.ExpectVersion(v))
	require.NoError(t, err)
	forged, err := nkeys.CreateUser()
	require.NoError(t, err)
	forgedKey, _ := forged.PublicKey()
	record, _ := json.Marshal(tenancy.User{Tenant: "globex", PublicKey: forgedKey, CreatedAt: time.Now().UTC()})
	subjectOf := func(tenant, thread string) (string, string) {
		p := res.Partition(events.Partition(tenant, thread, max(res.Partitions, 1)))
		return p.Stream, p.SubjectPrefix + "." + tenant + "." + thread
	}
	_, stash := subjectOf("acme", "stash")
	_, err = aConn.nc.Request(stash, record, 5*time.Second)
	require.NoError(t, err)

	before := outsideState(ctx, t, d.js, "acme")
	usersBefore, err := d.reg.List(ctx, "")
	require.NoError(t, err)

	// Every reply subject that names something not A's.
	var replies []string
	for i := range max(res.Partitions, 1) {
		r := res.Partition(i)
		kv := func(bucket string) string { return "KV_" + bucket }
		replies = append(replies,
			r.SubjectPrefix+".globex.secret",
			r.SubjectPrefix+".globex.new",
			r.SubjectPrefix+".globex.secret.delta",
			r.SubjectPrefix+".audit",
			"$KV."+r.KeyBucket+".globex.secret",
			"$KV."+r.KeyBucket+".globex.future",
			"$KV."+r.SnapshotBucket+".globex.secret",
			"$KV."+r.IndexBucket+".globex.secret",
			"$JS.API.STREAM.PURGE."+r.Stream,
			"$JS.API.STREAM.DELETE."+r.Stream,
			"$JS.API.STREAM.UPDATE."+r.Stream,
			"$JS.API.STREAM.MSG.DELETE."+r.Stream,
			"$JS.API.CONSUMER.DELETE."+r.Stream+".convlog-projector",
			"$JS.API.CONSUMER.CREATE."+r.Stream,
			"$JS.API.STREAM.PURGE."+kv(r.KeyBucket),
			"$JS.API.STREAM.DELETE."+kv(r.KeyBucket),
			"$JS.API.STREAM.PURGE."+kv(r.SnapshotBucket),
			"$JS.API.STREAM.PURGE."+kv(r.IndexBucket),
			"$JS.API.STREAM.DELETE."+kv(r.IndexBucket),
			"$JS.API.STREAM.DELETE."+kv(r.SnapshotBucket),
			"$JS.API.CONSUMER.DURABLE.CREATE."+r.Stream+".evil",
			"$JS.API.STREAM.SNAPSHOT."+r.Stream,
		)
	}
	replies = append(replies,
		"$KV."+res.TenantBucket+".globex."+forgedKey,
		"$KV."+res.TenantBucket+".acme."+forgedKey,
		"$KV."+res.UsageBucket+".globex",
		"$KV."+res.ConfigBucket+"."+"partitions",
		"$O."+res.BlobBucket+".C.evil",
		"$JS.API.STREAM.PURGE.KV_"+res.TenantBucket,
		"$JS.API.STREAM.DELETE.KV_"+res.TenantBucket,
		"$JS.API.STREAM.PURGE.KV_"+res.UsageBucket,
		"$JS.API.STREAM.DELETE.KV_"+res.UsageBucket,
		"$JS.API.STREAM.PURGE.KV_"+res.ConfigBucket,
		"$JS.API.STREAM.DELETE.KV_"+res.ConfigBucket,
		"$JS.API.STREAM.PURGE.OBJ_"+res.BlobBucket,
		"$JS.API.STREAM.DELETE.OBJ_"+res.BlobBucket,
		"$JS.API.ACCOUNT.PURGE",
		"$JS.API.META.LEADER.STEPDOWN",
		res.TenantAPI+".globex.key.create",
		res.TenantAPI+".globex.log.get",
		tenancy.InboxPrefix("globex")+".x",
		"_INBOX.x",
		"$SYS.REQ.SERVER.PING",
	)
	require.GreaterOrEqual(t, len(replies), 40)

	// Every request A may make.
	junkStream, junk := subjectOf("acme", "junk")
	t1Stream, t1 := subjectOf("acme", "t1")
	stashStream, _ := subjectOf("acme", "stash")
	t1Part := res.Partition(events.Partition("acme", "t1", max(res.Partitions, 1)))
	service := func(op string, body any) (string, []byte) {
		b, _ := json.Marshal(body)
		return res.TenantAPI + ".acme." + op, b
	}
	type request struct {
		subject string
		data    []byte
	}
	requests := []request{
		{junk, []byte("not an event")},
		{t1 + ".delta", []byte(`{"text":"x"}`)},
		{"$JS.API.DIRECT.GET." + stashStream + "." + stash, nil},
		{"$JS.API.DIRECT.GET." + t1Stream + "." + t1, nil},
		{"$JS.API.DIRECT.GET.KV_" + t1Part.KeyBucket + ".$KV." + t1Part.KeyBucket + ".acme.t1", nil},
		{"$JS.API.DIRECT.GET.KV_" + t1Part.SnapshotBucket + ".$KV." + t1Part.SnapshotBucket + ".acme.t1", nil},
		{"$JS.API.DIRECT.GET.KV_" + res.ConfigBucket + ".$KV." + res.ConfigBucket + ".partitions", nil},
	}
	for _, op := range []struct {
		op   string
		body any
	}{
		{"log.last", map[string]any{"thread": "t1"}},
		{"log.get", map[string]any{"thread": "t1", "from": 1, "batch": 10}},
		{"index.list", map[string]any{"partition": 0}},
	} {
		s, b := service(op.op, op.body)
		requests = append(requests, request{s, b})
	}
	_ = junkStream
	nc := aConn.nc
	for _, reply := range replies {
		for _, r := range requests {
			m := nats.NewMsg(r.subject)
			m.Reply, m.Data = reply, r.data
			require.NoError(t, nc.PublishMsg(m), "%s reply %s", r.subject, reply)
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
// service's full rights never publish to a subject the caller chose.
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
}

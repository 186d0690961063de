package tenancy_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
	"github.com/convlog/convlog/projector"
)

// TestEachReplySubjectAttackChangesNothing makes each of the five
// reply-subject attacks of a tenant (acme) on its own, on a fresh
// deployment of one partition, and checks the harm each one aimed at:
//
//  1. a direct get of a user record acme stored on its own subject,
//     answered into the tenant registry at globex's key: no forged user,
//     and the forged key cannot connect once the server has the
//     registry's accounts;
//  2. the tenant service's log.last answered into globex's thread key, or
//     into the purge of the key bucket: the key unchanged, globex appends
//     and reads its thread;
//  3. a direct get of acme's own thread answered into the purge of the
//     event stream: every message of globex still stored;
//  4. a direct get of an empty message acme stored, answered into the
//     deletion of the projector's consumer: the consumer there, the same
//     one, and draining;
//  5. a publish to acme's thread answered (the acknowledgement) into
//     globex's thread: globex's thread version unchanged.
//
// After each attack, the same request with acme's own inbox is answered
// first, so the hostile answer was published before the checks.
func TestEachReplySubjectAttackChangesNothing(t *testing.T) {
	res := provision.DefaultConfig().WithDefaults()
	p := res.Partition(0)
	acmeThread := p.SubjectPrefix + ".acme.t1"
	stash := p.SubjectPrefix + ".acme.stash"
	// empty holds a message with no body, stored by acme: its direct get
	// answers with an empty body, which every JetStream API verb that takes
	// no request accepts (a deletion refuses any other body).
	empty := p.SubjectPrefix + ".acme.empty"
	logLast := []byte(`{"thread":"t1"}`)
	for _, tc := range []struct {
		name          string
		subject       string
		reply         func(forgedKey string) string
		data          func(forgedKey string) []byte
		publishRecord bool // acme stores a forged user record on stash first
	}{
		{name: "a direct get answered into the tenant registry forges no user",
			subject:       "$JS.API.DIRECT.GET." + p.Stream + "." + stash,
			reply:         func(k string) string { return "$KV." + res.TenantBucket + ".globex." + k },
			publishRecord: true},
		{name: "the tenant service's answer does not overwrite another tenant's thread key",
			subject: res.TenantAPI + ".acme.log.last",
			reply:   func(string) string { return "$KV." + p.KeyBucket + ".globex.secret" },
			data:    func(string) []byte { return logLast }},
		{name: "the tenant service's answer does not purge the key bucket",
			subject: res.TenantAPI + ".acme.log.last",
			reply:   func(string) string { return "$JS.API.STREAM.PURGE.KV_" + p.KeyBucket },
			data:    func(string) []byte { return logLast }},
		{name: "a direct get answered into the stream's purge purges nothing",
			subject: "$JS.API.DIRECT.GET." + p.Stream + "." + acmeThread,
			reply:   func(string) string { return "$JS.API.STREAM.PURGE." + p.Stream }},
		{name: "a direct get answered into a consumer's deletion deletes no consumer",
			subject: "$JS.API.DIRECT.GET." + p.Stream + "." + empty,
			reply: func(string) string {
				return "$JS.API.CONSUMER.DELETE." + p.Stream + "." + projector.DefaultConfig().Durable
			}},
		{name: "a publish acknowledgement is not stored on another tenant's thread",
			subject: acmeThread,
			reply:   func(string) string { return p.SubjectPrefix + ".globex.secret" },
			data:    func(string) []byte { return []byte("x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := newDeployment(t, 1)
			d.addUser(t, "acme")
			d.addUser(t, "globex")
			const secret = "globex-SECRET-5e21"
			b := d.tenantClient(t, d.connect(t, "globex"), "globex")
			_, _, v, err := b.CreateThread(ctx, client.CreateOptions{Tenant: "globex", ThreadID: "secret"})
			require.NoError(t, err)
			_, err = b.Append(ctx, "globex", "secret", userMessage(secret), client.ExpectVersion(v))
			require.NoError(t, err)
			aConn := d.connect(t, "acme")
			a := d.tenantClient(t, aConn, "acme")
			_, _, v, err = a.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "t1"})
			require.NoError(t, err)
			_, err = a.Append(ctx, "acme", "t1", userMessage("hello"), client.ExpectVersion(v))
			require.NoError(t, err)
			forged, err := nkeys.CreateUser()
			require.NoError(t, err)
			forgedKey, _ := forged.PublicKey()
			_, err = aConn.nc.Request(empty, nil, 5*time.Second)
			require.NoError(t, err)
			if tc.publishRecord {
				record, _ := json.Marshal(tenancy.User{Tenant: "globex", PublicKey: forgedKey, CreatedAt: time.Now().UTC()})
				_, err = aConn.nc.Request(stash, record, 5*time.Second)
				require.NoError(t, err)
			}
			durable := projector.DefaultConfig().Durable
			require.NoError(t, provision.WaitConsumerDrained(ctx, d.js, p.Stream, durable))

			before := globexState(ctx, t, d)
			var data []byte
			if tc.data != nil {
				data = tc.data(forgedKey)
			}
			m := nats.NewMsg(tc.subject)
			m.Reply, m.Data = tc.reply(forgedKey), data
			require.NoError(t, aConn.nc.PublishMsg(m))
			_, err = aConn.nc.Request(tc.subject, data, 5*time.Second)
			require.NoError(t, err, "the same request with acme's own inbox")
			// A request the server answered into its JetStream API is queued
			// there: one of convlog's own requests to that queue goes after it.
			_, err = d.js.Conn().Request("$JS.API.CONSUMER.DELETE."+p.Stream+".absent", nil, 5*time.Second)
			require.NoError(t, err)

			after := globexState(ctx, t, d)
			require.Equal(t, before.users, after.users, "the tenant registry")
			require.Equal(t, before.keyRevision, after.keyRevision, "globex/secret's thread key")
			require.Equal(t, before.messages, after.messages, "globex's messages in the stream")
			require.Equal(t, before.version, after.version, "globex/secret's version")
			require.False(t, after.consumer.IsZero(), "the projector's consumer is gone")
			require.Equal(t, before.consumer, after.consumer, "the projector's consumer was made again")
			// The forged key is no user of any account.
			d.apply(t)
			_, err = nats.Connect(d.srv.ClientURL(), nats.Nkey(forgedKey, forged.Sign), nats.MaxReconnects(0))
			require.Error(t, err, "the forged key connects")
			// Globex's thread works: an append, then both messages read back
			// through its key; the projector folds it.
			r, err := b.Append(ctx, "globex", "secret", userMessage("again"), client.ExpectVersion(before.version))
			require.NoError(t, err)
			th, err := d.admin.Get(ctx, "globex", "secret", client.Consistent())
			require.NoError(t, err)
			require.Equal(t, r.Version, th.Version)
			require.Len(t, th.Messages, 2)
			require.Equal(t, secret, th.Messages[0].Content.Text)
			require.NoError(t, provision.WaitConsumerDrained(ctx, d.js, p.Stream, durable))
		})
	}
}

// globexView is what the attacks of TestEachReplySubjectAttackChangesNothing
// aim at.
type globexView struct {
	users       []tenancy.User
	keyRevision uint64
	messages    map[string]uint64
	version     uint64
	// consumer is when the projector's consumer was created, zero if it
	// is gone.
	consumer time.Time
}

func globexState(ctx context.Context, t *testing.T, d *deployment) globexView {
	t.Helper()
	res := d.res.WithDefaults()
	p := res.Partition(0)
	var g globexView
	var err error
	g.users, err = d.reg.List(ctx, "")
	require.NoError(t, err)
	keys, err := d.js.KeyValue(ctx, p.KeyBucket)
	require.NoError(t, err)
	if e, err := keys.Get(ctx, "globex.secret"); err == nil {
		g.keyRevision = e.Revision()
	} else {
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
	}
	s, err := d.js.Stream(ctx, p.Stream)
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(p.SubjectPrefix+".globex.>"))
	require.NoError(t, err)
	g.messages = info.State.Subjects
	if th, err := d.admin.Get(ctx, "globex", "secret", client.Consistent()); err == nil {
		g.version = th.Version
	}
	if c, err := s.Consumer(ctx, projector.DefaultConfig().Durable); err == nil {
		g.consumer = c.CachedInfo().Created
	}
	return g
}

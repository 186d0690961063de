// Package tenancytest is the catalogue of hostile reply subjects shared by
// the tests of tenant isolation, on an embedded server (package tenancy's
// tests) and on real servers (deploy/clustertest): what an attacker
// tenant may send ([Requests]), the reply subjects it names on them
// ([HostileReplies]), and the state those must leave alone
// ([OutsideState]).
//
// NATS never checks the reply subject a client sets, and whoever answers
// (nats-server for a publish acknowledgement or a direct get, agentd's
// tenant service) publishes there with its own rights. With each tenant
// in an account of its own, every answer goes back into the attacker's
// account, where nothing of these subjects is.
package tenancytest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

// HostileReplies returns every reply subject that names something not
// attacker's, for the resources res (defaults filled in): victim's thread
// victimThread (its subject, delta, thread key, snapshot and index
// entry), another of victim's threads, a future thread's key, victim's
// inbox and usage, the tenant registry at victim's and at attacker's key
// forgedKey (a public user NKey), the partition config, the blob bucket,
// every JetStream API verb that changes CONVLOG, each KV bucket and the
// object store, the account and the meta leader, the tenant service of
// victim, the default inbox and the system account's ping.
func HostileReplies(res provision.Config, attacker, victim, victimThread, forgedKey string) []string {
	res = res.WithDefaults()
	var replies []string
	for i := range max(res.Partitions, 1) {
		r := res.Partition(i)
		kv := func(bucket string) string { return "KV_" + bucket }
		replies = append(replies,
			r.SubjectPrefix+"."+victim+"."+victimThread,
			r.SubjectPrefix+"."+victim+".new",
			r.SubjectPrefix+"."+victim+"."+victimThread+".delta",
			r.SubjectPrefix+".audit",
			"$KV."+r.KeyBucket+"."+victim+"."+victimThread,
			"$KV."+r.KeyBucket+"."+victim+".future",
			"$KV."+r.SnapshotBucket+"."+victim+"."+victimThread,
			"$KV."+r.IndexBucket+"."+victim+"."+victimThread,
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
	return append(replies,
		"$KV."+res.TenantBucket+"."+victim+"."+forgedKey,
		"$KV."+res.TenantBucket+"."+attacker+"."+forgedKey,
		"$KV."+res.UsageBucket+"."+victim,
		"$KV."+res.ConfigBucket+"."+provision.PartitionsKey,
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
		res.TenantAPI+"."+victim+".key.create",
		res.TenantAPI+"."+victim+".log.get",
		tenancy.InboxPrefix(victim)+".x",
		"_INBOX.x",
		"$SYS.REQ.SERVER.PING",
	)
}

// Request is one message an attacker may send: its subject and body.
type Request struct {
	Subject string
	Data    []byte
}

// Subject returns the stream and the subject of tenant's thread in res
// (defaults filled in).
func Subject(res provision.Config, tenant, thread string) (stream, subject string) {
	res = res.WithDefaults()
	p := res.Partition(events.Partition(tenant, thread, max(res.Partitions, 1)))
	return p.Stream, p.SubjectPrefix + "." + tenant + "." + thread
}

// Requests returns every kind of request attacker may make in res: a
// publish that is not an event (to thread "junk"), a delta of thread, the
// direct gets of thread stash's, thread empty's and thread's last
// messages, of thread's key and snapshot and of the partition config, and
// the tenant service's log.last, log.get and index.list of thread. The
// caller stores a message with no body on empty: its direct get answers
// with an empty body, which the JetStream API verbs that take no request
// (the deletions) accept where they refuse any other.
func Requests(res provision.Config, attacker, thread, stash, empty string) []Request {
	res = res.WithDefaults()
	_, junk := Subject(res, attacker, "junk")
	tStream, t := Subject(res, attacker, thread)
	sStream, s := Subject(res, attacker, stash)
	eStream, e := Subject(res, attacker, empty)
	tp := res.Partition(events.Partition(attacker, thread, max(res.Partitions, 1)))
	reqs := []Request{
		{junk, []byte("not an event")},
		{t + ".delta", []byte(`{"text":"x"}`)},
		{"$JS.API.DIRECT.GET." + sStream + "." + s, nil},
		{"$JS.API.DIRECT.GET." + eStream + "." + e, nil},
		{"$JS.API.DIRECT.GET." + tStream + "." + t, nil},
		{"$JS.API.DIRECT.GET.KV_" + tp.KeyBucket + ".$KV." + tp.KeyBucket + "." + attacker + "." + thread, nil},
		{"$JS.API.DIRECT.GET.KV_" + tp.SnapshotBucket + ".$KV." + tp.SnapshotBucket + "." + attacker + "." + thread, nil},
		{"$JS.API.DIRECT.GET.KV_" + res.ConfigBucket + ".$KV." + res.ConfigBucket + "." + provision.PartitionsKey, nil},
	}
	for _, op := range []struct {
		op   string
		body any
	}{
		{"log.last", map[string]any{"thread": thread}},
		{"log.get", map[string]any{"thread": thread, "from": 1, "batch": 10}},
		{"index.list", map[string]any{"partition": 0}},
	} {
		b, _ := json.Marshal(op.body)
		reqs = append(reqs, Request{res.TenantAPI + "." + attacker + "." + op.op, b})
	}
	return reqs
}

// StreamState is every stream's subjects (message count each) outside a
// tenant's own ([OutsideState]), and its consumers (sorted).
type StreamState map[string]struct {
	Subjects  map[string]uint64
	Consumers []string
}

// OutsideState reads the state of every stream js sees, leaving out the
// subjects that belong to tenant ([OwnedBy]).
func OutsideState(ctx context.Context, js jetstream.JetStream, tenant string) (StreamState, error) {
	out := StreamState{}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, err
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			return nil, err
		}
		subjects := map[string]uint64{}
		for subj, n := range info.State.Subjects {
			if !OwnedBy(subj, tenant) {
				subjects[subj] = n
			}
		}
		var consumers []string
		cn := s.ConsumerNames(ctx)
		for c := range cn.Name() {
			consumers = append(consumers, c)
		}
		if err := cn.Err(); err != nil {
			return nil, err
		}
		slices.Sort(consumers)
		out[name] = struct {
			Subjects  map[string]uint64
			Consumers []string
		}{subjects, consumers}
	}
	return out, names.Err()
}

// OwnedBy reports whether subject is one of tenant's: a thread subject
// "<prefix>.T.…" or a KV key "$KV.<bucket>.T[.…]".
func OwnedBy(subject, tenant string) bool {
	tokens := strings.Split(subject, ".")
	if tokens[0] == "$KV" {
		return len(tokens) > 2 && tokens[2] == tenant
	}
	return len(tokens) > 1 && tokens[1] == tenant
}

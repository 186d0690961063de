// Package tenancy is convlog's boundary between tenants on NATS: what a
// tenant-scoped NATS user may do ([For]), the registry of such users
// ([Registry]), the tenant service that answers the reads NATS cannot
// scope to a tenant ([Service]), and its caller for package client
// ([Caller], [NewKV]).
//
// # Why a service
//
// NATS permissions match subjects, never request bodies. A JetStream
// request that names what it reads in its body (a batched direct get,
// "$JS.API.DIRECT.GET.<stream>" with {"next_by_subj", "batch"}; stream
// information with a subjects filter; a message get by sequence; a purge)
// cannot be limited to one tenant, and neither can a consumer: its
// configuration may name any deliver subject, and the server delivers
// there as itself, so a user allowed to create consumers could write its
// own messages into another tenant's KV keys (nats-server checks no
// permission on deliver subjects). So a tenant-scoped user gets only
// requests whose subject says what they touch, and everything else
// through the tenant service, which agentd runs with full permissions and
// which reads only "<prefix>.<tenant>.<thread>" subjects and
// "<tenant>."-prefixed KV keys of the tenant its request subject names:
//
//	publish  <prefix>.T.*                                  append events (stream CONVLOG)
//	publish  <prefix>.T.*.delta                            live token deltas
//	publish  $JS.API.DIRECT.GET.<stream>.<prefix>.T.*       last event of a thread
//	publish  $JS.API.DIRECT.GET.KV_<snapshots>.$KV.<snapshots>.T.>  snapshot heads and chunks
//	publish  $JS.API.DIRECT.GET.KV_<index>.$KV.<index>.T.*  index entries
//	publish  $JS.API.DIRECT.GET.KV_<keys>.$KV.<keys>.T.*    thread data keys
//	publish  $JS.API.DIRECT.GET.KV_<usage>.$KV.<usage>.T    the tenant's usage and limits (package quota)
//	publish  $JS.API.DIRECT.GET.KV_<config>.$KV.<config>.partitions  the deployment's partition count
//	publish  <TenantAPI>.T.>                               the tenant service
//	subscribe <prefix>.T.>                                 live events and deltas
//	subscribe _INBOX_T.>                                   replies (connect with nats.CustomInboxPrefix(InboxPrefix(T)))
//
// In a deployment of K partitions (provision.Config.Partitions), the
// lines with a stream, a thread subject prefix or a snapshot, index or key
// bucket are given for each partition's (provision.Config.Partition).
//
// Nothing else: no stream or account information, no consumer, no KV
// write (a KV publish may carry "Nats-Rollup: all", which would purge
// every tenant's keys), no object store (blobs go through the HTTP API),
// no purge. A tenant-scoped client (client.Config.Tenant) appends
// directly to JetStream and reads snapshots with direct gets, as any
// client does, and reads logs, creates thread keys and lists threads
// through the service.
package tenancy

import (
	"fmt"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
)

// Permissions are the allow lists of a tenant-scoped NATS user: the
// subjects (patterns) it may publish to and subscribe to. Everything else
// is denied.
type Permissions struct {
	Publish   []string `json:"publish"`
	Subscribe []string `json:"subscribe"`
}

// InboxPrefix is the inbox prefix a tenant-scoped user connects with
// (nats.CustomInboxPrefix): "_INBOX_<tenant>". The default "_INBOX." is
// shared by every connection, so a user allowed to subscribe to it would
// read other users' replies (thread keys among them).
func InboxPrefix(tenant string) string { return "_INBOX_" + tenant }

// For returns the permissions of tenant's users on the resources res
// (defaults filled in; res.Partitions is the deployment's K, 0 counting as
// 1; the layout is in the package doc). It returns an
// *events.IDError for a bad tenant id. The JetStream API prefix is the
// default "$JS.API" (no domain).
func For(res provision.Config, tenant string) (Permissions, error) {
	return forTenant(res, tenant, true)
}

// ForReadOnly is [For] without the append subject ("<prefix>.T.*"): what
// agentd gives a tenant's users while the tenant is over its storage
// quota (package quota), so that a raw NATS publisher is held too.
func ForReadOnly(res provision.Config, tenant string) (Permissions, error) {
	return forTenant(res, tenant, false)
}

func forTenant(res provision.Config, tenant string, appends bool) (Permissions, error) {
	if err := events.ValidateTenant(tenant); err != nil {
		return Permissions{}, err
	}
	return forToken(res.WithDefaults(), tenant, appends), nil
}

// forToken is the permission layout with t in the tenant's place: a
// tenant id, or "*" for every tenant ([ExportsFor]). res has its defaults.
func forToken(res provision.Config, t string, appends bool) Permissions {
	direct := func(stream, subjects string) string {
		return fmt.Sprintf("$JS.API.DIRECT.GET.%s.%s", stream, subjects)
	}
	kv := func(bucket, rest string) string {
		return direct("KV_"+bucket, "$KV."+bucket+"."+t+rest)
	}
	var pub, sub []string
	for part := range max(res.Partitions, 1) {
		rp := res.Partition(part)
		p := rp.SubjectPrefix
		if appends {
			pub = append(pub, p+"."+t+".*")
		}
		pub = append(pub,
			p+"."+t+".*.delta",
			direct(rp.Stream, p+"."+t+".*"),
			kv(rp.SnapshotBucket, ".>"),
			kv(rp.IndexBucket, ".*"),
			kv(rp.KeyBucket, ".*"),
		)
		sub = append(sub, p+"."+t+".>")
	}
	pub = append(pub,
		kv(res.UsageBucket, ""),
		direct("KV_"+res.ConfigBucket, "$KV."+res.ConfigBucket+"."+provision.PartitionsKey),
		res.TenantAPI+"."+t+".>",
	)
	return Permissions{Publish: pub, Subscribe: append(sub, InboxPrefix(t)+".>")}
}

// isUserKey reports whether k is a public user NKey ("U…").
func isUserKey(k string) bool { return nkeys.IsValidPublicUserKey(k) }

// ServerConf returns p as one entry of a nats-server configuration's
// authorization users list for the NKey user publicKey (nats-server
// configuration syntax; subjects quoted):
//
//	{ nkey: "U...", permissions: { publish: { allow: [...] }, subscribe: { allow: [...] } } }
func (p Permissions) ServerConf(publicKey string) string {
	list := func(subjects []string) string {
		q := make([]string, len(subjects))
		for i, s := range subjects {
			q[i] = fmt.Sprintf("%q", s)
		}
		return strings.Join(q, ", ")
	}
	return fmt.Sprintf("{ nkey: %q, permissions: { publish: { allow: [%s] }, subscribe: { allow: [%s] } } }\n",
		publicKey, list(p.Publish), list(p.Subscribe))
}

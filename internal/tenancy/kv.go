package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/internal/directget"
)

// ErrNotPermitted is returned by what a tenant-scoped user may not do: an
// operation of a [KV] outside its role, a key of another tenant.
var ErrNotPermitted = errors.New("tenancy: not permitted to a tenant-scoped NATS user")

// Role is what a tenant-scoped [KV] does besides Get.
type Role int

const (
	// RoleRead: Get only (the snapshot bucket).
	RoleRead Role = iota
	// RoleIndex: Get, and WatchFiltered of "<tenant>.*" as a one-time
	// listing through the service (the index bucket, for client.List).
	RoleIndex
	// RoleKeys: Get, and Create through the service (the thread key
	// bucket: a thread's first writer creates its key).
	RoleKeys
)

// KV is a jetstream.KeyValue for a tenant-scoped user, which may not read
// a bucket's stream information and so cannot bind nats.go's KV: Get is a
// subject-appended direct get of "$KV.<bucket>.<key>" (permitted for the
// tenant's keys, see [For]); Create and listing go through the service
// (see [Role]); every other method returns [ErrNotPermitted]. Keys must
// start with "<tenant>.". Safe for concurrent use.
type KV struct {
	js        jetstream.JetStream
	caller    *Caller
	bucket    string
	role      Role
	partition int
}

// NewKV returns the tenant-scoped KV of bucket for caller's tenant;
// bucket is of partition (0..K-1; 0 in a deployment of one partition),
// which the service's listing of an index bucket needs.
func NewKV(js jetstream.JetStream, caller *Caller, bucket string, role Role, partition int) *KV {
	return &KV{js: js, caller: caller, bucket: bucket, role: role, partition: partition}
}

// own returns key without its tenant prefix, or ErrNotPermitted.
func (k *KV) own(key string) (string, error) {
	rest, ok := strings.CutPrefix(key, k.caller.tenant+".")
	if !ok || rest == "" {
		return "", fmt.Errorf("%w: key %q of bucket %s is not of tenant %s", ErrNotPermitted, key, k.bucket, k.caller.tenant)
	}
	return rest, nil
}

func (k *KV) denied(op string) error {
	return fmt.Errorf("%w: %s on bucket %s", ErrNotPermitted, op, k.bucket)
}

// Get returns key's value; jetstream.ErrKeyNotFound when it has none or
// was deleted.
func (k *KV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if _, err := k.own(key); err != nil {
		return nil, err
	}
	m, err := directget.Last(ctx, k.js, "KV_"+k.bucket, "$KV."+k.bucket+"."+key)
	if err != nil {
		return nil, fmt.Errorf("tenancy: get %s of bucket %s: %w", key, k.bucket, err)
	}
	if m == nil {
		return nil, jetstream.ErrKeyNotFound
	}
	switch m.Header.Get("KV-Operation") {
	case "DEL", "PURGE":
		return nil, jetstream.ErrKeyNotFound
	}
	return &entry{bucket: k.bucket, key: key, value: m.Data, revision: m.Sequence, created: m.Time}, nil
}

// Create stores value at key if it has none (RoleKeys only: a new thread
// key record, checked by the service).
func (k *KV) Create(ctx context.Context, key string, value []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	thread, err := k.own(key)
	if err != nil {
		return 0, err
	}
	if k.role != RoleKeys {
		return 0, k.denied("create")
	}
	return k.caller.KeyCreate(ctx, thread, value)
}

// WatchFiltered lists the tenant's entries (RoleIndex, keys exactly
// ["<tenant>.*"]): each entry, then a nil entry; no later changes are
// delivered (client.List reads up to the nil). Options are ignored:
// deleted entries are never listed.
func (k *KV) WatchFiltered(ctx context.Context, keys []string, _ ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	if k.role != RoleIndex || len(keys) != 1 || keys[0] != k.caller.tenant+".*" {
		return nil, k.denied(fmt.Sprintf("watch %v", keys))
	}
	var all []IndexEntry
	after := ""
	for {
		page, more, err := k.caller.IndexList(ctx, k.partition, after, 0)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].Thread
	}
	w := &listWatcher{updates: make(chan jetstream.KeyValueEntry, len(all)+1)}
	for _, e := range all {
		w.updates <- &entry{bucket: k.bucket, key: k.caller.tenant + "." + e.Thread, value: e.Value, revision: e.Revision, created: e.Created}
	}
	w.updates <- nil
	return w, nil
}

// Bucket returns the bucket's name.
func (k *KV) Bucket() string { return k.bucket }

// GetRevision returns ErrNotPermitted (a direct get by sequence names its
// subject only in the request body).
func (k *KV) GetRevision(context.Context, string, uint64) (jetstream.KeyValueEntry, error) {
	return nil, k.denied("get revision")
}

// Put returns ErrNotPermitted.
func (k *KV) Put(context.Context, string, []byte) (uint64, error) { return 0, k.denied("put") }

// PutString returns ErrNotPermitted.
func (k *KV) PutString(context.Context, string, string) (uint64, error) { return 0, k.denied("put") }

// Update returns ErrNotPermitted.
func (k *KV) Update(context.Context, string, []byte, uint64) (uint64, error) {
	return 0, k.denied("update")
}

// Delete returns ErrNotPermitted.
func (k *KV) Delete(context.Context, string, ...jetstream.KVDeleteOpt) error {
	return k.denied("delete")
}

// Purge returns ErrNotPermitted.
func (k *KV) Purge(context.Context, string, ...jetstream.KVDeleteOpt) error {
	return k.denied("purge")
}

// Watch is WatchFiltered of one pattern.
func (k *KV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return k.WatchFiltered(ctx, []string{keys}, opts...)
}

// WatchAll returns ErrNotPermitted.
func (k *KV) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return nil, k.denied("watch all")
}

// Keys returns ErrNotPermitted.
func (k *KV) Keys(context.Context, ...jetstream.WatchOpt) ([]string, error) {
	return nil, k.denied("keys")
}

// ListKeys returns ErrNotPermitted.
func (k *KV) ListKeys(context.Context, ...jetstream.WatchOpt) (jetstream.KeyLister, error) {
	return nil, k.denied("list keys")
}

// ListKeysFiltered returns ErrNotPermitted.
func (k *KV) ListKeysFiltered(context.Context, ...string) (jetstream.KeyLister, error) {
	return nil, k.denied("list keys")
}

// History returns ErrNotPermitted.
func (k *KV) History(context.Context, string, ...jetstream.WatchOpt) ([]jetstream.KeyValueEntry, error) {
	return nil, k.denied("history")
}

// PurgeDeletes returns ErrNotPermitted.
func (k *KV) PurgeDeletes(context.Context, ...jetstream.KVPurgeOpt) error {
	return k.denied("purge deletes")
}

// Status returns ErrNotPermitted (it is stream information).
func (k *KV) Status(context.Context) (jetstream.KeyValueStatus, error) {
	return nil, k.denied("status")
}

// entry is a jetstream.KeyValueEntry read by a [KV].
type entry struct {
	bucket, key string
	value       []byte
	revision    uint64
	created     time.Time
}

func (e *entry) Bucket() string                  { return e.bucket }
func (e *entry) Key() string                     { return e.key }
func (e *entry) Value() []byte                   { return e.value }
func (e *entry) Revision() uint64                { return e.revision }
func (e *entry) Created() time.Time              { return e.created }
func (e *entry) Delta() uint64                   { return 0 }
func (e *entry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// listWatcher delivers a listing made up front.
type listWatcher struct {
	updates chan jetstream.KeyValueEntry
	once    sync.Once
}

func (w *listWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }

// Stop closes Updates (entries not read yet are still delivered first).
func (w *listWatcher) Stop() error {
	w.once.Do(func() { close(w.updates) })
	return nil
}

var _ jetstream.KeyValue = (*KV)(nil)

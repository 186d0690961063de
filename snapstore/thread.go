package snapstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// Purged names the keys [PurgeThread] removed.
type Purged struct {
	// SnapshotKeys are the thread's keys in the snapshot bucket: its head
	// and the chunks of every generation, including chunks no head names.
	SnapshotKeys []string
	// IndexKeys is the thread's key in the index bucket.
	IndexKeys []string
}

// PurgeThread removes every key of tenant/thread from the snapshot bucket
// (snapshots, a bucket of js) and the index bucket (index), leaving no
// delete markers (KV purge). Erasure calls it after the thread's events
// are purged from the stream; a projector that folds the erasure marker
// purges the chunks again (idempotent). A key already gone is not an
// error.
//
// Errors: listing or purging a key failed (KV and context errors), naming
// the key; Purged then holds the keys found so far.
func PurgeThread(ctx context.Context, js jetstream.JetStream, snapshots, index jetstream.KeyValue, tenant, thread string) (Purged, error) {
	var p Purged
	var err error
	if p.SnapshotKeys, err = PurgeSnapshot(ctx, js, snapshots, tenant, thread); err != nil {
		return p, err
	}
	ik := IndexKey(tenant, thread)
	if err := index.Purge(ctx, ik); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return p, fmt.Errorf("snapstore: purge index key %s: %w", ik, err)
	}
	p.IndexKeys = []string{ik}
	return p, nil
}

// PurgeSnapshot purges the snapshot (head and chunks) of tenant/thread in
// snapshots (a bucket of js) and returns the keys purged; readers then
// fold the thread from its log until the projector writes a snapshot
// again. Errors name the key.
//
// The keys are listed with one multi-last direct get (jetstreamext
// GetLastMsgsFor), which the server answers from the stream as it is:
// not with a KV key lister, whose ordered consumer counts the keys first
// and then waits for each to be delivered, forever when a projector
// purges one of them in between (it does, folding the erasure marker).
// The direct get carries the chunks' data too; an erasure is rare. A
// thread of more keys than one direct get returns (nats-server: 1,024) is
// purged by its key prefix in one stream purge, reported as
// "<tenant>.<thread>.>".
func PurgeSnapshot(ctx context.Context, js jetstream.JetStream, snapshots jetstream.KeyValue, tenant, thread string) ([]string, error) {
	h := HeadKey(tenant, thread)
	pfx := kvSubjectPrefix(snapshots.Bucket())
	stream := kvStreamName(snapshots.Bucket())
	var keys []string
	it, err := jetstreamext.GetLastMsgsFor(ctx, js, stream, []string{pfx + h, pfx + h + ".>"})
	if err == nil {
		for m, ierr := range it {
			if ierr != nil {
				if !errors.Is(ierr, jetstreamext.ErrNoMessages) {
					err = ierr
				}
				break
			}
			if m.Header.Get(kvOperationHeader) != "" {
				continue // a purge or delete marker: no value
			}
			keys = append(keys, strings.TrimPrefix(m.Subject, pfx))
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("snapstore: list snapshot keys of %s/%s: %w", tenant, thread, err)
		}
		// Too many keys for one direct get (or it failed otherwise):
		// purge the chunks by prefix, then the head below.
		st, serr := js.Stream(ctx, stream)
		if serr == nil {
			serr = st.Purge(ctx, jetstream.WithPurgeSubject(pfx+h+".>"))
		}
		if serr != nil {
			return nil, fmt.Errorf("snapstore: purge snapshot keys %s.> (listing them failed: %v): %w", h, err, serr)
		}
		keys = []string{h, h + ".>"}
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ".>") {
			continue // purged above
		}
		if err := snapshots.Purge(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return keys, fmt.Errorf("snapstore: purge snapshot key %s: %w", k, err)
		}
	}
	return keys, nil
}

// WatchIndex watches the index entries of every thread of tenant in index:
// first each current entry, then a nil entry, then changes (deletes are
// not delivered). Stop the watcher when done. Decode values with
// [UnmarshalSummary] and name their thread with [ThreadOfIndexKey].
func WatchIndex(ctx context.Context, index jetstream.KeyValue, tenant string) (jetstream.KeyWatcher, error) {
	return index.WatchFiltered(ctx, []string{tenant + ".*"}, jetstream.IgnoreDeletes())
}

// ThreadOfIndexKey returns the thread id of an index key of tenant (the
// key [IndexKey] made); "" when key is not one of tenant's.
func ThreadOfIndexKey(tenant, key string) string {
	th, ok := strings.CutPrefix(key, tenant+".")
	if !ok {
		return ""
	}
	return th
}

package snapstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/snapstore"
)

// PurgeThread finishes while another process purges the same keys, as a
// projector that folds the erasure marker does with the thread's old
// chunks during client.Erase. A listing that counts the keys first and
// then waits for each to be delivered (a KV key lister) waited forever
// when a counted key was purged before its delivery: Erase then hung
// until its context ended (seen as a 2-minute erase in the client tests).
func TestPurgeThreadFinishesWhileKeysArePurgedConcurrently(t *testing.T) {
	s, res := natstest.Provisioned(t, provision.Config{})
	kv := res.Snapshots
	ctx := context.Background()
	st, err := s.JS.Stream(ctx, "KV_"+kv.Bucket())
	require.NoError(t, err)
	value := make([]byte, 1024)
	for i := range 150 {
		thread := fmt.Sprintf("t%d", i)
		var chunks []string
		_, err = kv.Put(ctx, snapstore.HeadKey("acme", thread), value)
		require.NoError(t, err)
		for j := range 30 {
			key := fmt.Sprintf("%s.c.1.%d.10", snapstore.HeadKey("acme", thread), j*10)
			_, err := kv.Put(ctx, key, value)
			require.NoError(t, err)
			chunks = append(chunks, key)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			// As the projector's Writer purges old chunks: a stream purge
			// by subject, which leaves no marker; the last written first.
			for j := len(chunks) - 1; j >= 0; j-- {
				_ = st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+kv.Bucket()+"."+chunks[j]))
			}
		})
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		purged, err := snapstore.PurgeThread(pctx, s.JS, kv, res.Index, "acme", thread)
		cancel()
		wg.Wait()
		require.NoError(t, err, "round %d", i)
		require.Contains(t, purged.SnapshotKeys, snapstore.HeadKey("acme", thread))
		_, err = kv.Get(ctx, snapstore.HeadKey("acme", thread))
		require.Error(t, err, "the head is purged")
	}
}

// A thread with more keys than one multi-last direct get returns (1,024)
// is purged by its key prefix: nothing of it is left, and the report
// names the prefix.
func TestPurgeThreadOfMoreKeysThanOneDirectGet(t *testing.T) {
	s, res := natstest.Provisioned(t, provision.Config{})
	kv := res.Snapshots
	ctx := context.Background()
	head := snapstore.HeadKey("acme", "big")
	_, err := kv.Put(ctx, head, []byte("h"))
	require.NoError(t, err)
	for j := range 1100 {
		_, err := kv.Put(ctx, fmt.Sprintf("%s.c.1.%d.1", head, j), []byte("c"))
		require.NoError(t, err)
	}
	other := snapstore.HeadKey("acme", "bigger") // shares the prefix "big" but not "big."
	_, err = kv.Put(ctx, other, []byte("o"))
	require.NoError(t, err)

	purged, err := snapstore.PurgeThread(ctx, s.JS, kv, res.Index, "acme", "big")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{head, head + ".>"}, purged.SnapshotKeys)
	lister, err := kv.ListKeysFiltered(ctx, head, head+".>")
	require.NoError(t, err)
	var left []string
	for k := range lister.Keys() {
		left = append(left, k)
	}
	require.Empty(t, left)
	_, err = kv.Get(ctx, other)
	require.NoError(t, err, "another thread's head is kept")
}

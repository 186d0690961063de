package provision_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// A snapshot bucket created before deltas (no message TTLs) is updated in
// place by Ensure: its stream lets messages carry a TTL, which the
// projector's purge markers of old deltas need, and Ensure stays
// idempotent.
func TestEnsureGivesAnExistingSnapshotBucketMessageTTLs(t *testing.T) {
	srv := natstest.Run(t)
	ctx := context.Background()
	c := provision.DefaultConfig()
	_, err := srv.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: c.SnapshotBucket, History: 1,
		Storage: jetstream.FileStorage, Replicas: 1})
	require.NoError(t, err)
	for range 2 {
		_, err = provision.Ensure(ctx, srv.JS, c)
		require.NoError(t, err)
		st, err := srv.JS.Stream(ctx, "KV_"+c.SnapshotBucket)
		require.NoError(t, err)
		require.True(t, st.CachedInfo().Config.AllowMsgTTL)
		require.Equal(t, provision.SnapshotMarkerTTL, st.CachedInfo().Config.SubjectDeleteMarkerTTL)
	}
}

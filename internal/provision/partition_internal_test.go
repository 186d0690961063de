package provision

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/embedded"
)

// noResponders is a real KV whose first gets find no server answering,
// as a direct get of a bucket just created on a cluster can.
type noResponders struct {
	jetstream.KeyValue
	left atomic.Int32
}

func (k *noResponders) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if k.left.Add(-1) >= 0 {
		return nil, nats.ErrNoResponders
	}
	return k.KeyValue.Get(ctx, key)
}

// The partitions record is read again while no server answers (seen as
// "provision: partitions record in KV convlog_config: nats: no responders
// available for request" from client.New on a 3-node cluster under load),
// and an error is returned once ctx ends.
func TestReadRecordWaitsForResponders(t *testing.T) {
	srv, err := embedded.Start(embedded.Config{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	c := Config{}.WithDefaults()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: c.ConfigBucket})
	require.NoError(t, err)
	_, err = kv.Put(ctx, PartitionsKey, []byte(`{"partitions":3}`))
	require.NoError(t, err)

	flaky := &noResponders{KeyValue: kv}
	flaky.left.Store(3)
	k, ok, err := readRecord(ctx, flaky, c)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, k)

	flaky.left.Store(1 << 30)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, _, err = readRecord(cctx, flaky, c)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// A replicated stream is current only with a leader and every other
// replica online, current and without lag; a single server's stream (no
// cluster information) always is.
func TestReplicasCurrent(t *testing.T) {
	peer := func(name string, current, offline bool, lag uint64) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: name, Current: current, Offline: offline, Lag: lag}
	}
	info := func(leader string, peers ...*jetstream.PeerInfo) *jetstream.StreamInfo {
		return &jetstream.StreamInfo{Config: jetstream.StreamConfig{Name: "S", Replicas: 3}, Cluster: &jetstream.ClusterInfo{Leader: leader, Replicas: peers}}
	}
	require.NoError(t, ReplicasCurrent(info("n1", peer("n2", true, false, 0), peer("n3", true, false, 0))))
	require.NoError(t, ReplicasCurrent(&jetstream.StreamInfo{Config: jetstream.StreamConfig{Name: "S"}}))
	for want, in := range map[string]*jetstream.StreamInfo{
		"no leader":                      info("", peer("n2", true, false, 0), peer("n3", true, false, 0)),
		"lists 1 replicas":               info("n1", peer("n2", true, false, 0)),
		"n3: current false":              info("n1", peer("n2", true, false, 0), peer("n3", false, false, 0)),
		"n3: current true, offline true": info("n1", peer("n2", true, false, 0), peer("n3", true, true, 0)),
		"lag 5":                          info("n1", peer("n2", true, false, 5), peer("n3", true, false, 0)),
	} {
		require.ErrorContains(t, ReplicasCurrent(in), want)
	}
}

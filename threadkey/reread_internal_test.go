package threadkey

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// A key record read again after KeyTTL that has not changed (the same KV
// revision, so the same bytes) keeps the key parsed from it, with its
// ciphers and table, and counts as read now; a changed record (a
// rotation) is parsed again.
func TestRereadOfAnUnchangedRecordKeepsItsKey(t *testing.T) {
	s, r := natstest.Provisioned(t, provision.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := New(ctx, s.JS, r.Keys, 0)
	require.NoError(t, err)

	first, err := k.get(ctx, "acme", "t", true, KeyTTL)
	require.NoError(t, err)
	read := first.fetchedAt()
	again, err := k.get(ctx, "acme", "t", false, 0) // maxAge 0: read the record again
	require.NoError(t, err)
	require.Same(t, first, again, "an unchanged record keeps its parsed key")
	require.True(t, again.fetchedAt().After(read), "the re-read counts as the key's read time (KeyTTL)")

	rot, err := k.BeginRotation(ctx, "acme", "t")
	require.NoError(t, err)
	require.NotNil(t, rot)
	rotated, err := k.get(ctx, "acme", "t", false, 0)
	require.NoError(t, err)
	require.NotSame(t, first, rotated, "a rotated record is parsed again")
	require.Greater(t, rotated.rev, first.rev)
	require.NotEqual(t, first.id, rotated.id, "the rotation's new key seals from now on")
}

// BenchmarkKeyReread is what a key's re-read after KeyTTL costs a writer
// when the record has not changed (every seal of a thread's values once
// per KeyTTL): the KV get, and whatever is derived from the record.
//
//	go test ./threadkey -run '^$' -bench BenchmarkKeyReread -benchmem
func BenchmarkKeyReread(b *testing.B) {
	s, r := natstest.Provisioned(b, provision.Config{})
	ctx := context.Background()
	k, err := New(ctx, s.JS, r.Keys, 0)
	require.NoError(b, err)
	_, err = k.get(ctx, "acme", "t", true, KeyTTL)
	require.NoError(b, err)
	for b.Loop() {
		if _, err := k.get(ctx, "acme", "t", false, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// A record read again at the revision of the cached one but with other
// bytes (the bucket deleted and created again, whose revisions start over)
// is parsed again: the cached key is kept only for the very same record.
func TestRereadOfAnotherRecordAtTheSameRevisionParsesIt(t *testing.T) {
	s, r := natstest.Provisioned(t, provision.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := New(ctx, s.JS, r.Keys, 0)
	require.NoError(t, err)
	first, err := k.get(ctx, "acme", "t", true, KeyTTL)
	require.NoError(t, err)

	st, err := r.Keys.Status(ctx)
	require.NoError(t, err)
	cfg := st.(*jetstream.KeyValueBucketStatus).Config()
	require.NoError(t, s.JS.DeleteKeyValue(ctx, cfg.Bucket))
	kv, err := s.JS.CreateKeyValue(ctx, cfg)
	require.NoError(t, err)
	var rec [recordLen]byte
	rec[0] = recordVersion
	rec[1], rec[len(rec)-1] = 1, 2
	rev, err := kv.Create(ctx, Key("acme", "t"), rec[:])
	require.NoError(t, err)
	require.Equal(t, first.rev, rev, "the new bucket's record has the old one's revision")

	again, err := k.get(ctx, "acme", "t", false, 0)
	require.NoError(t, err)
	require.NotSame(t, first, again)
	require.Equal(t, rec[1:1+idLen], again.id[:], "the record read is the new one")
}

package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/threadkey"
)

// Events are stored with their payloads sealed by the thread's data key:
// the stream holds no clear text of them, every read path gives the clear
// event, and a client configured with ClearPayloads stores them in the
// clear (readable by either).
func TestEventsAreStoredSealedAndReadClear(t *testing.T) {
	e := newAppendEnv(t, provision.Config{})
	ctx := context.Background()
	thread, v := e.createThread(t, client.CreateOptions{Tenant: "acme"})
	res, err := e.c.Append(ctx, "acme", thread, []events.Event{userEvent("sealed text 5b1c")}, client.ExpectVersion(v))
	require.NoError(t, err)

	for _, m := range e.stored(t, "acme", thread) {
		require.NotContains(t, string(m.Data), "sealed text 5b1c")
		require.Contains(t, string(m.Data), "payload_sealed", "seq %d", m.Seq)
		_, err := events.Unmarshal(m.Data)
		require.ErrorIs(t, err, events.ErrSealed, "without the key the payload does not decode")
	}
	th, err := e.c.Get(ctx, "acme", thread, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, "sealed text 5b1c", th.Messages[len(th.Messages)-1].Content.String())
	var got []string
	for ev, err := range e.c.Events(ctx, "acme", thread, 0, 0) {
		require.NoError(t, err)
		if u, ok := ev.Payload.(events.UserMessage); ok {
			got = append(got, u.Content.String())
		}
	}
	require.Equal(t, []string{"sealed text 5b1c"}, got)

	// A retry of the same append is recognised as a duplicate (the stored
	// event is opened to compare it).
	again, err := e.c.Append(ctx, "acme", thread, []events.Event{res.Events[0].Event}, client.ExpectVersion(v))
	require.NoError(t, err)
	require.True(t, again.Duplicate)

	clearClient := newEnvOn(t, e.nc, provision.Config{}, func(c *client.Config) { c.ClearPayloads = true }).c
	_, err = clearClient.Append(ctx, "acme", thread, []events.Event{userEvent("clear text 9d2e")}, client.ExpectVersion(res.Version))
	require.NoError(t, err)
	msgs := e.stored(t, "acme", thread)
	require.Contains(t, string(msgs[len(msgs)-1].Data), "clear text 9d2e")
	th, err = e.c.Get(ctx, "acme", thread, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, "clear text 9d2e", th.Messages[len(th.Messages)-1].Content.String())
}

// Blobs are stored as sealed segments: every size around the segment
// boundary reads back equal with its plain size, the object store holds no
// clear byte of it, and a segment cut off, dropped or swapped fails the
// read instead of returning other bytes.
func TestBlobsAreStoredSealedInSegments(t *testing.T) {
	e := newAppendEnv(t, provision.Config{})
	ctx := context.Background()
	thread, _ := e.createThread(t, client.CreateOptions{Tenant: "acme"})
	const seg = 64 << 10
	for _, n := range []int{0, 1, seg - 1, seg, seg + 1, 3 * seg, 3*seg + 17} {
		data := make([]byte, n)
		_, _ = rand.Read(data)
		info, err := e.c.PutBlob(ctx, "acme", thread, "b", "application/octet-stream", bytes.NewReader(data), 0)
		require.NoError(t, err, "size %d", n)
		require.EqualValues(t, n, info.Size, "size %d", n)
		got, body, err := e.c.GetBlob(ctx, "acme", thread, "b")
		require.NoError(t, err)
		require.EqualValues(t, n, got.Size)
		b, err := io.ReadAll(body)
		require.NoError(t, err, "size %d", n)
		require.NoError(t, body.Close())
		require.True(t, bytes.Equal(data, b), "size %d reads back equal", n)
	}

	secret := bytes.Repeat([]byte("blob secret 7e1f "), 10_000) // 170 KB: three segments
	_, err := e.c.PutBlob(ctx, "acme", thread, "s", "text/plain", bytes.NewReader(secret), 0)
	require.NoError(t, err)
	os, err := e.js.ObjectStore(ctx, "convlog_blobs")
	require.NoError(t, err)
	name := ""
	infos, err := os.List(ctx)
	require.NoError(t, err)
	for _, in := range infos {
		if bytes.HasSuffix([]byte(in.Name), []byte("/s")) {
			name = in.Name
		}
	}
	require.NotEmpty(t, name)
	stored, err := os.GetBytes(ctx, name)
	require.NoError(t, err)
	require.NotContains(t, string(stored), "blob secret")
	require.True(t, threadkey.Sealed(stored))

	// Rewrite the object with its segments altered, keeping the headers:
	// each must fail the read.
	in, err := os.GetInfo(ctx, name)
	require.NoError(t, err)
	full := 64<<10 + 38
	alter := map[string][]byte{
		"last segment cut off":   stored[:2*full],
		"middle segment dropped": append(append([]byte{}, stored[:full]...), stored[2*full:]...),
		"segments swapped":       append(append(append([]byte{}, stored[full:2*full]...), stored[:full]...), stored[2*full:]...),
	}
	for what, b := range alter {
		_, err := os.PutBytes(ctx, name, b)
		require.NoError(t, err)
		err = os.UpdateMeta(ctx, name, jetstream.ObjectMeta{Name: name, Headers: in.Headers})
		require.NoError(t, err)
		_, body, err := e.c.GetBlob(ctx, "acme", thread, "s")
		require.NoError(t, err, what)
		_, err = io.ReadAll(body)
		require.ErrorIs(t, err, threadkey.ErrCorrupt, what)
		body.Close()
	}
}

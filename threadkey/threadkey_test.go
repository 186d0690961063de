package threadkey_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/threadkey"
)

type env struct {
	*natstest.Server
	kv  jetstream.KeyValue
	dir string
}

func newKeys(t testing.TB) (*threadkey.Keys, env) {
	t.Helper()
	dir := t.TempDir()
	s := natstest.RunConfig(t, embedded.Config{StoreDir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := provision.Ensure(ctx, s.JS, provision.Config{})
	require.NoError(t, err)
	k, err := threadkey.New(ctx, s.JS, r.Keys, 0)
	require.NoError(t, err)
	return k, env{Server: s, kv: r.Keys, dir: dir}
}

func event(t testing.TB, thread, text string) []byte {
	t.Helper()
	b, err := events.Marshal(events.New("acme", thread, "test", events.UserMessage{Content: events.Text(text)}))
	require.NoError(t, err)
	return b
}

func TestSealedEventsOpenToTheSameBytesAndHideTheirPayload(t *testing.T) {
	k, e := newKeys(t)
	ctx := context.Background()
	clear := event(t, "t1", "the secret text")
	sealed, err := k.SealEvent(ctx, clear)
	require.NoError(t, err)
	require.NotContains(t, string(sealed), "the secret text")
	// The envelope stays readable without the key; the payload does not.
	ev, err := events.Unmarshal(sealed)
	require.ErrorIs(t, err, events.ErrSealed)
	require.Equal(t, "t1", ev.Thread)
	require.Equal(t, events.TypeUserMessage, ev.Type)

	opened, err := k.OpenEvent(ctx, sealed)
	require.NoError(t, err)
	require.Equal(t, clear, opened, "opening gives back the exact clear encoding")
	again, err := k.SealEvent(ctx, sealed)
	require.NoError(t, err)
	require.Equal(t, sealed, again, "a sealed event is not sealed twice")
	same, err := k.OpenEvent(ctx, clear)
	require.NoError(t, err)
	require.Equal(t, clear, same, "a clear event opens to itself")

	// A second Keys (another process) reads the same key from KV.
	k2, err := threadkey.New(ctx, e.JS, e.kv, -1)
	require.NoError(t, err)
	opened2, err := k2.OpenEvent(ctx, sealed)
	require.NoError(t, err)
	require.Equal(t, clear, opened2)
}

func TestErasureMarkersAreNeverSealed(t *testing.T) {
	k, _ := newKeys(t)
	b, err := events.Marshal(events.New("acme", "t1", "test", events.Erased{Reason: "gdpr"}))
	require.NoError(t, err)
	out, err := k.SealEvent(context.Background(), b)
	require.NoError(t, err)
	require.Equal(t, b, out)
}

func TestAlteredOrMovedCiphertextsDoNotOpen(t *testing.T) {
	k, _ := newKeys(t)
	ctx := context.Background()
	sealed, err := k.SealEvent(ctx, event(t, "t1", "hello"))
	require.NoError(t, err)
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-3] ^= 1
	_, err = k.OpenEvent(ctx, flipped)
	require.ErrorIs(t, err, threadkey.ErrCorrupt)

	v, err := k.SealValue(ctx, "acme", "t1", "acme.t1", []byte("head bytes"))
	require.NoError(t, err)
	require.True(t, threadkey.Sealed(v))
	_, err = k.OpenValue(ctx, "acme", "t1", "acme.t1.c.1.0.10", v)
	require.ErrorIs(t, err, threadkey.ErrCorrupt, "a value moved to another key does not open")
	plain, err := k.OpenValue(ctx, "acme", "t1", "acme.t1", v)
	require.NoError(t, err)
	require.Equal(t, "head bytes", string(plain))
	// Another thread's key does not open it.
	_, err = k.SealValue(ctx, "acme", "t2", "acme.t1", []byte("x"))
	require.NoError(t, err)
	_, err = k.OpenValue(ctx, "acme", "t2", "acme.t1", v)
	require.ErrorIs(t, err, threadkey.ErrOtherKey)
}

// OpenStoredInPlace gives what OpenStored gives, over the event's own
// bytes when it opens, and leaves the bytes as stored when it does not
// (altered, erased) or there is nothing to open (clear).
func TestAnEventOpensInPlaceLikeACopy(t *testing.T) {
	k, _ := newKeys(t)
	ctx := context.Background()
	for _, text := range []string{"hello", strings.Repeat("long text ", 40), strings.Repeat("x", 70000)} {
		clear := event(t, "t1", text)
		sealed, err := k.SealEvent(ctx, clear)
		require.NoError(t, err)
		want, err := k.OpenStored(ctx, bytes.Clone(sealed))
		require.NoError(t, err)
		require.Equal(t, clear, want)
		buf := bytes.Clone(sealed)
		got, err := k.OpenStoredInPlace(ctx, buf)
		require.NoError(t, err)
		require.Equal(t, clear, got)
		require.Same(t, &buf[0], &got[0], "opened in the event's own bytes")
		require.Equal(t, len(got), cap(got), "no room past the event for an append to write over")

		flipped := bytes.Clone(sealed)
		flipped[len(flipped)-3] ^= 1
		kept := bytes.Clone(flipped)
		got, err = k.OpenStoredInPlace(ctx, flipped)
		require.NoError(t, err)
		require.Equal(t, kept, got, "an altered event is returned as stored")
		require.Equal(t, kept, flipped, "and its bytes are unchanged")
	}
	clear := event(t, "t2", "clear")
	got, err := k.OpenStoredInPlace(ctx, bytes.Clone(clear))
	require.NoError(t, err)
	require.Equal(t, clear, got)

	sealed, err := k.SealEvent(ctx, event(t, "t3", "erased"))
	require.NoError(t, err)
	_, err = k.Destroy(ctx, "acme", "t3")
	require.NoError(t, err)
	buf := bytes.Clone(sealed)
	got, err = k.OpenStoredInPlace(ctx, buf)
	require.NoError(t, err)
	require.Equal(t, sealed, got, "an erased event is returned as stored")
	require.Equal(t, sealed, buf)
}

// OpenValueInPlace opens what OpenValue opens, into the value's own
// bytes, and refuses what it refuses.
func TestAValueOpensInPlaceLikeACopy(t *testing.T) {
	k, _ := newKeys(t)
	ctx := context.Background()
	v, err := k.SealValue(ctx, "acme", "t1", "acme.t1.c.1.0.10", []byte("chunk bytes"))
	require.NoError(t, err)
	kept := bytes.Clone(v)
	copied, err := k.OpenValue(ctx, "acme", "t1", "acme.t1.c.1.0.10", v)
	require.NoError(t, err)
	require.Equal(t, kept, v, "OpenValue leaves the value as it was")

	moved := bytes.Clone(v)
	_, err = k.OpenValueInPlace(ctx, "acme", "t1", "acme.t1", moved)
	require.ErrorIs(t, err, threadkey.ErrCorrupt, "a value moved to another key does not open")
	flipped := bytes.Clone(v)
	flipped[len(flipped)-1] ^= 1
	_, err = k.OpenValueInPlace(ctx, "acme", "t1", "acme.t1.c.1.0.10", flipped)
	require.ErrorIs(t, err, threadkey.ErrCorrupt)

	plain, err := k.OpenValueInPlace(ctx, "acme", "t1", "acme.t1.c.1.0.10", v)
	require.NoError(t, err)
	require.Equal(t, copied, plain)
	require.Same(t, &v[len(v)-len(plain)-16], &plain[0], "the plaintext is in the value's bytes")

	clear := []byte("written in the clear")
	same, err := k.OpenValueInPlace(ctx, "acme", "t1", "acme.t1", clear)
	require.NoError(t, err)
	require.Equal(t, "written in the clear", string(same))
}

func TestDestroyMakesEverythingUnreadableAndIsFinal(t *testing.T) {
	k, _ := newKeys(t)
	ctx := context.Background()
	sealed, err := k.SealEvent(ctx, event(t, "t1", "hello"))
	require.NoError(t, err)
	v, err := k.SealValue(ctx, "acme", "t1", "acme.t1", []byte("head"))
	require.NoError(t, err)
	other, err := k.SealEvent(ctx, event(t, "t2", "other thread"))
	require.NoError(t, err)

	destroyed, err := k.Destroy(ctx, "acme", "t1")
	require.NoError(t, err)
	require.True(t, destroyed)
	_, err = k.OpenEvent(ctx, sealed)
	require.ErrorIs(t, err, threadkey.ErrNoKey)
	kept, err := k.OpenStored(ctx, sealed)
	require.NoError(t, err, "a reader of stored events keeps an event whose key is gone")
	require.Equal(t, sealed, kept)
	_, err = events.Unmarshal(kept)
	require.ErrorIs(t, err, events.ErrSealed)
	_, err = k.OpenValue(ctx, "acme", "t1", "acme.t1", v)
	require.ErrorIs(t, err, threadkey.ErrNoKey)
	// No new key is made for an erased thread.
	_, err = k.SealEvent(ctx, event(t, "t1", "after"))
	require.ErrorIs(t, err, threadkey.ErrDestroyed)
	_, err = k.SealValue(ctx, "acme", "t1", "acme.t1", []byte("head"))
	require.ErrorIs(t, err, threadkey.ErrDestroyed)
	again, err := k.Destroy(ctx, "acme", "t1")
	require.NoError(t, err)
	require.False(t, again, "destroying twice destroys nothing the second time")
	// Other threads are untouched.
	_, err = k.OpenEvent(ctx, other)
	require.NoError(t, err)
}

func TestConcurrentFirstWritersShareOneKey(t *testing.T) {
	k, s := newKeys(t)
	ctx := context.Background()
	var sealed [8][]byte
	var wg sync.WaitGroup
	for i := range sealed {
		wg.Go(func() {
			ki, err := threadkey.New(ctx, s.JS, s.kv, -1) // no shared cache: a race in KV
			if err != nil {
				t.Error(err)
				return
			}
			sealed[i], err = ki.SealEvent(ctx, event(t, "race", "text"))
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, b := range sealed {
		_, err := k.OpenEvent(ctx, b)
		require.NoError(t, err, "every writer sealed with the one key that was stored")
	}
}

// TestADestroyedKeyLeavesNoByteOnDisk checks the point of the package:
// after Destroy, the key's bytes are in no file of the server's store
// directory (JetStream's secure delete overwrote them), also after a
// restart of the server.
func TestADestroyedKeyLeavesNoByteOnDisk(t *testing.T) {
	k, s := newKeys(t)
	ctx := context.Background()
	_, err := k.SealValue(ctx, "acme", "gone", "acme.gone", []byte("x"))
	require.NoError(t, err)
	rec, err := s.kv.Get(ctx, threadkey.Key("acme", "gone"))
	require.NoError(t, err)
	key := bytes.Clone(rec.Value()[9:]) // the 32 key bytes of the record
	require.Eventually(t, func() bool { return len(natstest.FilesContaining(t, s.dir, key)) > 0 }, 5*time.Second, 50*time.Millisecond,
		"the key is on disk before (else the check below proves nothing)")
	_, err = k.Destroy(ctx, "acme", "gone")
	require.NoError(t, err)
	require.False(t, len(natstest.FilesContaining(t, s.dir, key)) > 0, "no byte sequence of the destroyed key remains")
	s.Shutdown()
	require.False(t, len(natstest.FilesContaining(t, s.dir, key)) > 0, "nor after the server stopped")
}

// A rotation keeps every event readable but the redacted one, which reads
// as its replacement, and leaves the retired key in no file; a second
// rotation keeps what the first kept.
func TestRotationRedactsOneEventAndDestroysTheOldKey(t *testing.T) {
	k, s := newKeys(t)
	ctx := context.Background()
	var stored [][]byte
	for _, text := range []string{"one", "two secret", "three"} {
		b, err := k.SealEvent(ctx, event(t, "rot", text))
		require.NoError(t, err)
		stored = append(stored, b)
	}
	rec, err := s.kv.Get(ctx, threadkey.Key("acme", "rot"))
	require.NoError(t, err)
	oldKey := bytes.Clone(rec.Value()[9:41])

	rot, err := k.BeginRotation(ctx, "acme", "rot")
	require.NoError(t, err)
	// Written during the rotation: sealed with the new key.
	b, err := k.SealEvent(ctx, event(t, "rot", "four"))
	require.NoError(t, err)
	stored = append(stored, b)
	for _, d := range stored {
		_, err := k.OpenEvent(ctx, d)
		require.NoError(t, err, "everything opens while the rotation runs")
	}
	pm, err := events.LocatePayload(stored[1])
	require.NoError(t, err)
	redacted, _, err := events.RedactPayload(events.UserMessage{Content: events.Text("two secret")}, nil)
	require.NoError(t, err)
	rep, err := events.Marshal(events.Event{ID: pm.Envelope.ID, Type: events.TypeUserMessage, Payload: redacted})
	require.NoError(t, err)
	repm, err := events.LocatePayload(rep)
	require.NoError(t, err)
	require.NoError(t, rot.Finish(ctx, stored, map[string][]byte{pm.Envelope.ID: repm.Value}))

	k2, err := threadkey.New(ctx, s.JS, s.kv, -1) // another process
	require.NoError(t, err)
	texts := func(k *threadkey.Keys) []string {
		var out []string
		for _, d := range stored {
			o, err := k.OpenEvent(ctx, d)
			require.NoError(t, err)
			ev, err := events.Unmarshal(o)
			require.NoError(t, err)
			out = append(out, ev.Payload.(events.UserMessage).Content.String())
		}
		return out
	}
	want := []string{"one", events.RedactedText, "three", "four"}
	require.Equal(t, want, texts(k2))
	require.Equal(t, want, texts(k), "the rotating process dropped its cached key")
	require.Empty(t, natstest.FilesContaining(t, s.dir, oldKey), "the retired key is in no file")

	rot, err = k.BeginRotation(ctx, "acme", "rot")
	require.NoError(t, err)
	require.NoError(t, rot.Finish(ctx, stored, nil))
	require.Equal(t, want, texts(k), "a second rotation keeps the table")
}

// A stored event whose sealed payload is cut short (a foreign producer's
// bytes) opens neither before nor after a rotation; the rotation keeps
// the other events and does not fail on it.
func TestARotationPassesOverAMalformedSealedPayload(t *testing.T) {
	k, _ := newKeys(t)
	ctx := context.Background()
	good, err := k.SealEvent(ctx, event(t, "cut", "kept"))
	require.NoError(t, err)
	pm, err := events.LocatePayload(good)
	require.NoError(t, err)
	cut := events.ReplacePayload(good, pm, pm.Value[:3], true)
	_, err = k.OpenEvent(ctx, cut)
	require.ErrorIs(t, err, threadkey.ErrCorrupt)

	rot, err := k.BeginRotation(ctx, "acme", "cut")
	require.NoError(t, err)
	require.NoError(t, rot.Finish(ctx, [][]byte{cut, good}, nil))
	k.Forget("acme", "cut")
	opened, err := k.OpenEvent(ctx, good)
	require.NoError(t, err)
	ev, err := events.Unmarshal(opened)
	require.NoError(t, err)
	require.Equal(t, "kept", ev.Payload.(events.UserMessage).Content.String())
}

package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/natstest"
)

// world is a provisioned server, a client and a running checkpointer.
type world struct {
	t       testing.TB
	ns      *natstest.Server
	c       *client.Client
	key     ed25519.PrivateKey
	covered atomic.Uint64
	stop    func()
}

func newWorld(t testing.TB, storeDir string) *world {
	t.Helper()
	ns := natstest.RunConfig(t, embedded.Config{StoreDir: storeDir})
	c, err := client.New(context.Background(), ns.NC, client.Config{Provision: true})
	require.NoError(t, err)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	w := &world{t: t, ns: ns, c: c, key: key}
	w.start()
	return w
}

func (w *world) start() {
	// CacheThreads 2: most heads come from the heads bucket, not memory.
	cp, err := audit.NewCheckpointer(w.ns.JS, audit.Config{Key: w.key, Interval: 20 * time.Millisecond, CacheThreads: 2,
		OnCheckpoint: func(c audit.Checkpoint, _ uint64) { w.covered.Store(c.Seq) }})
	require.NoError(w.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cp.Run(ctx) }()
	w.stop = func() { cancel(); <-done }
	w.t.Cleanup(w.stop)
	select {
	case <-cp.Ready():
	case <-time.After(10 * time.Second):
		w.t.Fatal("checkpointer not ready")
	}
}

// thread creates tenant/thread with n user messages and returns the
// sequence of each stored event.
func (w *world) thread(tenant, thread string, n int, text string) []uint64 {
	w.t.Helper()
	ctx := context.Background()
	_, _, v, err := w.c.CreateThread(ctx, client.CreateOptions{Tenant: tenant, ThreadID: thread, ThreadCreated: events.ThreadCreated{Title: thread}})
	require.NoError(w.t, err)
	seqs := []uint64{v}
	for i := range n {
		res, err := w.c.Append(ctx, tenant, thread, []events.Event{{Payload: events.UserMessage{Content: events.Text(fmt.Sprintf("%s %d", text, i))}}}, client.AnyVersion())
		require.NoError(w.t, err)
		seqs = append(seqs, res.Version)
	}
	return seqs
}

// waitCovered waits until a checkpoint covers seq.
func (w *world) waitCovered(seq uint64) {
	w.t.Helper()
	require.Eventually(w.t, func() bool { return w.covered.Load() >= seq }, 10*time.Second, 5*time.Millisecond, "a checkpoint covering %d", seq)
}

// lastThreadSeq is the sequence of the last thread message stored.
func (w *world) lastThreadSeq() uint64 {
	w.t.Helper()
	st, err := w.ns.JS.Stream(context.Background(), "CONVLOG")
	require.NoError(w.t, err)
	m, err := st.GetLastMsgForSubject(context.Background(), "conv.*.*")
	require.NoError(w.t, err)
	return m.Sequence
}

func (w *world) verify(scope audit.Scope) *audit.Report {
	w.t.Helper()
	rep, err := audit.Verify(context.Background(), w.ns.JS, scope, audit.VerifyOptions{Trusted: []ed25519.PublicKey{w.key.Public().(ed25519.PublicKey)}})
	require.NoError(w.t, err)
	return rep
}

func TestAnUntouchedStoreVerifiesClean(t *testing.T) {
	w := newWorld(t, "")
	a := w.thread("acme", "t1", 30, "hello")
	b := w.thread("acme", "t2", 5, "world")
	c := w.thread("globex", "t1", 7, "other tenant")
	w.waitCovered(w.lastThreadSeq())
	for _, tc := range []struct {
		name   string
		scope  audit.Scope
		events int
	}{
		{"the whole stream", audit.Scope{}, len(a) + len(b) + len(c)},
		{"one tenant", audit.Scope{Tenant: "acme"}, len(a) + len(b)},
		{"one thread", audit.Scope{Tenant: "acme", Thread: "t1"}, len(a)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := w.verify(tc.scope)
			require.True(t, rep.OK, "%+v", rep.Problems)
			require.EqualValues(t, tc.events, rep.Verified)
			require.Zero(t, rep.Unsigned)
			require.NotNil(t, rep.LastCheckpoint)
		})
	}
	// A restarted checkpointer goes on from the last checkpoint: the chain
	// continues and the store still verifies.
	w.stop()
	w.start()
	d := w.thread("acme", "t3", 3, "after restart")
	w.waitCovered(d[len(d)-1])
	rep := w.verify(audit.Scope{})
	require.True(t, rep.OK, "%+v", rep.Problems)
	require.EqualValues(t, len(a)+len(b)+len(c)+len(d), rep.Verified)

	// A heads bucket lost (or a log checkpointed before it existed) is
	// rebuilt from the checkpoints at start, and the chains go on.
	w.stop()
	hs, err := w.ns.JS.Stream(context.Background(), "KV_"+audit.DefaultHeadsBucket)
	require.NoError(t, err)
	require.NoError(t, hs.Purge(context.Background()))
	w.start()
	for i := range 2 { // t1 goes on from its old head
		_, err := w.c.Append(context.Background(), "acme", "t1", []events.Event{{Payload: events.UserMessage{Content: events.Text(fmt.Sprintf("after the heads were lost %d", i))}}}, client.AnyVersion())
		require.NoError(t, err)
	}
	w.waitCovered(w.lastThreadSeq())
	rep = w.verify(audit.Scope{})
	require.True(t, rep.OK, "%+v", rep.Problems)
	require.EqualValues(t, len(a)+len(b)+len(c)+len(d)+2, rep.Verified)

	// A key that is not trusted verifies nothing.
	_, other, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	rep, err = audit.Verify(context.Background(), w.ns.JS, audit.Scope{}, audit.VerifyOptions{Trusted: []ed25519.PublicKey{other.Public().(ed25519.PublicKey)}})
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.Equal(t, audit.KindSignature, rep.Problems[0].Kind)
}

func TestVerifyNamesTheSequenceOfTampering(t *testing.T) {
	ctx := context.Background()
	t.Run("a thread purged and written again with altered events under the same ids", func(t *testing.T) {
		w := newWorld(t, "")
		w.thread("acme", "before", 3, "x")
		seqs := w.thread("acme", "victim", 5, "the original text")
		w.thread("acme", "after", 3, "y")
		w.waitCovered(w.lastThreadSeq())
		require.True(t, w.verify(audit.Scope{}).OK)

		st, err := w.ns.JS.Stream(ctx, "CONVLOG")
		require.NoError(t, err)
		var originals []*jetstream.RawStreamMsg
		for _, s := range seqs {
			m, err := st.GetMsg(ctx, s)
			require.NoError(t, err)
			originals = append(originals, m)
		}
		require.NoError(t, st.Purge(ctx, jetstream.WithPurgeSubject("conv.acme.victim")))
		// The same event ids (in the body); the header's Nats-Msg-Id and
		// publish preconditions are left out, as the server would drop
		// the events as duplicates within its window.
		for _, m := range originals {
			data := bytes.ReplaceAll(m.Data, []byte("original"), []byte("rewritten"))
			h := nats.Header{}
			for k, v := range m.Header {
				if !strings.HasPrefix(k, "Nats-") {
					h[k] = v
				}
			}
			_, err := w.ns.JS.PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Header: h, Data: data})
			require.NoError(t, err)
		}
		w.waitCovered(w.lastThreadSeq())
		rep := w.verify(audit.Scope{})
		require.False(t, rep.OK)
		require.Equal(t, seqs[0], rep.FirstBadSeq, "%+v", rep.Problems)
		require.Equal(t, audit.KindMissing, rep.Problems[0].Kind)
		require.Equal(t, "conv.acme.victim", rep.Problems[0].Subject)
		require.Equal(t, len(seqs), rep.ProblemCount)
		// The thread's own scope says the same; another thread is clean.
		rep = w.verify(audit.Scope{Tenant: "acme", Thread: "victim"})
		require.Equal(t, seqs[0], rep.FirstBadSeq)
		require.True(t, w.verify(audit.Scope{Tenant: "acme", Thread: "after"}).OK)
	})

	t.Run("a message deleted behind convlog's back", func(t *testing.T) {
		w := newWorld(t, "")
		seqs := w.thread("acme", "t", 6, "x")
		w.waitCovered(w.lastThreadSeq())
		st, err := w.ns.JS.Stream(ctx, "CONVLOG")
		require.NoError(t, err)
		// The stream denies deletes; a purge of the subject below a
		// sequence removes its first messages.
		require.NoError(t, st.Purge(ctx, jetstream.WithPurgeSubject("conv.acme.t"), jetstream.WithPurgeSequence(seqs[2])))
		rep := w.verify(audit.Scope{Tenant: "acme", Thread: "t"})
		require.False(t, rep.OK)
		require.Equal(t, seqs[0], rep.FirstBadSeq)
		require.Equal(t, 2, rep.ProblemCount, "%+v", rep.Problems)
		require.Equal(t, audit.KindMissing, rep.Problems[1].Kind)
		require.Equal(t, seqs[1], rep.Problems[1].Seq)
	})

	t.Run("one byte flipped in a stopped server's block file", func(t *testing.T) {
		dir := t.TempDir()
		w := newWorld(t, dir)
		w.thread("acme", "a", 4, "plain")
		seqs := w.thread("acme", "b", 4, "UNIQUE-MARKER-7f3a")
		w.thread("acme", "c", 4, "plain")
		w.waitCovered(w.lastThreadSeq())
		st, err := w.ns.JS.Stream(ctx, "CONVLOG")
		require.NoError(t, err)
		third, err := st.GetMsg(ctx, seqs[2])
		require.NoError(t, err)
		w.stop()
		w.ns.NC.Close()
		w.ns.Shutdown()

		// Flip one byte of the third message of thread b: of its sealed
		// payload (the text is encrypted with the thread's key; the
		// envelope, with its event id, is clear).
		var blk string
		needle := []byte(third.Header.Get(jetstream.MsgIDHeader))
		require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && strings.HasSuffix(p, ".blk") && strings.Contains(p, "CONVLOG") {
				b, _ := os.ReadFile(p)
				if bytes.Contains(b, needle) {
					blk = p
				}
			}
			return nil
		}))
		require.NotEmpty(t, blk, "the block file holding the marker")
		b, err := os.ReadFile(blk)
		require.NoError(t, err)
		i := bytes.Index(b, needle)
		j := bytes.Index(b[i:], []byte("payload_sealed"))
		require.Positive(t, j, "the sealed payload after the event id")
		b[i+j+len("payload_sealed")+12] ^= 0x20
		require.NoError(t, os.WriteFile(blk, b, 0o600))

		ns := natstest.RunConfig(t, embedded.Config{StoreDir: dir})
		rep, err := audit.Verify(ctx, ns.JS, audit.Scope{}, audit.VerifyOptions{Trusted: []ed25519.PublicKey{w.key.Public().(ed25519.PublicKey)}})
		require.NoError(t, err)
		require.False(t, rep.OK)
		// The server either serves the altered bytes or, finding its own
		// checksum wrong, drops the message: altered or missing, at that
		// sequence.
		require.Equal(t, seqs[2], rep.FirstBadSeq, "%+v", rep.Problems)
		require.Contains(t, []string{audit.KindAltered, audit.KindMissing}, rep.Problems[0].Kind)
		t.Logf("the flipped byte: %+v", rep.Problems[0])
	})

	t.Run("a checkpoint signed by a key that is not trusted", func(t *testing.T) {
		w := newWorld(t, "")
		w.thread("acme", "t", 2, "x")
		w.waitCovered(w.lastThreadSeq())
		w.stop()
		_, forger, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		body, sig, pub, err := audit.Sign(audit.Checkpoint{V: audit.CheckpointVersion, Stream: "CONVLOG", From: 1, Seq: 1}, forger)
		require.NoError(t, err)
		ack, err := w.ns.JS.PublishMsg(ctx, &nats.Msg{Subject: audit.CheckpointSubject(""), Data: body,
			Header: nats.Header{audit.HeaderSignature: {sig}, audit.HeaderKey: {pub}}})
		require.NoError(t, err)
		for _, scope := range []audit.Scope{{}, {Tenant: "acme"}, {Tenant: "acme", Thread: "t"}} {
			rep := w.verify(scope)
			require.False(t, rep.OK, "%+v", scope)
			require.Equal(t, ack.Sequence, rep.FirstBadSeq, "%+v", scope)
			require.Equal(t, audit.KindSignature, rep.Problems[0].Kind, "%+v", scope)
		}
	})
}

func TestAnErasedThreadIsReportedNotTampered(t *testing.T) {
	w := newWorld(t, "")
	w.thread("acme", "keep", 3, "x")
	seqs := w.thread("acme", "gone", 4, "secret PII")
	w.waitCovered(w.lastThreadSeq())
	_, err := w.c.Erase(context.Background(), "acme", "gone", "GDPR request 17")
	require.NoError(t, err)
	w.waitCovered(w.lastThreadSeq())
	rep := w.verify(audit.Scope{})
	require.True(t, rep.OK, "%+v", rep.Problems)
	require.Len(t, rep.Erased, 1)
	require.Equal(t, "conv.acme.gone", rep.Erased[0].Subject)
	require.Equal(t, len(seqs), rep.Erased[0].Events)
}

// One thread is verified from the checkpoints that name it (the heads
// bucket's entry, then each checkpoint's prev_cp), not from every
// checkpoint of the stream; a pointer moved back (stale or altered) makes
// the verification read everything instead, and it still counts every
// event.
func TestOneThreadIsVerifiedFromItsOwnCheckpoints(t *testing.T) {
	w := newWorld(t, "")
	x := w.thread("acme", "x", 3, "early")
	w.waitCovered(w.lastThreadSeq())
	var total int
	for i := range 5 {
		s := w.thread("acme", fmt.Sprintf("other%d", i), 2, "later")
		total += len(s)
		w.waitCovered(w.lastThreadSeq())
	}
	more, err := w.c.Append(context.Background(), "acme", "x", []events.Event{{Payload: events.UserMessage{Content: events.Text("again")}}}, client.AnyVersion())
	require.NoError(t, err)
	w.waitCovered(more.Version)

	all := w.verify(audit.Scope{})
	require.True(t, all.OK)
	one := w.verify(audit.Scope{Tenant: "acme", Thread: "x"})
	require.True(t, one.OK, "%+v", one.Problems)
	require.EqualValues(t, len(x)+1, one.Verified)
	require.Equal(t, 2, one.Checkpoints, "the two checkpoints naming x, of %d", all.Checkpoints)
	require.Greater(t, all.Checkpoints, 5)

	// Point x's entry back at its first checkpoint: the walk misses the
	// second, so the whole stream is read, and all of x verifies.
	kv, err := w.ns.JS.KeyValue(context.Background(), audit.DefaultHeadsBucket)
	require.NoError(t, err)
	e, err := kv.Get(context.Background(), "h.conv.acme.x")
	require.NoError(t, err)
	stale := append([]byte(nil), e.Value()...)
	w.stop()
	st, err := w.ns.JS.Stream(context.Background(), "CONVLOG")
	require.NoError(t, err)
	m, err := st.GetMsg(context.Background(), one.LastCheckpoint.MsgSeq)
	require.NoError(t, err)
	var cp audit.Checkpoint
	require.NoError(t, json.Unmarshal(m.Data, &cp))
	for _, th := range cp.Threads {
		if th.Subject == "conv.acme.x" {
			binary.BigEndian.PutUint64(stale[32:], th.PrevCheckpoint)
		}
	}
	_, err = kv.Put(context.Background(), "h.conv.acme.x", stale)
	require.NoError(t, err)
	again := w.verify(audit.Scope{Tenant: "acme", Thread: "x"})
	require.True(t, again.OK, "%+v", again.Problems)
	require.EqualValues(t, len(x)+1, again.Verified, "%+v", again)
	require.Equal(t, all.Checkpoints, again.Checkpoints, "every checkpoint read")

	// Events after the last checkpoint (the checkpointer is stopped) are
	// counted as unsigned, each of them, on both paths.
	for range 2 {
		_, err := w.c.Append(context.Background(), "acme", "x", []events.Event{{Payload: events.UserMessage{Content: events.Text("late")}}}, client.AnyVersion())
		require.NoError(t, err)
	}
	_, err = kv.Put(context.Background(), "h.conv.acme.x", e.Value())
	require.NoError(t, err)
	for _, scope := range []audit.Scope{{}, {Tenant: "acme", Thread: "x"}} {
		rep := w.verify(scope)
		require.True(t, rep.OK, "%+v", rep.Problems)
		require.EqualValues(t, 2, rep.Unsigned, "%+v", scope)
	}
}

// Two checkpointers on one stream (two agentd serve, each with its key)
// never fork the checkpoint chain: each publishes on the expected last
// checkpoint, the loser reloads and goes on from the winner's; the stream
// verifies with both keys trusted, every event once.
func TestTwoCheckpointersDoNotForkTheChain(t *testing.T) {
	w := newWorld(t, "")
	_, other, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	cp2, err := audit.NewCheckpointer(w.ns.JS, audit.Config{Key: other, Interval: 7 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cp2.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var n int
	for i := range 20 {
		n += len(w.thread("acme", fmt.Sprintf("t%d", i), 5, "busy"))
	}
	trusted := []ed25519.PublicKey{w.key.Public().(ed25519.PublicKey), other.Public().(ed25519.PublicKey)}
	var rep *audit.Report
	require.Eventually(t, func() bool {
		rep, err = audit.Verify(context.Background(), w.ns.JS, audit.Scope{}, audit.VerifyOptions{Trusted: trusted})
		return err == nil && rep.Unsigned == 0 && rep.Verified == uint64(n)
	}, 20*time.Second, 20*time.Millisecond)
	// Without the expected-last-sequence on publish, both would cover
	// the same events and the chain check (prev, from) would fail here.
	require.True(t, rep.OK, "%+v", rep.Problems)
}

// A server with a small max payload (64 KiB here) still gets checkpoints:
// a checkpoint is cut below half the connection's max payload, whatever
// Config.MaxBytes says.
func TestCheckpointsFitASmallMaxPayload(t *testing.T) {
	ns := natstest.RunConfig(t, embedded.Config{MaxPayload: 64 << 10})
	ctx := context.Background()
	c, err := client.New(ctx, ns.NC, client.Config{Provision: true})
	require.NoError(t, err)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	var covered atomic.Uint64
	cp, err := audit.NewCheckpointer(ns.JS, audit.Config{Key: key, Interval: time.Hour, // only the size cuts
		OnCheckpoint: func(c audit.Checkpoint, _ uint64) { covered.Store(c.Seq) }})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = cp.Run(cctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, _, _, err = c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "t"})
	require.NoError(t, err)
	var last uint64
	for range 20 {
		var evs []events.Event
		for range 100 {
			evs = append(evs, events.Event{Payload: events.UserMessage{Content: events.Text("x")}})
		}
		res, err := c.Append(ctx, "acme", "t", evs, client.AnyVersion())
		require.NoError(t, err)
		last = res.Version
	}
	// 2,001 leaves are about 160 KiB: at least two checkpoints by size.
	require.Eventually(t, func() bool { return covered.Load() >= last-1000 }, 10*time.Second, 10*time.Millisecond,
		"checkpoints cut by size below the 64 KiB max payload (covered %d of %d)", covered.Load(), last)
}

// The checkpointer reads the stream with no filter subject, so its own
// checkpoints come back to it: they are not events to cover. Once every
// event is covered, no further checkpoint is written, however many
// intervals pass, and the stream verifies clean.
func TestCheckpointsDoNotCheckpointThemselves(t *testing.T) {
	w := newWorld(t, "")
	n := len(w.thread("acme", "t1", 5, "hello"))
	w.waitCovered(w.lastThreadSeq())
	st, err := w.ns.JS.Stream(context.Background(), "CONVLOG")
	require.NoError(t, err)
	last := func() uint64 {
		m, err := st.GetLastMsgForSubject(context.Background(), audit.CheckpointSubject(""))
		require.NoError(t, err)
		return m.Sequence
	}
	before := last()
	time.Sleep(15 * 20 * time.Millisecond) // 15 of world's checkpoint intervals
	require.Equal(t, before, last(), "a checkpoint was written with no new event")
	rep := w.verify(audit.Scope{})
	require.True(t, rep.OK, "%+v", rep.Problems)
	require.Equal(t, uint64(n), rep.Verified)
}

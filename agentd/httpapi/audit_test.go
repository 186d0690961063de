package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// TestAuditOverHTTP: the public key is published without an API key, a
// thread and a tenant verify clean against the signed checkpoints, a
// thread purged behind convlog's back fails naming its first sequence
// (and the other tenant's verification does not see it), an anchor that
// is not in the stream fails, and a server without a key answers 404.
func TestAuditOverHTTP(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	pub := key.Public().(ed25519.PublicKey)
	e := newEnv(t, withoutWorkers(), withConfig(func(c *httpapi.Config) { c.AuditKey = pub }))
	var covered atomic.Uint64
	cp, err := audit.NewCheckpointer(e.ns.JS, audit.Config{Key: key, Interval: 10 * time.Millisecond,
		OnCheckpoint: func(c audit.Checkpoint, _ uint64) { covered.Store(c.Seq) }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	r := e.do("GET", "/v1/audit/key", "", nil)
	require.Equal(t, http.StatusOK, r.status, r.body)
	var k struct {
		PublicKey string `json:"public_key"`
	}
	r.json(t, &k)
	require.Equal(t, audit.PublicKeyString(pub), k.PublicKey)

	victim := e.createThread(map[string]any{"replies": "off"})
	other := e.createThread(map[string]any{"replies": "off"})
	var last uint64
	for _, id := range []string{victim, other} {
		for i := range 3 {
			r := e.do("POST", "/v1/threads/"+id+"/events", keyAcme, map[string]any{"events": []any{userEvent("m" + strconv.Itoa(i))}})
			require.Equal(t, http.StatusCreated, r.status, r.body)
			var a struct {
				Version uint64 `json:"version"`
			}
			r.json(t, &a)
			last = max(last, a.Version)
		}
	}
	g := e.do("POST", "/v1/threads", keyGlobex, map[string]any{"id": "g1", "replies": "off"})
	require.Equal(t, http.StatusCreated, g.status, g.body)
	require.Eventually(t, func() bool { return covered.Load() > last }, 10*time.Second, 5*time.Millisecond)

	var rep audit.Report
	r = e.do("GET", "/v1/threads/"+victim+"/audit", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, r.body)
	r.json(t, &rep)
	require.True(t, rep.OK, r.body)
	require.EqualValues(t, 4, rep.Verified)
	anchor := rep.LastCheckpoint
	require.NotNil(t, anchor)

	r = e.do("GET", "/v1/audit/verify", keyAcme, nil)
	rep = audit.Report{}
	r.json(t, &rep)
	require.True(t, rep.OK, r.body)
	require.Equal(t, 2, rep.Threads, "the tenant's threads only")

	// Behind convlog's back: the victim's first two events purged.
	st, err := e.ns.JS.Stream(context.Background(), "CONVLOG")
	require.NoError(t, err)
	first, err := st.GetMsg(context.Background(), 1, jetstream.WithGetMsgSubject("conv.acme."+victim))
	require.NoError(t, err)
	require.NoError(t, st.Purge(context.Background(), jetstream.WithPurgeSubject("conv.acme."+victim), jetstream.WithPurgeSequence(first.Sequence+2)))

	r = e.do("GET", "/v1/threads/"+victim+"/audit", keyAcme, nil)
	rep = audit.Report{}
	r.json(t, &rep)
	require.False(t, rep.OK, r.body)
	require.Equal(t, first.Sequence, rep.FirstBadSeq)
	require.Equal(t, audit.KindMissing, rep.Problems[0].Kind)
	r = e.do("GET", "/v1/audit/verify", keyGlobex, nil)
	rep = audit.Report{}
	r.json(t, &rep)
	require.True(t, rep.OK, "another tenant's verification does not see it: %s", r.body)

	// An anchor kept from the clean report still matches; a forged one does not.
	r = e.do("GET", "/v1/threads/"+other+"/audit?anchor_seq="+strconv.FormatUint(anchor.MsgSeq, 10)+"&anchor_hash="+anchor.Hash, keyAcme, nil)
	rep = audit.Report{}
	r.json(t, &rep)
	require.True(t, rep.OK, r.body)
	bad := []byte(anchor.Hash)
	bad[0] = map[bool]byte{true: '1', false: '0'}[bad[0] == '0'] // another hex digit
	r = e.do("GET", "/v1/threads/"+other+"/audit?anchor_seq="+strconv.FormatUint(anchor.MsgSeq, 10)+"&anchor_hash="+string(bad), keyAcme, nil)
	rep = audit.Report{}
	require.Equal(t, http.StatusOK, r.status, r.body)
	r.json(t, &rep)
	require.False(t, rep.OK, r.body)
	require.NotEmpty(t, rep.Problems, r.body)
	require.Equal(t, audit.KindAnchorNotFound, rep.Problems[0].Kind)

	r = e.do("GET", "/v1/threads/"+other+"/audit?anchor_seq=3", keyAcme, nil)
	require.Equal(t, http.StatusBadRequest, r.status, r.body)
	r = e.do("GET", "/v1/threads/nope/audit", keyAcme, nil)
	require.Equal(t, http.StatusNotFound, r.status, r.body)

	off := newEnv(t, withoutWorkers())
	r = off.do("GET", "/v1/audit/key", "", nil)
	require.Equal(t, http.StatusNotFound, r.status, r.body)
	require.Contains(t, string(r.body), "audit-off")
}

// Verifications beyond Config.MaxAudits at once are refused with 429 and
// Retry-After, so a client repeating them cannot take every core; the
// others are answered.
func TestAuditVerificationsAreBounded(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	e := newEnv(t, withoutWorkers(), withConfig(func(c *httpapi.Config) { c.AuditKey, c.MaxAudits = key.Public().(ed25519.PublicKey), 1 }))
	id := e.createThread(map[string]any{"replies": "off"})
	ctx := context.Background()
	for range 30 {
		var evs []events.Event
		for range 100 {
			evs = append(evs, events.Event{Payload: events.UserMessage{Content: events.Text(strings.Repeat("x", 300))}})
		}
		_, err := e.c.Append(ctx, "acme", id, evs, client.AnyVersion())
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	retryAfter := ""
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do("GET", "/v1/threads/"+id+"/audit", keyAcme, nil)
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			if r.status == http.StatusTooManyRequests {
				retryAfter = r.header.Get("Retry-After")
			}
		}()
	}
	wg.Wait()
	require.Positive(t, codes[http.StatusOK], "%v", codes)
	require.Positive(t, codes[http.StatusTooManyRequests], "%v", codes)
	require.Equal(t, 16, codes[http.StatusOK]+codes[http.StatusTooManyRequests], "%v", codes)
	require.Equal(t, "1", retryAfter)
}

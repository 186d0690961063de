package replayrun_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/replayrun"
	"github.com/convlog/convlog/internal/clienttest"
)

// sseReader follows one thread's SSE stream and records the sequence of
// every durable event it receives.
type sseReader struct {
	mu   sync.Mutex
	seqs []uint64
	err  error
}

func (r *sseReader) follow(ctx context.Context, url, key string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.setErr(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.setErr(&httpError{resp.StatusCode})
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				r.setErr(err)
				return
			}
			r.mu.Lock()
			r.seqs = append(r.seqs, n)
			r.mu.Unlock()
		}
	}
}

func (r *sseReader) setErr(err error) { r.mu.Lock(); r.err = err; r.mu.Unlock() }

func (r *sseReader) snapshot() ([]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.seqs...), r.err
}

type httpError struct{ code int }

func (e *httpError) Error() string { return "HTTP " + strconv.Itoa(e.code) }

// An SSE client watching 20 replayed threads over the HTTP API receives
// exactly the events that were stored, each once, in order.
func TestSSEWatchersOfReplayedThreadsSeeExactlyTheStoredEvents(t *testing.T) {
	convs := load(t)
	convs = convs[:min(40, len(convs))]
	watched := min(20, len(convs)) // the sample of a fresh clone has 10
	s := clienttest.New(t)
	c := s.Client
	const key = "replay-key"
	api, err := httpapi.New(httpapi.Config{Client: c, NC: s.NC, Agents: []string{replayrun.AgentName},
		Auth: httpapi.Auth{Keys: map[string]string{httpapi.HashKey(key): "replay"}}})
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	readers := map[string]*sseReader{}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	rep, err := replayrun.Run(ctx, c, s.NC, convs, replayrun.Config{Tenant: "replay", Pools: 2, Parallel: 8,
		OnThread: func(tenant, thread string) {
			mu.Lock()
			defer mu.Unlock()
			if len(readers) >= watched {
				return
			}
			r := &sseReader{}
			readers[thread] = r
			wg.Add(1)
			go func() { defer wg.Done(); r.follow(ctx, srv.URL+"/v1/threads/"+thread+"/events", key) }()
		}})
	require.NoError(t, err)
	require.Empty(t, rep.Unresolved)
	require.Len(t, readers, watched)
	for thread, r := range readers {
		var stored []uint64
		for ev, err := range c.Events(ctx, "replay", thread, 0, 0) {
			require.NoError(t, err)
			stored = append(stored, ev.Seq)
		}
		require.NotEmpty(t, stored)
		require.Eventually(t, func() bool {
			got, err := r.snapshot()
			require.NoError(t, err)
			return len(got) >= len(stored)
		}, 30*time.Second, 10*time.Millisecond, "thread %s", thread)
		got, _ := r.snapshot()
		require.Equal(t, stored, got, "thread %s: SSE events differ from the stored events", thread)
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	require.NoError(t, api.Shutdown(sctx))
}

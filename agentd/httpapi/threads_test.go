package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
)

type threadOut struct {
	Tenant       string            `json:"tenant"`
	Thread       string            `json:"thread"`
	Version      uint64            `json:"version"`
	Title        string            `json:"title"`
	Metadata     map[string]string `json:"metadata"`
	Deleted      bool              `json:"deleted"`
	MessageCount int               `json:"message_count"`
	Messages     []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
		Seq     uint64 `json:"seq"`
	} `json:"messages"`
	Events []struct {
		Seq      uint64    `json:"seq"`
		StoredAt time.Time `json:"stored_at"`
		ID       string    `json:"id"`
		Type     string    `json:"type"`
	} `json:"events"`
	ForkedFrom *struct {
		Thread string `json:"thread"`
		Seq    uint64 `json:"seq"`
	} `json:"forked_from"`
}

// eventsPage is the JSON page of GET /v1/threads/{id}/events.
type eventsPage struct {
	Events    []json.RawMessage `json:"events"`
	NextAfter uint64            `json:"next_after"`
	More      bool              `json:"more"`
}

type appendOut struct {
	Version   uint64 `json:"version"`
	Duplicate bool   `json:"duplicate"`
	Events    []struct {
		ID  string `json:"id"`
		Seq uint64 `json:"seq"`
	} `json:"events"`
}

func TestHTTPThreadLifecycle(t *testing.T) {
	e := newEnv(t)

	// Create.
	r := e.do("POST", "/v1/threads", keyAcme, map[string]any{"title": "notes", "metadata": map[string]string{"team": "a"}, "replies": "off"})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var th threadOut
	r.json(t, &th)
	id := th.Thread
	require.Equal(t, "acme", th.Tenant)
	require.Equal(t, "/v1/threads/"+id, r.header.Get("Location"))
	require.Equal(t, `"`+strconv.FormatUint(th.Version, 10)+`"`, r.header.Get("ETag"))
	require.Equal(t, "notes", th.Title)

	// Get, conditional get.
	r = e.do("GET", "/v1/threads/"+id, keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status)
	etag := r.header.Get("ETag")
	r = e.do("GET", "/v1/threads/"+id, keyAcme, nil, "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, r.status)

	// Conditional append.
	r = e.do("POST", "/v1/threads/"+id+"/events", keyAcme, map[string]any{"events": []any{userEvent("first")}}, "If-Match", etag)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var a1 appendOut
	r.json(t, &a1)
	require.False(t, a1.Duplicate)
	require.Equal(t, `"`+strconv.FormatUint(a1.Version, 10)+`"`, r.header.Get("ETag"))

	// A turn of two events, stored atomically.
	r = e.do("POST", "/v1/threads/"+id+"/events", keyAcme, map[string]any{"events": []any{userEvent("second"), userEvent("third")}})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var a2 appendOut
	r.json(t, &a2)
	require.Len(t, a2.Events, 2)
	require.Equal(t, a2.Events[0].Seq+1, a2.Events[1].Seq, "one atomic turn")

	// Reads: consistent with events, at a sequence, as of a time.
	r = e.do("GET", "/v1/threads/"+id+"?consistent=true&events=true", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status)
	r.json(t, &th)
	require.Equal(t, 3, th.MessageCount)
	require.Len(t, th.Events, 4)
	require.Equal(t, "thread.created", th.Events[0].Type)
	require.Equal(t, a2.Events[1].Seq, th.Events[3].Seq)
	r = e.do("GET", "/v1/threads/"+id+"?at_seq="+strconv.FormatUint(a1.Version, 10), keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status)
	var at threadOut
	r.json(t, &at)
	require.Equal(t, 1, at.MessageCount)
	r = e.do("GET", "/v1/threads/"+id+"?as_of="+url.QueryEscape(th.Events[0].StoredAt.Format(time.RFC3339Nano)), keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r.json(t, &at)
	require.Equal(t, 0, at.MessageCount)

	// The JSON page of events (no text/event-stream in Accept).
	r = e.do("GET", "/v1/threads/"+id+"/events?limit=2", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var page eventsPage
	r.json(t, &page)
	require.Len(t, page.Events, 2)
	require.True(t, page.More)
	r = e.do("GET", "/v1/threads/"+id+"/events?after="+strconv.FormatUint(page.NextAfter, 10), keyAcme, nil)
	r.json(t, &page)
	require.Len(t, page.Events, 2)
	require.False(t, page.More)

	// Fork at the first message; a retried fork (same Idempotency-Key) is the same fork.
	r = e.do("POST", "/v1/threads/"+id+"/fork", keyAcme, map[string]any{"at_seq": a1.Version}, "Idempotency-Key", "fork-1")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var fork threadOut
	r.json(t, &fork)
	require.Equal(t, 1, fork.MessageCount)
	require.Equal(t, id, fork.ForkedFrom.Thread)
	require.Equal(t, a1.Version, fork.ForkedFrom.Seq)
	before := e.streamMsgs()
	r = e.do("POST", "/v1/threads/"+id+"/fork", keyAcme, map[string]any{"at_seq": a1.Version}, "Idempotency-Key", "fork-1")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var fork2 threadOut
	r.json(t, &fork2)
	require.Equal(t, fork.Thread, fork2.Thread)
	require.Equal(t, before, e.streamMsgs())

	// Soft delete (idempotent), hidden, undelete.
	for range 2 {
		r = e.do("DELETE", "/v1/threads/"+id, keyAcme, map[string]any{"reason": "tidy"})
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}
	require.Equal(t, http.StatusNotFound, e.do("GET", "/v1/threads/"+id, keyAcme, nil).status)
	r = e.do("GET", "/v1/threads/"+id+"?include_deleted=true", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status)
	r.json(t, &th)
	require.True(t, th.Deleted)
	r = e.do("POST", "/v1/threads/"+id+"/events", keyAcme, map[string]any{"events": []any{userEvent("late")}})
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	require.Equal(t, "deleted", r.problem(t)["code"])
	r = e.do("POST", "/v1/threads/"+id+"/undelete", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/threads/"+id, keyAcme, nil).status)

	// Export, both formats, streamed as JSON lines.
	r = e.do("GET", "/v1/threads/"+id+"/export?format=events", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "application/x-ndjson", r.header.Get("Content-Type"))
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		require.True(t, json.Valid(sc.Bytes()))
		lines++
	}
	require.Equal(t, 6, lines, "created, 3 messages, deleted (once: the second DELETE was a no-op), undeleted")
	r = e.do("GET", "/v1/threads/"+id+"/export?format=openai", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var conv struct {
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(r.body), &conv))
	require.Len(t, conv.Messages, 3)

	// Erase: needs confirmation, then the thread is gone.
	r = e.do("POST", "/v1/threads/"+id+"/erase", keyAcme, map[string]any{"confirm": true, "reason": "user request"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var rep struct {
		RemovedEvents uint64 `json:"removed_events"`
	}
	r.json(t, &rep)
	require.Equal(t, uint64(6), rep.RemovedEvents)
	require.Equal(t, http.StatusNotFound, e.do("GET", "/v1/threads/"+id, keyAcme, nil).status)
	require.Equal(t, http.StatusNotFound, e.do("POST", "/v1/threads/"+id+"/erase", keyAcme, map[string]any{"confirm": true}).status)
}

// A retried append with the same Idempotency-Key stores nothing twice: the
// event ids are derived from the key, and the client's idempotent append
// finds the earlier copy.
func TestHTTPIdempotentAppendRetry(t *testing.T) {
	e := newEnv(t)
	id := e.createThread(map[string]any{"replies": "off"})
	for name, evs := range map[string][]any{
		"one event": {userEvent("a")},
		"a turn":    {userEvent("b"), userEvent("c")},
	} {
		t.Run(name, func(t *testing.T) {
			body := map[string]any{"events": evs}
			r := e.do("POST", "/v1/threads/"+id+"/events", keyAcme, body, "Idempotency-Key", "retry-"+name)
			require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
			var first appendOut
			r.json(t, &first)
			require.False(t, first.Duplicate)
			// Another writer moves the thread on before the retry.
			require.Equal(t, http.StatusCreated, e.do("POST", "/v1/threads/"+id+"/events", keyAcme, map[string]any{"events": []any{userEvent("other")}}).status)
			before := e.streamMsgs()
			r = e.do("POST", "/v1/threads/"+id+"/events", keyAcme, body, "Idempotency-Key", "retry-"+name)
			require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
			var again appendOut
			r.json(t, &again)
			require.True(t, again.Duplicate)
			require.Equal(t, first.Events, again.Events)
			require.Equal(t, before, e.streamMsgs())
		})
	}
}

func TestHTTPCreateIsIdempotentWithAKey(t *testing.T) {
	e := newEnv(t)
	r1 := e.do("POST", "/v1/threads", keyAcme, map[string]any{"title": "x"}, "Idempotency-Key", "create-1")
	require.Equal(t, http.StatusCreated, r1.status, "%s", r1.body)
	before := e.streamMsgs()
	r2 := e.do("POST", "/v1/threads", keyAcme, map[string]any{"title": "x"}, "Idempotency-Key", "create-1")
	require.Equal(t, http.StatusCreated, r2.status, "%s", r2.body)
	require.Equal(t, r1.header.Get("Location"), r2.header.Get("Location"))
	require.Equal(t, before, e.streamMsgs())
}

func TestHTTPAuthDisabledIsTenantDefault(t *testing.T) {
	e := newEnv(t, withConfig(func(c *httpapi.Config) { c.Auth = httpapi.Auth{Disabled: true} }))
	require.False(t, e.api.AuthEnabled())
	r := e.do("POST", "/v1/threads", "", map[string]any{})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var th threadOut
	r.json(t, &th)
	require.Equal(t, "default", th.Tenant)
}

func TestHTTPKeysLoadFromFileAndEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	hashed := httpapi.HashKey("k3")
	require.NoError(t, os.WriteFile(path, []byte("# keys\nacme:k1\n\nglobex:k2\nacme:sha256:"+hashed+"\n"), 0o600))
	keys, err := httpapi.LoadKeys(path)
	require.NoError(t, err)
	require.Equal(t, map[string]string{httpapi.HashKey("k1"): "acme", httpapi.HashKey("k2"): "globex", hashed: "acme"}, keys)
	for _, k := range []string{"k1", "k2", "k3"} {
		require.NotContains(t, keys, k, "keys are held hashed")
	}

	t.Setenv("CONVLOG_TEST_KEYS", "acme:k1, globex:k2")
	keys, ok, err := httpapi.KeysFromEnv("CONVLOG_TEST_KEYS")
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, keys, 2)
	_, ok, err = httpapi.KeysFromEnv("CONVLOG_TEST_UNSET")
	require.NoError(t, err)
	require.False(t, ok)

	for name, text := range map[string]string{
		"no tenant":             "k1\n",
		"a bad tenant":          "ac me:k1\n",
		"a short hash":          "acme:sha256:abc\n",
		"nothing":               "# only a comment\n",
		"a key for two tenants": "acme:k1\nglobex:k1\n",
	} {
		_, err := httpapi.ParseKeys(text)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "k1", "errors never echo keys (%s)", name)
	}
	require.Error(t, httpapi.Auth{}.Validate(), "auth on without keys")
	require.NoError(t, httpapi.Auth{Disabled: true}.Validate())
}

func TestHTTPShutdownEndsStreams(t *testing.T) {
	e := newEnv(t)
	id := e.createThread(map[string]any{})
	res, rd := e.openSSE(t.Context(), id, "")
	defer res.Body.Close()
	for {
		f, err := rd.next()
		require.NoError(t, err)
		if f.event != "" {
			require.Equal(t, "thread.created", f.event)
			break
		}
	}
	require.NoError(t, e.api.Shutdown(t.Context()))
	for {
		f, err := rd.next()
		require.NoError(t, err)
		if f.event == "shutdown" {
			break
		}
	}
}

// Listing filters by owner, agent and metadata and pages with a cursor.
// The index List reads is written by the projector, so the listing is
// polled until the projector has caught up.
func TestHTTPListThreadsFiltersAndPages(t *testing.T) {
	e := newEnv(t, withoutWorkers(), withProjector())
	for i := range 3 {
		e.createThread(map[string]any{"owner": "ann", "agent": "demo", "metadata": map[string]string{"team": "red", "n": strconv.Itoa(i)}})
	}
	e.createThread(map[string]any{"owner": "bob", "metadata": map[string]string{"team": "blue"}})
	require.Equal(t, http.StatusCreated, e.do("POST", "/v1/threads", keyGlobex, map[string]any{"owner": "ann"}).status)

	type page struct {
		Threads []struct {
			Tenant string `json:"tenant"`
			Owner  string `json:"owner"`
		} `json:"threads"`
		NextCursor string `json:"next_cursor"`
	}
	list := func(q string) page {
		t.Helper()
		r := e.do("GET", "/v1/threads"+q, keyAcme, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var p page
		r.json(t, &p)
		return p
	}
	require.Eventually(t, func() bool { return len(list("").Threads) == 4 }, 10*time.Second, 5*time.Millisecond,
		"only the tenant's own threads")
	require.Len(t, list("?owner=ann").Threads, 3)
	require.Len(t, list("?agent=demo&metadata.team=red&metadata.n=1").Threads, 1)
	require.Len(t, list("?metadata.team=blue").Threads, 1)
	seen := 0
	q := "?owner=ann&limit=2"
	for {
		p := list(q)
		seen += len(p.Threads)
		if p.NextCursor == "" {
			break
		}
		q = "?owner=ann&limit=2&cursor=" + url.QueryEscape(p.NextCursor)
	}
	require.Equal(t, 3, seen)
	r := e.do("GET", "/v1/threads?cursor=not-a-cursor", keyAcme, nil)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Equal(t, "bad-cursor", r.problem(t)["code"])
}

// PUT /v1/threads/{id} creates a thread that does not exist (201) and
// answers 200 with the thread as it is when it does (also soft-deleted),
// so an adapter that creates its thread on every run never meets 409; an
// erased id stays taken.
func TestPutThreadIsCreateIfAbsent(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	r := e.do("PUT", "/v1/threads/run-42", keyAcme, map[string]any{"agent": "demo", "title": "first"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "/v1/threads/run-42", r.header.Get("Location"))
	var th map[string]any
	r.json(t, &th)
	require.Equal(t, "first", th["title"])

	r = e.do("PUT", "/v1/threads/run-42", keyAcme, map[string]any{"agent": "demo", "title": "second"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r.json(t, &th)
	require.Equal(t, "first", th["title"], "an existing thread is returned as it is")
	require.Equal(t, float64(1), th["version"])

	r = e.do("PUT", "/v1/threads/run-42", keyAcme, map[string]any{"id": "other"})
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	require.Equal(t, "id", r.problem(t)["field"])
	r = e.do("PUT", "/v1/threads/bad%FFid", keyAcme, nil)
	require.Equal(t, http.StatusBadRequest, r.status, "not UTF-8")

	r = e.do("DELETE", "/v1/threads/run-42", keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = e.do("PUT", "/v1/threads/run-42", keyAcme, nil)
	require.Equal(t, http.StatusCreated, r.status, "a soft-deleted id is free again (TestDeleteThenReuseTheID)")
	r.json(t, &th)
	require.Nil(t, th["deleted"])
	require.Equal(t, float64(1), th["lifetime"])

	r = e.do("POST", "/v1/threads/run-42/erase", keyAcme, map[string]any{"confirm": true})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = e.do("PUT", "/v1/threads/run-42", keyAcme, nil)
	require.Equal(t, http.StatusConflict, r.status, "an erased id stays taken: %s", r.body)
	require.Equal(t, "thread-exists", r.problem(t)["code"])

	// Another tenant's PUT of the same id is its own thread.
	r = e.do("PUT", "/v1/threads/run-42", keyGlobex, nil)
	require.Equal(t, http.StatusCreated, r.status)
}

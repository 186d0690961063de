package httpapi_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
)

// rawDo sends body as is with contentType.
func (e *env) rawDo(method, path string, body []byte, contentType string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return res, b
}

// TestBlobsHoldValuesLargerThanAnEvent: a value of several MiB (an event
// holds at most 1 MiB) is stored, read back byte for byte, limited by the
// configured size (413, nothing stored), scoped to the thread's lifetime
// and deleted by erase.
func TestBlobsHoldValuesLargerThanAnEvent(t *testing.T) {
	const limit = 3 << 20
	e := newEnv(t, withoutWorkers(), withConfig(func(c *httpapi.Config) { c.MaxBlobBytes = limit }))
	const thread = "/v1/threads/lg-blobs"
	r := e.do("PUT", thread, keyAcme, nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	big := make([]byte, limit) // exactly at the limit: accepted
	_, _ = rand.Read(big)
	res, body := e.rawDo("PUT", thread+"/blobs/checkpoints/main/0001", big, "application/octet-stream")
	require.Equal(t, http.StatusOK, res.StatusCode, "body: %s", body)
	require.Contains(t, string(body), `"size":3145728`)
	etag := res.Header.Get("ETag")
	require.True(t, strings.HasPrefix(etag, `"SHA-256=`), etag)

	res, body = e.rawDo("GET", thread+"/blobs/checkpoints/main/0001", nil, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "application/octet-stream", res.Header.Get("Content-Type"))
	require.Equal(t, etag, res.Header.Get("ETag"))
	require.True(t, bytes.Equal(big, body), "the bytes read back are the bytes stored")

	// One byte over the limit: 413, and the blob keeps its value.
	res, body = e.rawDo("PUT", thread+"/blobs/checkpoints/main/0001", append(big, 1), "application/octet-stream")
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, "body: %s", body)
	require.Contains(t, string(body), "3145728")
	// Sent chunked (no Content-Length): refused while reading.
	req, err := http.NewRequest("PUT", e.srv.URL+thread+"/blobs/chunked", io.MultiReader(bytes.NewReader(big), strings.NewReader("x")))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	hres, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	hres.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, hres.StatusCode)
	res, _ = e.rawDo("GET", thread+"/blobs/chunked", nil, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode, "a refused blob stores nothing")
	res, body = e.rawDo("GET", thread+"/blobs/checkpoints/main/0001", nil, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.True(t, bytes.Equal(big, body))

	// A JSON blob keeps its Content-Type; a bad name is a 400.
	res, body = e.rawDo("PUT", thread+"/blobs/meta.json", []byte(`{"a":1}`), "application/json")
	require.Equal(t, http.StatusOK, res.StatusCode, "body: %s", body)
	res, body = e.rawDo("GET", thread+"/blobs/meta.json", nil, "")
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	require.JSONEq(t, `{"a":1}`, string(body))
	res, _ = e.rawDo("PUT", thread+"/blobs/bad%07name", []byte("x"), "")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)

	// A blob of a thread that does not exist: 404.
	res, _ = e.rawDo("PUT", "/v1/threads/nobody/blobs/x", []byte("x"), "")
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	// Delete, then reuse the id: the new lifetime has no blobs.
	res, _ = e.rawDo("DELETE", thread+"/blobs/meta.json", nil, "")
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	res, _ = e.rawDo("GET", thread+"/blobs/meta.json", nil, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	r = e.do("DELETE", thread, keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status)
	r = e.do("PUT", thread, keyAcme, nil)
	require.Equal(t, http.StatusCreated, r.status)
	res, body = e.rawDo("GET", thread+"/blobs/checkpoints/main/0001", nil, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode, "body: %s", body)
	require.Contains(t, string(body), "blob-not-found")
	res, _ = e.rawDo("PUT", thread+"/blobs/checkpoints/main/0001", []byte("second life"), "text/plain")
	require.Equal(t, http.StatusOK, res.StatusCode)

	// Erase deletes the blobs of every lifetime.
	r = e.do("POST", thread+"/erase", keyAcme, map[string]any{"confirm": true})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var rep struct {
		Blobs []string `json:"blobs"`
	}
	r.json(t, &rep)
	require.ElementsMatch(t, []string{"acme/lg-blobs/0/checkpoints/main/0001", "acme/lg-blobs/1/checkpoints/main/0001"}, rep.Blobs)
}

// A blob sent with a content coding is refused like any request body
// (415, field Content-Encoding, Accept-Encoding: identity) and nothing is
// stored: the API stores bytes as sent and could not say on a read that
// they are gzip-coded.
func TestBlobWithAContentCodingIsRefused(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	const thread = "/v1/threads/coded-blob"
	r := e.do("PUT", thread, keyAcme, nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	req, err := http.NewRequest("PUT", e.srv.URL+thread+"/blobs/b", strings.NewReader("\x1f\x8bnot really gzip"))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode, "body: %s", body)
	require.Contains(t, string(body), `"field":"Content-Encoding"`)
	require.Equal(t, "identity", res.Header.Get("Accept-Encoding"))
	res, _ = e.rawDo("GET", thread+"/blobs/b", nil, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode, "a refused blob stores nothing")
}

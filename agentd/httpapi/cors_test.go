package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
)

// CORS is off by default; with origins configured, their preflights and
// requests get the Access-Control-* headers and other origins get none.
func TestCORSAllowsOnlyTheConfiguredOrigins(t *testing.T) {
	preflight := func(e *env, origin string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodOptions, e.srv.URL+"/v1/threads", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
		res, err := e.srv.Client().Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res
	}

	off := newEnv(t)
	require.Empty(t, preflight(off, "https://app.example.com").Header.Get("Access-Control-Allow-Origin"), "no CORS by default")
	r := off.do("GET", "/v1/threads", keyAcme, nil, "Origin", "https://app.example.com")
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.header.Get("Access-Control-Allow-Origin"))

	on := newEnv(t, withConfig(func(c *httpapi.Config) { c.CORSOrigins = []string{"https://app.example.com"} }))
	res := preflight(on, "https://app.example.com")
	require.Equal(t, "https://app.example.com", res.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, strings.ToLower(res.Header.Get("Access-Control-Allow-Headers")), "idempotency-key")
	require.Empty(t, preflight(on, "https://evil.example.com").Header.Get("Access-Control-Allow-Origin"), "an origin not listed gets no CORS headers")
	r = on.do("GET", "/v1/threads", keyAcme, nil, "Origin", "https://app.example.com")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "https://app.example.com", r.header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, strings.ToLower(r.header.Get("Access-Control-Expose-Headers")), "etag")
	r = on.do("GET", "/v1/threads", "", nil, "Origin", "https://app.example.com")
	require.Equal(t, http.StatusUnauthorized, r.status, "CORS does not replace the API key")
}

// An entry of CORSOrigins that is not an origin is refused with the
// configuration's other problems.
func TestCORSOriginsMustBeOrigins(t *testing.T) {
	for _, o := range []string{"app.example.com", "ftp://app.example.com", "https://app.example.com/", "https://app.example.com/path", "https://"} {
		err := httpapi.Config{CORSOrigins: []string{o}}.ValidateLimits()
		require.ErrorContains(t, err, "is not an origin", o)
	}
	for _, o := range []string{"*", "https://app.example.com", "http://127.0.0.1:3000"} {
		require.NoError(t, httpapi.Config{CORSOrigins: []string{o}}.ValidateLimits(), o)
	}
}

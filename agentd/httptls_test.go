package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// --http-tls-cert/--http-tls-key: the HTTP API, the
// web page and SSE are served over HTTPS only; a client that trusts the
// certificate gets HTTP/2, a plain-HTTP request is refused, and a bad
// certificate file is named by --check.
func TestHTTPAPIOverTLS(t *testing.T) {
	cert, key := selfSignedCert(t)
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir, "--workers", "0", "--http-tls-cert", cert, "--http-tls-key", key)
	require.True(t, strings.HasPrefix(p.httpURL, "https://127.0.0.1:"), p.httpURL)

	pem, err := os.ReadFile(cert)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	res, err := hc.Post(p.httpURL+"/v1/threads", "application/json", strings.NewReader(`{"id":"tls","replies":"off"}`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.Equal(t, 2, res.ProtoMajor, "HTTP/2 over TLS")
	res, err = hc.Get(p.httpURL + "/v1/threads/tls")
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", b)
	require.Equal(t, "TLS 1.3", tls.VersionName(res.TLS.Version))

	plain := "http://" + strings.TrimPrefix(p.httpURL, "https://")
	res, err = http.Get(plain + "/healthz")
	if err == nil {
		res.Body.Close()
		require.Equal(t, http.StatusBadRequest, res.StatusCode, "plain HTTP is answered with Go's 400 for a TLS port, never served")
	}
	_, err = http.Get(p.httpURL + "/healthz") // a client that does not trust the certificate
	require.ErrorContains(t, err, "certificate")

	bad := filepath.Join(t.TempDir(), "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a certificate"), 0o600))
	_, stderr, err := runCLIFull(t, "serve", "--check", "--data-dir", filepath.Join(t.TempDir(), "d2"), "--http-tls-cert", bad, "--http-tls-key", key)
	require.Error(t, err)
	require.Contains(t, stderr, "--http-tls-cert "+bad)
	_, stderr, err = runCLIFull(t, "serve", "--check", "--data-dir", filepath.Join(t.TempDir(), "d3"), "--http-tls-cert", cert)
	require.Error(t, err)
	require.Contains(t, stderr, "--http-tls-cert and --http-tls-key go together")
}

package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// `agentd tls init` writes a CA and a certificate valid for every given
// name and address, for server and client use, signed by the CA; a second
// run keeps the files; missing flags are usage errors.
func TestTLSInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	out, _, err := runCLIFull(t, "tls", "init", "--dir", dir, "--hosts", "n1,n2,127.0.0.1")
	require.NoError(t, err)
	require.Contains(t, out, "created ca.pem")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	for _, host := range []string{"n1", "n2", "127.0.0.1"} {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		require.NoError(t, err, "valid for %s as a server", host)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err, "valid as a client (mutual TLS between nodes)")
	_, err = cert.Verify(x509.VerifyOptions{DNSName: "n3", Roots: pool})
	require.Error(t, err, "not valid for a name not given")
	fi, err := os.Stat(filepath.Join(dir, "server-key.pem"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	before, err := os.ReadFile(filepath.Join(dir, "server.pem"))
	require.NoError(t, err)
	out, _, err = runCLIFull(t, "tls", "init", "--dir", dir, "--hosts", "other")
	require.NoError(t, err)
	require.Contains(t, out, "kept the certificates")
	after, err := os.ReadFile(filepath.Join(dir, "server.pem"))
	require.NoError(t, err)
	require.Equal(t, before, after)

	_, stderr, err := runCLIFull(t, "tls", "init", "--hosts", "x")
	require.Error(t, err)
	require.Contains(t, stderr, "--dir is required")
}

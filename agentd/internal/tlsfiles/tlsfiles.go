// Package tlsfiles creates a deployment's TLS files (agentd tls init): a
// private CA and one certificate signed by it (ECDSA P-256) valid for
// every name and address of the deployment, for both server and client
// authentication, so that the same files serve the NATS client listener,
// the cluster routes (mutual TLS) and the HTTP API.
package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files Create writes in its directory.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
)

// Create creates the CA and the certificate of hosts (DNS names and IP
// addresses; the first is the certificate's common name) in dir, valid
// from an hour ago for validity, unless ServerFile exists there; it
// reports whether it created them. dir is created when missing. The keys
// are written with mode 0600, readable by the files' owner only; the
// certificates 0644. ServerFile is written last: its presence says the
// set is complete.
func Create(dir string, hosts []string, validity time.Duration) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, ServerFile)); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if len(hosts) == 0 {
		return false, errors.New("tlsfiles: no hosts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	now := time.Now().Add(-time.Hour)
	ca, caKey, caDER, err := newCA(now, validity)
	if err != nil {
		return false, err
	}
	key, der, err := newLeaf(now, validity, hosts, ca, caKey)
	if err != nil {
		return false, err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return false, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return false, err
	}
	for _, f := range []struct {
		name, typ string
		b         []byte
		mode      os.FileMode
	}{
		{CAFile, "CERTIFICATE", caDER, 0o644}, {CAKeyFile, "EC PRIVATE KEY", caKeyDER, 0o600},
		{ServerKeyFile, "EC PRIVATE KEY", keyDER, 0o600}, {ServerFile, "CERTIFICATE", der, 0o644},
	} {
		if err := os.WriteFile(filepath.Join(dir, f.name), pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.b}), f.mode); err != nil {
			return false, fmt.Errorf("tls init: %w", err)
		}
	}
	return true, nil
}

// serial is a random certificate serial number of 126 bits.
func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126)) }

// newCA makes the CA certificate, valid from now for validity, and its
// key; der is the certificate's DER bytes.
func newCA(now time.Time, validity time.Duration) (ca *x509.Certificate, key *ecdsa.PrivateKey, der []byte, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: "convlog deployment CA"},
		NotBefore: now, NotAfter: now.Add(validity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return ca, key, der, nil
}

// newLeaf makes the certificate of hosts signed by ca, for server and
// client authentication, and its key; der is the certificate's DER bytes.
func newLeaf(now time.Time, validity time.Duration, hosts []string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (key *ecdsa.PrivateKey, der []byte, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now, NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	return key, der, nil
}

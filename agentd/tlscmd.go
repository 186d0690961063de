package main

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
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// TLS file names `agentd tls init` writes in its directory.
const (
	tlsCAFile        = "ca.pem"
	tlsCAKeyFile     = "ca-key.pem"
	tlsServerFile    = "server.pem"
	tlsServerKeyFile = "server-key.pem"
)

func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tls", Short: "TLS certificates for a deployment (the NATS cluster's client and route listeners, the HTTP API)",
		Example: `  agentd tls init --dir ./tls --hosts n1,n2,n3,localhost,127.0.0.1`}
	var dir, hosts string
	var days int
	initCmd := &cobra.Command{Use: "init", Short: "Create a CA and a certificate for the given hosts in --dir, unless they exist",
		Long: `init writes, in --dir, a private CA (ca.pem, ca-key.pem) and one certificate signed by it
(server.pem, server-key.pem; ECDSA P-256) valid for every name and address of --hosts, for both
server and client authentication, so that the same files serve the NATS client listener, the
cluster routes (mutual TLS) and the HTTP API. Clients trust ca.pem (agentd --tls-ca). Files
that exist are kept: running it again (a compose init step) changes nothing. docker-compose.yml
runs it once into the tls volume.`,
		Example: `  agentd tls init --dir ./tls --hosts n1,n2,n3,localhost,127.0.0.1
  agentd tls init --dir ./tls --hosts api.example.com --days 365`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			names := strings.FieldsFunc(hosts, func(r rune) bool { return r == ',' || r == ' ' })
			if len(names) == 0 {
				return usageError{errors.New("--hosts is required: the names and addresses the certificate is for")}
			}
			created, err := tlsInit(dir, names, time.Duration(days)*24*time.Hour)
			if err != nil {
				return err
			}
			if created {
				fmt.Fprintf(cmd.OutOrStdout(), "created %s, %s and %s in %s for %s\n", tlsCAFile, tlsServerFile, tlsServerKeyFile, dir, strings.Join(names, ", "))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "kept the certificates in %s\n", dir)
			}
			return nil
		}}
	initCmd.Flags().StringVar(&dir, "dir", "", "directory of the files (created if missing)")
	initCmd.Flags().StringVar(&hosts, "hosts", "", "comma-separated DNS names and IP addresses of the certificate")
	initCmd.Flags().IntVar(&days, "days", 825, "validity in days")
	cmd.AddCommand(initCmd)
	return cmd
}

// tlsInit creates the CA and the certificate of hosts in dir unless
// server.pem exists there; it reports whether it created them. The keys
// are written with mode 0600, readable by the files' owner only; the
// certificates 0644.
func tlsInit(dir string, hosts []string, validity time.Duration) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, tlsServerFile)); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, err
	}
	serial := func() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126)) }
	sn, err := serial()
	if err != nil {
		return false, err
	}
	caTmpl := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: "convlog deployment CA"},
		NotBefore: now, NotAfter: now.Add(validity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return false, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, err
	}
	if sn, err = serial(); err != nil {
		return false, err
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return false, err
	}
	write := func(name, typ string, b []byte, mode os.FileMode) error {
		return os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), mode)
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return false, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return false, err
	}
	// server.pem last: its presence says the set is complete.
	for _, f := range []struct {
		name, typ string
		b         []byte
		mode      os.FileMode
	}{
		{tlsCAFile, "CERTIFICATE", caDER, 0o644}, {tlsCAKeyFile, "EC PRIVATE KEY", caKeyDER, 0o600},
		{tlsServerKeyFile, "EC PRIVATE KEY", keyDER, 0o600}, {tlsServerFile, "CERTIFICATE", der, 0o644},
	} {
		if err := write(f.name, f.typ, f.b, f.mode); err != nil {
			return false, fmt.Errorf("tls init: %w", err)
		}
	}
	return true, nil
}

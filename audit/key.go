package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadOrCreateKey reads the Ed25519 signing key at path (PEM "PRIVATE
// KEY", PKCS#8, as `openssl genpkey -algorithm ed25519` writes it), or, when
// the file does not exist, generates one and writes it there (mode 0600,
// its directory created 0700). created says which. A key file readable by
// group or others is refused with the chmod that fixes it; a file that is
// not an Ed25519 PKCS#8 key is an error naming the path.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, false, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return nil, false, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, false, fmt.Errorf("audit: key directory: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, false, fmt.Errorf("audit: create key %s: %w", path, err)
		}
		if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
			f.Close()
			return nil, false, fmt.Errorf("audit: write key %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, false, err
		}
		return priv, true, f.Close()
	}
	if err != nil {
		return nil, false, fmt.Errorf("audit: read key: %w", err)
	}
	key, err = parseKeyFile(path, b)
	return key, false, err
}

// LoadKey reads the signing key at path as LoadOrCreateKey does, without
// creating one: a missing file is an error wrapping fs.ErrNotExist.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: read key: %w", err)
	}
	return parseKeyFile(path, b)
}

func parseKeyFile(path string, b []byte) (ed25519.PrivateKey, error) {
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("audit: signing key %s is readable by others (mode %s): chmod 600 %s", path, st.Mode().Perm(), path)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("audit: %s is not a PEM \"PRIVATE KEY\" file", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit: %s holds a %T key, not Ed25519", path, k)
	}
	return priv, nil
}

// ParsePublicKey reads a public key given as standard base64 of its 32
// bytes (what HeaderKey, GET /v1/audit/key and agentd print) or as PEM
// "PUBLIC KEY" (PKIX) text. It returns an error naming what it got.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if blk, _ := pem.Decode([]byte(s)); blk != nil {
		if blk.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("audit: a PEM %q block is not a public key", blk.Type)
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("audit: public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("audit: the public key is %T, not Ed25519", k)
		}
		return pub, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("audit: %q is neither base64 of a 32-byte Ed25519 public key nor PEM", s)
	}
	return ed25519.PublicKey(b), nil
}

// PublicKeyString is the standard base64 of pub's 32 bytes.
func PublicKeyString(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// PublicKeyPEM is pub as PEM "PUBLIC KEY" (PKIX) text, for tools such as
// openssl.
func PublicKeyPEM(pub ed25519.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(pub) // cannot fail for an Ed25519 key
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

package operator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

// The files of an operator directory, relative to it. Seeds and creds are
// secret (mode 0600), the rest public (mode 0644).
const (
	JWTFile           = "operator.jwt"        // public: the operator
	SigningFile       = "operator-signing.nk" // secret: signs accounts
	SysJWTFile        = "sys.jwt"             // public: the system account
	SysCredsFile      = "sys.creds"           // secret: pushes account JWTs
	ConvlogJWTFile    = "convlog.jwt"         // public: convlog's account
	ConvlogCredsFile  = "convlog.creds"       // agentd's user of convlog's account
	TenantSigningFile = "tenant-signing.nk"   // secret: signs tenant users
	ServerConfFile    = "nats-operator.conf"  // public: the servers' fragment
	AccountsDir       = "accounts"            // public: <tenant>.jwt, the tenant accounts
)

// DefaultResolverDir is the full resolver's directory that [Init] writes
// into the servers' fragment when the caller gives none of its own.
const DefaultResolverDir = "/data/jwt"

// Dir is the path of an operator directory. Its methods are not safe for
// concurrent use on one directory (by goroutines or by processes).
type Dir string

// Path returns the path of name (one of the file constants, or a path
// under [AccountsDir]) in d.
func (d Dir) Path(name string) string { return filepath.Join(string(d), name) }

// Init writes a new operator named name into d (created with mode 0700)
// and reports true, or reports false when d already holds one (nothing
// is changed). res gives the tenant subjects CONVLOG exports; resolverDir
// is the full resolver's directory in the servers' fragment. Errors are
// tenancy's (keys, claims) and the file system's.
func Init(d Dir, name, resolverDir string, res provision.Config) (bool, error) {
	if _, err := os.Stat(d.Path(JWTFile)); err == nil {
		return false, nil
	}
	setup, err := tenancy.NewOperatorSetup(name, res)
	if err != nil {
		return false, err
	}
	conf, err := tenancy.OperatorServerConf(setup.OperatorJWT, setup.SystemAccountJWT, setup.ConvlogAccountJWT, resolverDir)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(d.Path(AccountsDir), 0o700); err != nil {
		return false, err
	}
	// The operator JWT last: its presence says the directory is complete.
	for _, w := range []struct {
		name   string
		data   []byte
		secret bool
	}{
		{SigningFile, setup.OperatorSigningSeed, true},
		{TenantSigningFile, setup.TenantSigningSeed, true},
		{SysCredsFile, setup.SystemUserCreds, true},
		{ConvlogCredsFile, setup.ConvlogUserCreds, true},
		{SysJWTFile, []byte(setup.SystemAccountJWT), false},
		{ConvlogJWTFile, []byte(setup.ConvlogAccountJWT), false},
		{ServerConfFile, []byte(conf), false},
		{JWTFile, []byte(setup.OperatorJWT), false},
	} {
		mode := os.FileMode(0o644)
		if w.secret {
			mode = 0o600
		}
		if err := writeFileAtomic(d.Path(w.name), w.data, mode); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (d Dir) read(name string) (string, error) {
	b, err := os.ReadFile(d.Path(name))
	if err != nil {
		return "", fmt.Errorf("operator directory: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// seed returns the key pair of the seed file name.
func (d Dir) seed(name string) (nkeys.KeyPair, error) {
	s, err := d.read(name)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.FromSeed([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Path(name), err)
	}
	return kp, nil
}

// ServerConf returns the nats-server configuration fragment of d's
// operator with a full resolver in resolverDir. Errors are the file
// system's (d holds no operator) and tenancy's.
func (d Dir) ServerConf(resolverDir string) (string, error) {
	var jwts [3]string
	for i, name := range []string{JWTFile, SysJWTFile, ConvlogJWTFile} {
		var err error
		if jwts[i], err = d.read(name); err != nil {
			return "", err
		}
	}
	return tenancy.OperatorServerConf(jwts[0], jwts[1], jwts[2], resolverDir)
}

// Account returns the claims of tenant's account as last pushed. An error
// that wraps fs.ErrNotExist says the tenant has no account yet; a tenant
// id that events.ValidateTenant refuses returns its *events.IDError.
func (d Dir) Account(tenant string) (*jwt.AccountClaims, error) {
	if err := events.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	s, err := d.read(accountFile(tenant))
	if err != nil {
		return nil, fmt.Errorf("tenant %s has no account (agentd operator tenant-create makes it): %w", tenant, err)
	}
	ac, err := jwt.DecodeAccountClaims(s)
	if err != nil {
		return nil, fmt.Errorf("account of tenant %s: %w", tenant, err)
	}
	if tenancy.TenantOf(ac) != tenant {
		return nil, fmt.Errorf("account of tenant %s: the file holds account %q", tenant, ac.Name)
	}
	return ac, nil
}

func accountFile(tenant string) string { return filepath.Join(AccountsDir, tenant+".jwt") }

// TenantAccount returns tenant's account claims for res (its partitions
// and subjects): its account key and revocations kept, or a new account
// key for a new tenant. Nothing is written. A tenant id that
// events.ValidateTenant refuses returns its *events.IDError.
func (d Dir) TenantAccount(tenant string, res provision.Config) (*jwt.AccountClaims, error) {
	convlogJWT, err := d.read(ConvlogJWTFile)
	if err != nil {
		return nil, err
	}
	convlog, err := jwt.DecodeAccountClaims(convlogJWT)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Path(ConvlogJWTFile), err)
	}
	signer, err := d.seed(TenantSigningFile)
	if err != nil {
		return nil, err
	}
	signerPub, err := signer.PublicKey()
	if err != nil {
		return nil, err
	}
	accountPub, revocations, err := d.accountKey(tenant)
	if err != nil {
		return nil, err
	}
	ac, err := tenancy.TenantAccountClaims(tenant, accountPub, convlog.Subject, signerPub, res, false)
	if err != nil {
		return nil, err
	}
	ac.Revocations = revocations
	return ac, nil
}

// accountKey returns the account key and revocations of tenant's
// account, or a new account key and none for a new tenant.
func (d Dir) accountKey(tenant string) (string, jwt.RevocationList, error) {
	old, err := d.Account(tenant)
	switch {
	case err == nil:
		return old.Subject, old.Revocations, nil
	case errors.Is(err, fs.ErrNotExist):
		kp, err := nkeys.CreateAccount()
		if err != nil {
			return "", nil, err
		}
		pub, err := kp.PublicKey()
		return pub, nil, err
	default:
		return "", nil, err
	}
}

// SignAccount signs ac with the operator's signing key, keeps the JWT as
// tenant's account file and returns it, for a [Pusher].
func (d Dir) SignAccount(tenant string, ac *jwt.AccountClaims) (string, error) {
	signer, err := d.seed(SigningFile)
	if err != nil {
		return "", err
	}
	accountJWT, err := ac.Encode(signer)
	if err != nil {
		return "", fmt.Errorf("sign the account of %s: %w", tenant, err)
	}
	if err := writeFileAtomic(d.Path(accountFile(tenant)), []byte(accountJWT), 0o644); err != nil {
		return "", err
	}
	return accountJWT, nil
}

// writeFileAtomic writes data to path with mode through a temporary file
// in its directory and a rename.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if err := tmp.Chmod(mode); werr == nil {
		werr = err
	}
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return os.Rename(tmp.Name(), path)
}

package tenancy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
)

// Operator mode is the tenant accounts of [AccountsConf] as NATS JWTs, for
// servers that trust an operator and read accounts from a full resolver
// (nats-server's "resolver: { type: full }"), which a cluster replicates
// on its own. Who holds what:
//
//   - the operator's signing key signs every account JWT;
//   - the system account's user pushes account JWTs to the resolver
//     ([PushAccountJWT]);
//   - ConvlogAccount holds JetStream and exports what [ExportsFor] gives;
//     agentd connects as its user;
//   - each tenant account imports exactly its tenant's subjects
//     ([TenantAccountClaims]) and lists the tenant-user signing key as a
//     scoped signer: every user that key signs has [For]'s allow lists,
//     whatever its own JWT says;
//   - a revoked user is in its account's revocations ([jwt.AccountClaims]
//     RevokeAt), pushed like any account change.

// OperatorSetup is a new operator with its system account and
// ConvlogAccount ([NewOperatorSetup]). The seeds and creds are secrets;
// only ConvlogUserCreds goes to agentd.
type OperatorSetup struct {
	// OperatorJWT is the operator's claims: its name, its signing key,
	// the system account. The identity key's seed is not kept, so only
	// the signing key signs accounts.
	OperatorJWT string
	// OperatorSigningSeed is the seed of the key that signs account JWTs.
	OperatorSigningSeed []byte
	// SystemAccountJWT is the system account ("SYS").
	SystemAccountJWT string
	// SystemUserCreds are the creds (JWT and seed) of a system account
	// user: the one that pushes account JWTs.
	SystemUserCreds []byte
	// ConvlogAccountJWT is [ConvlogAccountClaims] signed by the operator.
	ConvlogAccountJWT string
	// ConvlogUserCreds are the creds of agentd's user of ConvlogAccount
	// (every permission).
	ConvlogUserCreds []byte
	// TenantSigningSeed is the seed of the account signing key that signs
	// tenant users ([TenantUserCreds]); every tenant account lists it as
	// a scoped signer.
	TenantSigningSeed []byte
}

// NewOperatorSetup creates an operator named name, its system account,
// ConvlogAccount with the exports of res (defaults filled in;
// res.Partitions is the deployment's K) and a user of each, and the
// tenant-user signing key. Every key is new. The account identity seeds
// are not kept: the system and ConvlogAccount users are signed by them
// here, once; accounts are re-signed by the operator's signing key and
// tenant users by the tenant-user signing key.
func NewOperatorSetup(name string, res provision.Config) (*OperatorSetup, error) {
	var s OperatorSetup
	opKey, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	opSigner, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	if s.OperatorSigningSeed, err = opSigner.Seed(); err != nil {
		return nil, err
	}
	sysJWT, sysCreds, sysPub, err := accountWithUser("SYS", opSigner, nil)
	if err != nil {
		return nil, err
	}
	s.SystemAccountJWT, s.SystemUserCreds = sysJWT, sysCreds
	convlogJWT, convlogCreds, _, err := accountWithUser(ConvlogAccount, opSigner, func(pub string) (*jwt.AccountClaims, error) {
		return ConvlogAccountClaims(pub, res)
	})
	if err != nil {
		return nil, err
	}
	s.ConvlogAccountJWT, s.ConvlogUserCreds = convlogJWT, convlogCreds
	tenantSigner, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	if s.TenantSigningSeed, err = tenantSigner.Seed(); err != nil {
		return nil, err
	}
	opPub, _ := opKey.PublicKey()
	opSignerPub, _ := opSigner.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = name
	oc.SystemAccount = sysPub
	oc.SigningKeys.Add(opSignerPub)
	if s.OperatorJWT, err = oc.Encode(opKey); err != nil {
		return nil, fmt.Errorf("tenancy: sign operator: %w", err)
	}
	return &s, nil
}

// accountWithUser makes a new account named name (claims from makeClaims,
// nil for bare claims) signed by signer, and a user of it signed by the
// account's identity key; it returns the account JWT, the user's creds and
// the account's public key.
func accountWithUser(name string, signer nkeys.KeyPair, makeClaims func(pub string) (*jwt.AccountClaims, error)) (string, []byte, string, error) {
	acc, err := nkeys.CreateAccount()
	if err != nil {
		return "", nil, "", err
	}
	pub, _ := acc.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	if makeClaims != nil {
		if ac, err = makeClaims(pub); err != nil {
			return "", nil, "", err
		}
	}
	ac.Name = name
	accJWT, err := ac.Encode(signer)
	if err != nil {
		return "", nil, "", fmt.Errorf("tenancy: sign account %s: %w", name, err)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return "", nil, "", err
	}
	userPub, _ := user.PublicKey()
	userSeed, _ := user.Seed()
	uc := jwt.NewUserClaims(userPub)
	uc.Name = strings.ToLower(name)
	userJWT, err := uc.Encode(acc)
	if err != nil {
		return "", nil, "", fmt.Errorf("tenancy: sign user of %s: %w", name, err)
	}
	creds, err := jwt.FormatUserConfig(userJWT, userSeed)
	if err != nil {
		return "", nil, "", err
	}
	return accJWT, creds, pub, nil
}

// ConvlogAccountClaims returns the claims of ConvlogAccount for the
// account key accountPub: JetStream with no limits (set
// Limits.JetStreamLimits before signing to cap it), the services of
// [ExportsFor] res (each answered once: jwt.ResponseTypeSingleton) and its
// streams. Exports are public: only the operator signs accounts, so only
// the tenant accounts it makes import them. It returns an error for a
// key that is not a public account key.
func ConvlogAccountClaims(accountPub string, res provision.Config) (*jwt.AccountClaims, error) {
	if !nkeys.IsValidPublicAccountKey(accountPub) {
		return nil, fmt.Errorf("tenancy: %q is not a public account key", accountPub)
	}
	ac := jwt.NewAccountClaims(accountPub)
	ac.Name = ConvlogAccount
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
		MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit, MaxAckPending: jwt.NoLimit,
	}
	ex := ExportsFor(res)
	for _, s := range ex.Services {
		ac.Exports.Add(&jwt.Export{Name: s, Subject: jwt.Subject(s), Type: jwt.Service, ResponseType: jwt.ResponseTypeSingleton})
	}
	for _, s := range ex.Streams {
		ac.Exports.Add(&jwt.Export{Name: s, Subject: jwt.Subject(s), Type: jwt.Stream})
	}
	return ac, validateClaims(ac)
}

// TenantAccountClaims returns the claims of tenant's account
// ([AccountName]) for the account key accountPub: no JetStream; the
// publish subjects of [For] (of [ForReadOnly] when readOnly: no append)
// imported as services from the account convlogAccountPub, its subscribe
// subjects but the inbox imported as streams; and signingKeyPub, the
// tenant-user signing key, as a scoped signer (jwt.UserScope, role
// "tenant") whose template is those allow lists, so a user it signs may
// publish and subscribe to nothing else. Errors: an *events.IDError for a
// bad tenant id, an error for keys that are not public account keys.
func TenantAccountClaims(tenant, accountPub, convlogAccountPub, signingKeyPub string, res provision.Config, readOnly bool) (*jwt.AccountClaims, error) {
	perms := For
	if readOnly {
		perms = ForReadOnly
	}
	p, err := perms(res, tenant)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{accountPub, convlogAccountPub, signingKeyPub} {
		if !nkeys.IsValidPublicAccountKey(k) {
			return nil, fmt.Errorf("tenancy: %q is not a public account key", k)
		}
	}
	ac := jwt.NewAccountClaims(accountPub)
	ac.Name = AccountName(tenant)
	for _, s := range p.Publish {
		ac.Imports.Add(&jwt.Import{Name: s, Subject: jwt.Subject(s), Account: convlogAccountPub, Type: jwt.Service})
	}
	for _, s := range streamImports(p, tenant) {
		ac.Imports.Add(&jwt.Import{Name: s, Subject: jwt.Subject(s), Account: convlogAccountPub, Type: jwt.Stream})
	}
	scope := jwt.NewUserScope()
	scope.Key = signingKeyPub
	scope.Role = "tenant"
	scope.Description = "users of tenant " + tenant
	scope.Template.Pub.Allow = p.Publish
	scope.Template.Sub.Allow = p.Subscribe
	ac.SigningKeys.AddScopedSigner(scope)
	return ac, validateClaims(ac)
}

// TenantOf returns the tenant whose account ac is ([AccountName]), or ""
// for another account.
func TenantOf(ac *jwt.AccountClaims) string {
	t, ok := strings.CutPrefix(ac.Name, AccountName(""))
	if !ok || events.ValidateTenant(t) != nil {
		return ""
	}
	return t
}

// TenantUserCreds returns the creds file (jwt.FormatUserConfig: the user
// JWT and the NKey seed) of the user whose seed is userSeed in the account
// accountPub, signed by signer, the account's scoped tenant-user signing
// key: the JWT carries no permissions (the scope's template gives them).
// name labels the user. Store the result like a password (0600).
func TenantUserCreds(accountPub string, signer nkeys.KeyPair, userSeed []byte, name string) ([]byte, error) {
	user, err := nkeys.FromSeed(userSeed)
	if err != nil {
		return nil, fmt.Errorf("tenancy: user seed: %w", err)
	}
	userPub, err := user.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(userPub) {
		return nil, fmt.Errorf("tenancy: the seed is not a user NKey seed")
	}
	uc := jwt.NewUserClaims(userPub)
	uc.Name = name
	uc.IssuerAccount = accountPub
	uc.SetScoped(true)
	userJWT, err := uc.Encode(signer)
	if err != nil {
		return nil, fmt.Errorf("tenancy: sign user %s: %w", userPub, err)
	}
	return jwt.FormatUserConfig(userJWT, userSeed)
}

// validateClaims returns the claims' blocking validation issues, if any.
func validateClaims(c jwt.Claims) error {
	var vr jwt.ValidationResults
	c.Validate(&vr)
	if errs := vr.Errors(); len(errs) > 0 {
		return fmt.Errorf("tenancy: invalid claims: %w", errors.Join(errs...))
	}
	return nil
}

// OperatorServerConf returns the nats-server configuration fragment that
// makes a server trust the operator of operatorJWT: "operator",
// "system_account", a full resolver storing account JWTs in resolverDir
// (a directory of the server's own; relative paths are the server
// process's working directory's) and "resolver_preload" of the system
// account and ConvlogAccount, so a new server knows them before any push.
// Every node of a cluster includes it with a resolver directory of its
// own. The JWTs are public. It returns an error for a JWT that does not
// decode.
func OperatorServerConf(operatorJWT, systemAccountJWT, convlogAccountJWT, resolverDir string) (string, error) {
	oc, err := jwt.DecodeOperatorClaims(operatorJWT)
	if err != nil {
		return "", fmt.Errorf("tenancy: operator JWT: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "operator: %q\nsystem_account: %s\n", operatorJWT, oc.SystemAccount)
	fmt.Fprintf(&b, "resolver: {\n  type: full\n  dir: %q\n  allow_delete: false\n  interval: \"2m\"\n  timeout: \"5s\"\n}\nresolver_preload: {\n", resolverDir)
	for _, j := range []string{systemAccountJWT, convlogAccountJWT} {
		ac, err := jwt.DecodeAccountClaims(j)
		if err != nil {
			return "", fmt.Errorf("tenancy: account JWT: %w", err)
		}
		fmt.Fprintf(&b, "  %s: %q\n", ac.Subject, j)
	}
	b.WriteString("}\n")
	return b.String(), nil
}

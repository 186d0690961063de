package tenancy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/convlog/convlog/internal/provision"
)

// ConvlogAccount is the name of convlog's own account in [AccountsConf]:
// the account of agentd's users, of JetStream (every stream and bucket of
// the deployment) and of the tenant service. An embedded server runs it as
// its global account (package embedded).
const ConvlogAccount = "CONVLOG"

// ReplyPrefix is the prefix of the reply subjects nats-server gives a
// request that crosses from an importing account into the exporting one
// ("_R_.", nats-server's service import responses): the answer published
// there is routed back into the importing account, to the reply subject
// the requester named there.
const ReplyPrefix = "_R_."

// AccountName is the account of tenant's users in [AccountsConf]:
// "convlog_tenant_<tenant>". tenant must be a valid tenant id.
func AccountName(tenant string) string { return "convlog_tenant_" + tenant }

// Exports are what [ConvlogAccount] exports to the tenant accounts: the
// service subjects a tenant's requests and publishes go to (appends,
// deltas, direct gets, the tenant service) and the stream subjects whose
// messages are delivered to a tenant's subscriptions (live events and
// deltas). Each is the tenant's subject with "*" in place of the tenant;
// a tenant account imports only the subjects of its own tenant ([For]),
// and only agentd writes account configurations, so public exports
// reach no one else.
type Exports struct {
	Services, Streams []string
}

// ExportsFor returns the exports of res's resources (defaults filled in;
// res.Partitions is the deployment's K).
func ExportsFor(res provision.Config) Exports {
	p := forToken(res.WithDefaults(), "*", true)
	return Exports{Services: p.Publish, Streams: streamImports(p, "*")}
}

// streamImports are p's subscribe subjects less tenant's inbox.
func streamImports(p Permissions, tenant string) []string {
	return slices.DeleteFunc(slices.Clone(p.Subscribe), func(s string) bool { return s == InboxPrefix(tenant)+".>" })
}

// AccountsConfig is what [AccountsConf] writes.
type AccountsConfig struct {
	// Resources names the streams and buckets (defaults filled in);
	// Resources.Partitions is the deployment's K (0 counts as 1).
	Resources provision.Config
	// Users are the tenant-scoped users (the registry's, [Registry.List]).
	// A tenant without users gets no account.
	Users []User
	// ReadOnly names the tenants whose users may not append (over their
	// storage quota, package quota): [ForReadOnly] and no import of the
	// append subjects.
	ReadOnly map[string]bool
	// ConvlogUsers are public NKeys of users of ConvlogAccount (agentd's
	// own, with every permission); none for an embedded server, which adds
	// its own.
	ConvlogUsers []string
}

// AccountsConf returns the "accounts { … }" block of a nats-server
// configuration (nats-server's configuration syntax) that isolates
// tenants: ConvlogAccount with JetStream, cfg.ConvlogUsers and the
// [ExportsFor] the deployment; one account per tenant that has users
// ([AccountName]), holding its users with the permissions [For] gives
// (or [ForReadOnly]) and importing exactly those subjects from
// ConvlogAccount. A tenant account has no JetStream of its own.
//
// Why accounts: NATS never checks the reply subject a client sets, and
// nats-server (a publish acknowledgement, a direct get) and services
// answer there with their own rights; inside one account a tenant could
// aim those answers at another tenant's subjects, a KV key or the
// JetStream API. An answer to a request that crossed an import goes back
// through the import into the requester's account, so whatever reply
// subject a tenant names, the answer lands in its own account, where
// nothing but its own imports and subscriptions are.
//
// The output is deterministic (users in cfg.Users' order). Errors: an
// *events.IDError naming a bad tenant id, or a user whose key is not a
// public user NKey.
func AccountsConf(cfg AccountsConfig) (string, error) {
	res := cfg.Resources.WithDefaults()
	var b strings.Builder
	b.WriteString("accounts {\n")
	ex := ExportsFor(res)
	fmt.Fprintf(&b, "  %s: {\n    jetstream: enabled\n    users: [", ConvlogAccount)
	for i, k := range cfg.ConvlogUsers {
		if !isUserKey(k) {
			return "", fmt.Errorf("tenancy: convlog user %d: %q is not a public user NKey", i, k)
		}
		fmt.Fprintf(&b, "\n      { nkey: %q }", k)
	}
	b.WriteString("\n    ]\n    exports: [")
	for _, s := range ex.Services {
		fmt.Fprintf(&b, "\n      { service: %q }", s)
	}
	for _, s := range ex.Streams {
		fmt.Fprintf(&b, "\n      { stream: %q }", s)
	}
	b.WriteString("\n    ]\n  }\n")
	var tenants []string
	byTenant := map[string][]User{}
	for _, u := range cfg.Users {
		if _, ok := byTenant[u.Tenant]; !ok {
			tenants = append(tenants, u.Tenant)
		}
		byTenant[u.Tenant] = append(byTenant[u.Tenant], u)
	}
	for _, tenant := range tenants {
		perms := For
		if cfg.ReadOnly[tenant] {
			perms = ForReadOnly
		}
		p, err := perms(res, tenant)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "  %s: {\n    users: [", AccountName(tenant))
		for _, u := range byTenant[tenant] {
			if !isUserKey(u.PublicKey) {
				return "", fmt.Errorf("tenancy: user of %s: %q is not a public user NKey", tenant, u.PublicKey)
			}
			fmt.Fprintf(&b, "\n      %s", strings.TrimSuffix(p.ServerConf(u.PublicKey), "\n"))
		}
		b.WriteString("\n    ]\n    imports: [")
		for _, s := range p.Publish {
			fmt.Fprintf(&b, "\n      { service: { account: %s, subject: %q } }", ConvlogAccount, s)
		}
		for _, s := range streamImports(p, tenant) {
			fmt.Fprintf(&b, "\n      { stream: { account: %s, subject: %q } }", ConvlogAccount, s)
		}
		b.WriteString("\n    ]\n  }\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// replyAllowed reports whether the tenant service may answer a request of
// tenant to reply: a subject under the tenant's inbox prefix, or one
// nats-server made for a request that crossed an import ([ReplyPrefix]),
// whose answer it routes back into the requester's account.
func replyAllowed(tenant, reply string) bool {
	return strings.HasPrefix(reply, InboxPrefix(tenant)+".") || strings.HasPrefix(reply, ReplyPrefix)
}

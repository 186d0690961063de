package tenancy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

func accountKey(t *testing.T) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	require.NoError(t, err)
	pub, _ := kp.PublicKey()
	return kp, pub
}

func TestConvlogAccountClaimsExportWhatTenantsImport(t *testing.T) {
	res := provision.DefaultConfig()
	res.Partitions = 3
	_, pub := accountKey(t)
	ac, err := tenancy.ConvlogAccountClaims(pub, res)
	require.NoError(t, err)
	require.True(t, ac.Limits.IsJSEnabled(), "JetStream is enabled")
	ex := tenancy.ExportsFor(res)
	var services, streams []string
	for _, e := range ac.Exports {
		require.False(t, e.TokenReq)
		if e.IsService() {
			require.Equal(t, jwt.ResponseType(jwt.ResponseTypeSingleton), e.ResponseType, "%s", e.Subject)
			services = append(services, string(e.Subject))
		} else {
			streams = append(streams, string(e.Subject))
		}
	}
	require.Equal(t, ex.Services, services)
	require.Equal(t, ex.Streams, streams)

	_, err = tenancy.ConvlogAccountClaims("UNOTANACCOUNT", res)
	require.Error(t, err)
}

func TestTenantAccountClaims(t *testing.T) {
	res := provision.DefaultConfig()
	_, accPub := accountKey(t)
	_, convlogPub := accountKey(t)
	_, signerPub := accountKey(t)
	cases := []struct {
		name     string
		readOnly bool
		perms    func(provision.Config, string) (tenancy.Permissions, error)
	}{
		{"a writing tenant imports For's publish subjects", false, tenancy.For},
		{"a read-only tenant imports no append subject", true, tenancy.ForReadOnly},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ac, err := tenancy.TenantAccountClaims("alpha", accPub, convlogPub, signerPub, res, c.readOnly)
			require.NoError(t, err)
			p, err := c.perms(res, "alpha")
			require.NoError(t, err)
			require.Equal(t, tenancy.AccountName("alpha"), ac.Name)
			require.Equal(t, "alpha", tenancy.TenantOf(ac))
			require.False(t, ac.Limits.IsJSEnabled(), "a tenant account has no JetStream")
			var services, streams []string
			for _, im := range ac.Imports {
				require.Equal(t, convlogPub, im.Account)
				if im.IsService() {
					services = append(services, string(im.Subject))
				} else {
					streams = append(streams, string(im.Subject))
				}
			}
			require.Equal(t, p.Publish, services)
			require.NotContains(t, streams, tenancy.InboxPrefix("alpha")+".>")
			require.Equal(t, slices.DeleteFunc(slices.Clone(p.Subscribe), func(s string) bool {
				return strings.HasPrefix(s, tenancy.InboxPrefix("alpha"))
			}), streams)
			scope, ok := ac.SigningKeys.GetScope(signerPub)
			require.True(t, ok)
			us, ok := scope.(*jwt.UserScope)
			require.True(t, ok, "a user scope")
			require.Equal(t, jwt.StringList(p.Publish), us.Template.Pub.Allow)
			require.Equal(t, jwt.StringList(p.Subscribe), us.Template.Sub.Allow)
			require.Empty(t, us.Template.Pub.Deny)
			if c.readOnly {
				require.NotContains(t, services, "conv.alpha.*")
			} else {
				require.Contains(t, services, "conv.alpha.*")
			}
		})
	}
	var idErr *events.IDError
	_, err := tenancy.TenantAccountClaims("no.dots", accPub, convlogPub, signerPub, res, false)
	require.ErrorAs(t, err, &idErr)
	_, err = tenancy.TenantAccountClaims("alpha", accPub, "UBAD", signerPub, res, false)
	require.Error(t, err)
}

func TestTenantUserCredsCarryNoPermissions(t *testing.T) {
	signer, _ := accountKey(t)
	_, accPub := accountKey(t)
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, _ := user.Seed()
	userPub, _ := user.PublicKey()
	creds, err := tenancy.TenantUserCreds(accPub, signer, seed, "svc")
	require.NoError(t, err)
	token, err := jwt.ParseDecoratedJWT(creds)
	require.NoError(t, err)
	uc, err := jwt.DecodeUserClaims(token)
	require.NoError(t, err)
	require.Equal(t, userPub, uc.Subject)
	require.Equal(t, accPub, uc.IssuerAccount)
	require.True(t, uc.HasEmptyPermissions(), "the scope's template gives the permissions")
	kp, err := jwt.ParseDecoratedUserNKey(creds)
	require.NoError(t, err)
	gotPub, _ := kp.PublicKey()
	require.Equal(t, userPub, gotPub)

	_, err = tenancy.TenantUserCreds(accPub, signer, []byte("SUNOTASEED"), "svc")
	require.Error(t, err)
}

// operatorServer is one nats-server in operator mode configured by
// OperatorServerConf, with JetStream, and the setup it trusts.
type operatorServer struct {
	srv   *server.Server
	setup *tenancy.OperatorSetup
	dir   string
}

func startOperatorServer(t *testing.T, res provision.Config) *operatorServer {
	t.Helper()
	setup, err := tenancy.NewOperatorSetup("test", res)
	require.NoError(t, err)
	dir := t.TempDir()
	frag, err := tenancy.OperatorServerConf(setup.OperatorJWT, setup.SystemAccountJWT, setup.ConvlogAccountJWT, filepath.Join(dir, "jwt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "operator.conf"), []byte(frag), 0o600))
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte("listen: 127.0.0.1:-1\njetstream { store_dir: \""+filepath.Join(dir, "js")+"\" }\ninclude 'operator.conf'\n"), 0o600))
	srv := startConfFile(t, conf)
	for name, creds := range map[string][]byte{"sys.creds": setup.SystemUserCreds, "convlog.creds": setup.ConvlogUserCreds} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), creds, 0o600))
	}
	return &operatorServer{srv: srv, setup: setup, dir: dir}
}

func (o *operatorServer) connect(t *testing.T, creds string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(o.srv.ClientURL(), append([]nats.Option{nats.UserCredentials(filepath.Join(o.dir, creds)), nats.MaxReconnects(0)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// TestOperatorModeIsolatesTenants runs one nats-server in operator mode:
// a tenant account pushed to its full resolver, a user signed by the
// scoped key reads its own thread's last message and nothing of another
// tenant's, a reply subject aimed at the stream's purge changes nothing,
// and the revoked user is disconnected and refused.
func TestOperatorModeIsolatesTenants(t *testing.T) {
	res := provision.DefaultConfig()
	o := startOperatorServer(t, res)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := client.New(ctx, o.connect(t, "convlog.creds"), client.Config{Provision: true, Resources: res})
	require.NoError(t, err)
	defer admin.Close()
	sys := o.connect(t, "sys.creds")

	convlog, err := jwt.DecodeAccountClaims(o.setup.ConvlogAccountJWT)
	require.NoError(t, err)
	opSigner, err := nkeys.FromSeed(o.setup.OperatorSigningSeed)
	require.NoError(t, err)
	tenantSigner, err := nkeys.FromSeed(o.setup.TenantSigningSeed)
	require.NoError(t, err)
	signerPub, _ := tenantSigner.PublicKey()
	_, accPub := accountKey(t)
	ac, err := tenancy.TenantAccountClaims("alpha", accPub, convlog.Subject, signerPub, res, false)
	require.NoError(t, err)
	accJWT, err := ac.Encode(opSigner)
	require.NoError(t, err)
	require.NoError(t, tenancy.PushAccountJWT(ctx, sys, accJWT))

	user, _ := nkeys.CreateUser()
	seed, _ := user.Seed()
	userPub, _ := user.PublicKey()
	creds, err := tenancy.TenantUserCreds(accPub, tenantSigner, seed, "alpha-svc")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(o.dir, "alpha.creds"), creds, 0o600))
	var mu sync.Mutex
	var asyncErrs []string
	closed := make(chan struct{})
	alpha := o.connect(t, "alpha.creds", nats.CustomInboxPrefix(tenancy.InboxPrefix("alpha")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			defer mu.Unlock()
			asyncErrs = append(asyncErrs, err.Error())
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))

	_, err = alpha.Request("conv.alpha.t1", []byte("alpha's"), 5*time.Second)
	require.NoError(t, err, "alpha appends through its service import")
	_, err = admin.JetStream().Conn().Request("conv.beta.b1", []byte("beta's"), 5*time.Second)
	require.NoError(t, err)
	m, err := alpha.Request("$JS.API.DIRECT.GET.CONVLOG.conv.alpha.t1", nil, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "alpha's", string(m.Data))
	_, err = alpha.Request("$JS.API.DIRECT.GET.CONVLOG.conv.beta.b1", nil, 500*time.Millisecond)
	require.Error(t, err, "beta's subject is not alpha's to read")

	stream, err := admin.JetStream().Stream(ctx, "CONVLOG")
	require.NoError(t, err)
	before, err := stream.Info(ctx)
	require.NoError(t, err)
	purge := nats.NewMsg("$JS.API.DIRECT.GET.CONVLOG.conv.alpha.t1")
	purge.Reply = "$JS.API.STREAM.PURGE.CONVLOG"
	require.NoError(t, alpha.PublishMsg(purge))
	require.NoError(t, alpha.Flush())
	// A round trip after the attack: its answer is sent after the purge's
	// would have been.
	_, err = alpha.Request("$JS.API.DIRECT.GET.CONVLOG.conv.alpha.t1", nil, 5*time.Second)
	require.NoError(t, err)
	after, err := stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, before.State.Msgs, after.State.Msgs, "CONVLOG was not purged")
	require.NoError(t, alpha.Publish("conv.beta.b1", []byte("x")))
	require.NoError(t, alpha.Flush())
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(asyncErrs, func(s string) bool { return strings.Contains(s, `Publish to "conv.beta.b1"`) })
	}, 5*time.Second, 20*time.Millisecond, "the server denies alpha beta's subject")
	last, err := admin.JetStream().Conn().Request("$JS.API.DIRECT.GET.CONVLOG.conv.beta.b1", nil, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "beta's", string(last.Data))

	ac.RevokeAt(userPub, time.Now())
	accJWT, err = ac.Encode(opSigner)
	require.NoError(t, err)
	require.NoError(t, tenancy.PushAccountJWT(ctx, sys, accJWT))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked user's connection is still open")
	}
	_, err = nats.Connect(o.srv.ClientURL(), nats.UserCredentials(filepath.Join(o.dir, "alpha.creds")), nats.MaxReconnects(0))
	require.Error(t, err, "a revoked user is refused")
}

func TestPushAccountJWTReportsARefusal(t *testing.T) {
	o := startOperatorServer(t, provision.DefaultConfig())
	sys := o.connect(t, "sys.creds")
	_, accPub := accountKey(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := tenancy.PushAccountJWT(ctx, sys, "not a JWT")
	var refused *tenancy.ClaimsUpdateError
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, refused.Description, "jwt update resulted in error")

	other, err := nkeys.CreateOperator()
	require.NoError(t, err)
	foreign, err := jwt.NewAccountClaims(accPub).Encode(other)
	require.NoError(t, err)
	convlog := o.connect(t, "convlog.creds")
	err = tenancy.PushAccountJWT(ctx, convlog, foreign)
	require.True(t, errors.Is(err, nats.ErrNoResponders), "a user of another account reaches no resolver: %v", err)
}

// startConfFile starts an embedded nats-server from the configuration
// file conf, shut down when t ends, and waits until it takes connections.
func startConfFile(t *testing.T, conf string) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	require.NoError(t, err)
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	srv.Start()
	t.Cleanup(srv.Shutdown)
	require.True(t, srv.ReadyForConnections(10*time.Second))
	return srv
}

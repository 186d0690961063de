package tenancy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

// operatorCluster is three nats-servers n1, n2, n3 in one cluster,
// trusting one operator; n1 and n2 have the full resolver of
// OperatorServerConf, n3 the resolver fragment thirdResolver returns for
// its directory ("" for the same full resolver).
type operatorCluster struct {
	servers []*server.Server
	setup   *tenancy.OperatorSetup
	dirs    []string
}

func startOperatorCluster(t *testing.T, thirdResolver func(setup *tenancy.OperatorSetup, dir string) string) *operatorCluster {
	t.Helper()
	setup, err := tenancy.NewOperatorSetup("test", provision.DefaultConfig())
	require.NoError(t, err)
	c := &operatorCluster{setup: setup}
	ports := []int{natstest.FreePort(t), natstest.FreePort(t), natstest.FreePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	for i, p := range ports {
		dir := t.TempDir()
		frag, err := tenancy.OperatorServerConf(setup.OperatorJWT, setup.SystemAccountJWT, setup.ConvlogAccountJWT, filepath.Join(dir, "jwt"))
		require.NoError(t, err)
		if i == 2 && thirdResolver != nil {
			frag = thirdResolver(setup, dir)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "operator.conf"), []byte(frag), 0o600))
		conf := filepath.Join(dir, "nats.conf")
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(
			"server_name: n%d\nlisten: 127.0.0.1:-1\ncluster { name: push, listen: 127.0.0.1:%d, routes: [%s] }\ninclude 'operator.conf'\n",
			i+1, p, strings.Join(routes, ", "))), 0o600))
		srv := startConfFile(t, conf)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sys.creds"), setup.SystemUserCreds, 0o600))
		c.servers = append(c.servers, srv)
		c.dirs = append(c.dirs, dir)
	}
	require.Eventually(t, func() bool {
		for _, s := range c.servers {
			if s.NumRoutes() < len(c.servers)-1 {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "the cluster's routes")
	return c
}

// sys connects to node i as the system account's user.
func (c *operatorCluster) sys(t *testing.T, i int) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.servers[i].ClientURL(), nats.UserCredentials(filepath.Join(c.dirs[i], "sys.creds")), nats.MaxReconnects(0))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// tenantJWT is a new tenant account's JWT signed by c's operator.
func (c *operatorCluster) tenantJWT(t *testing.T) (string, string) {
	t.Helper()
	opSigner, err := nkeys.FromSeed(c.setup.OperatorSigningSeed)
	require.NoError(t, err)
	_, accPub := accountKey(t)
	ac := jwt.NewAccountClaims(accPub)
	ac.Name = tenancy.AccountName("alpha")
	accJWT, err := ac.Encode(opSigner)
	require.NoError(t, err)
	return accJWT, accPub
}

// waitRouteInterest waits until every node sees the others' interest in
// the claims update subject, so a push reaches each resolver.
func (c *operatorCluster) waitRouteInterest(t *testing.T, nc *nats.Conn, wantAnswers int) {
	t.Helper()
	require.Eventually(t, func() bool {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return false
		}
		defer sub.Unsubscribe()
		if nc.PublishRequest("$SYS.REQ.SERVER.PING", inbox, nil) != nil {
			return false
		}
		for range wantAnswers {
			if _, err := sub.NextMsg(time.Second); err != nil {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "every node answers the system account's ping")
}

// TestPushAccountJWTReachesEveryServer pushes an account to a 3-node
// cluster through n1: each node's resolver holds it when the push
// returns.
func TestPushAccountJWTReachesEveryServer(t *testing.T) {
	c := startOperatorCluster(t, nil)
	sys := c.sys(t, 0)
	c.waitRouteInterest(t, sys, 3)
	accJWT, accPub := c.tenantJWT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, tenancy.PushAccountJWT(ctx, sys, accJWT))
	for i, dir := range c.dirs {
		got, err := os.ReadFile(filepath.Join(dir, "jwt", accPub+".jwt"))
		require.NoError(t, err, "n%d's resolver", i+1)
		require.Equal(t, accJWT, string(got), "n%d's resolver", i+1)
	}
}

// TestPushAccountJWTNamesTheServerThatRefused breaks n3's resolver
// directory: n1 and n2 store the account, n3 answers with an error, and
// the push returns n3's refusal whichever answer comes first.
func TestPushAccountJWTNamesTheServerThatRefused(t *testing.T) {
	c := startOperatorCluster(t, nil)
	sys := c.sys(t, 0)
	c.waitRouteInterest(t, sys, 3)
	jwtDir := filepath.Join(c.dirs[2], "jwt")
	require.NoError(t, os.RemoveAll(jwtDir))
	require.NoError(t, os.WriteFile(jwtDir, []byte("not a directory"), 0o600))
	accJWT, _ := c.tenantJWT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 5 { // the order of the answers varies
		err := tenancy.PushAccountJWT(ctx, sys, accJWT)
		var refused *tenancy.ClaimsUpdateError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, "n3", refused.Server)
		require.Contains(t, err.Error(), "n3")
	}
}

// TestPushAccountJWTNamesTheServerThatNeverAnswered runs n3 with a
// memory resolver: it answers the system account's ping but takes no
// account updates, like a node that never receives the push. The push
// retries until ctx ends and names n3.
func TestPushAccountJWTNamesTheServerThatNeverAnswered(t *testing.T) {
	c := startOperatorCluster(t, func(setup *tenancy.OperatorSetup, _ string) string {
		oc, err := jwt.DecodeOperatorClaims(setup.OperatorJWT)
		require.NoError(t, err)
		sysAcc, err := jwt.DecodeAccountClaims(setup.SystemAccountJWT)
		require.NoError(t, err)
		return fmt.Sprintf("operator: %q\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: { %s: %q }\n",
			setup.OperatorJWT, oc.SystemAccount, sysAcc.Subject, setup.SystemAccountJWT)
	})
	sys := c.sys(t, 0)
	c.waitRouteInterest(t, sys, 3)
	accJWT, _ := c.tenantJWT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	err := tenancy.PushAccountJWT(ctx, sys, accJWT)
	var unconfirmed *tenancy.UnconfirmedPushError
	require.ErrorAs(t, err, &unconfirmed)
	require.Equal(t, []string{"n3"}, unconfirmed.Servers)
	require.Equal(t, 2, unconfirmed.Confirmed)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Contains(t, err.Error(), "n3")
}

// TestPushAccountJWTAsksAgainWhoDidNotAnswer adds a server "ghost" beside
// a real one: it answers the system account's ping, ignores the first
// account update and confirms the next. The push confirms both.
func TestPushAccountJWTAsksAgainWhoDidNotAnswer(t *testing.T) {
	o := startOperatorServer(t, provision.DefaultConfig())
	ghost := o.connect(t, "sys.creds")
	_, err := ghost.Subscribe("$SYS.REQ.SERVER.PING", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"server":{"name":"ghost","id":"NGHOST"},"statsz":{}}`))
	})
	require.NoError(t, err)
	var updates atomic.Int32
	_, err = ghost.Subscribe("$SYS.REQ.CLAIMS.UPDATE", func(m *nats.Msg) {
		if updates.Add(1) > 1 {
			_ = m.Respond([]byte(`{"server":{"name":"ghost","id":"NGHOST"},"data":{"account":"A","code":200}}`))
		}
	})
	require.NoError(t, err)
	require.NoError(t, ghost.Flush())

	sys := o.connect(t, "sys.creds")
	opSigner, err := nkeys.FromSeed(o.setup.OperatorSigningSeed)
	require.NoError(t, err)
	_, accPub := accountKey(t)
	accJWT, err := jwt.NewAccountClaims(accPub).Encode(opSigner)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, tenancy.PushAccountJWT(ctx, sys, accJWT))
	require.Equal(t, int32(2), updates.Load(), "the ghost was asked again")
}

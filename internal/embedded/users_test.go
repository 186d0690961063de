package embedded_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/embedded"
)

// userAccount is an accounts block with the global account (JetStream,
// exporting "ok.>") and, when pub is set, an account of that user allowed
// to publish to "ok.>" only.
func userAccount(pub string) string {
	conf := "accounts {\n  CONVLOG: { jetstream: enabled, exports: [ { service: \"ok.>\" } ] }\n"
	if pub != "" {
		conf += `  other: { users: [ { nkey: "` + pub + `", permissions: { publish: { allow: ["ok.>"] }, subscribe: { allow: ["_INBOX.>"] } } } ]
    imports: [ { service: { account: CONVLOG, subject: "ok.>" } } ] }
`
	}
	return conf + "}\n"
}

// SetAccounts changes the accounts of a running server: a new user can
// connect and is held to its allow lists, a removed one is disconnected,
// and the admin's connections (in process and over TCP) stay, with the
// streams they made before accounts were set.
func TestSetAccountsKeepsTheAdminAndRevokesRemovedUsers(t *testing.T) {
	dir := t.TempDir()
	admin, _ := nkeys.CreateUser()
	seed, _ := admin.Seed()
	seedFile := filepath.Join(dir, "admin.nk")
	require.NoError(t, os.WriteFile(seedFile, seed, 0o600))
	s, err := embedded.Start(embedded.Config{StoreDir: filepath.Join(dir, "js"), NKeySeed: seedFile})
	require.NoError(t, err)
	t.Cleanup(s.Shutdown)
	inProc, err := s.Connect()
	require.NoError(t, err)
	defer inProc.Close()
	auth, err := nats.NkeyOptionFromSeed(seedFile)
	require.NoError(t, err)
	overTCP, err := nats.Connect(s.ClientURL(), auth, nats.MaxReconnects(0))
	require.NoError(t, err)
	defer overTCP.Close()

	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	connectUser := func() (*nats.Conn, error) {
		return nats.Connect(s.ClientURL(), nats.Nkey(pub, user.Sign), nats.MaxReconnects(0))
	}
	_, err = connectUser()
	require.Error(t, err, "an unknown user is refused")
	js, err := jetstream.New(inProc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "OK", Subjects: []string{"ok.>"}})
	require.NoError(t, err)
	require.NoError(t, s.SetAccounts(userAccount(pub)))
	nc, err := connectUser()
	require.NoError(t, err)
	defer nc.Close()
	denied := make(chan error, 1)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied <- err })
	require.NoError(t, nc.Publish("not.ok", nil))
	require.NoError(t, nc.Flush())
	select {
	case err := <-denied:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
	case <-time.After(2 * time.Second):
		t.Fatal("a publish outside the allow list was not denied")
	}
	// The user's publish crosses the import into the stream of the
	// global account, made before accounts were set.
	ack, err := nc.Request("ok.1", []byte("x"), 5*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(ack.Data), `"stream":"OK"`)
	require.Error(t, s.SetAccounts(`accounts { other: { users: [ { nkey: "not-a-key" } ] } }`), "a bad configuration is refused")
	require.Error(t, s.SetAccounts(`accounts { other: {} }`), "accounts without the global account are refused")
	require.True(t, nc.IsConnected(), "a refused change keeps the users")

	require.NoError(t, s.SetAccounts(userAccount("")))
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.True(t, inProc.IsConnected())
	require.True(t, overTCP.IsConnected())
	require.NoError(t, overTCP.Flush())
	info, err := js.Stream(ctx, "OK")
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.CachedInfo().State.Msgs)
}

package embedded_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/embedded"
)

// SetUsers changes the scoped users of a running server: a new user can
// connect and is held to its allow lists, a removed one is disconnected,
// and the admin's connections (in process and over TCP) stay.
func TestSetUsersKeepsTheAdminAndRevokesRemovedUsers(t *testing.T) {
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
	require.NoError(t, s.SetUsers([]embedded.User{{PublicKey: pub, Publish: []string{"ok.>"}, Subscribe: []string{"_INBOX.>"}}}))
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
	require.Error(t, s.SetUsers([]embedded.User{{PublicKey: "not-a-key"}}), "a bad key is refused")
	require.True(t, nc.IsConnected(), "a refused change keeps the users")

	require.NoError(t, s.SetUsers(nil))
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.True(t, inProc.IsConnected())
	require.True(t, overTCP.IsConnected())
	require.NoError(t, overTCP.Flush())
}

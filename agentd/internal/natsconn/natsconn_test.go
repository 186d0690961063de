package natsconn_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/convlog/convlog/agentd/internal/natsconn"
)

// Every connection and embedded server is closed when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Validate names every problem at once, by the flag that sets it.
func TestValidateReportsEveryProblem(t *testing.T) {
	c := natsconn.Config{Listen: "0.0.0.0:4222", TLSCert: "cert.pem", Partitions: -1}
	err := c.Validate()
	require.Error(t, err)
	for _, want := range []string{"--data-dir or --nats-url is required", "--replicas must be 1..5, got 0",
		"--partitions (env CONVLOG_PARTITIONS) must be 0..", "--tls-cert and --tls-key go together",
		`--nats-listen "0.0.0.0:4222" is not a loopback address`, "--tls-cert: stat cert.pem"} {
		require.Contains(t, err.Error(), want)
	}
	ok := natsconn.Config{DataDir: "d", Replicas: 1}
	require.NoError(t, ok.Validate())
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "127.1.2.3": true,
		"0.0.0.0": false, "10.0.0.1": false, "example.com": false, "": false} {
		require.Equal(t, want, natsconn.IsLoopback(host), host)
	}
}

// The serve role owns a data directory for its life: a second serve on it
// fails naming the owner, and an operator command connects to the
// owner's NATS instead of starting a second server on the same files.
func TestServeOwnsTheDataDirAndCommandsAttach(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := filepath.Join(t.TempDir(), "data")
	owner := natsconn.Config{DataDir: dir, Replicas: 1, Listen: "127.0.0.1:-1", CreateDataDir: true}
	cn, err := owner.Open(log, "owner", natsconn.RoleServe)
	require.NoError(t, err)
	defer cn.Close()
	require.NotNil(t, cn.Server, "the owner runs the embedded server")
	require.True(t, filepath.IsAbs(owner.DataDir))

	second := natsconn.Config{DataDir: dir, Replicas: 1, Listen: "127.0.0.1:-1"}
	_, err = second.Open(log, "second", natsconn.RoleServe)
	require.Error(t, err)
	require.Contains(t, err.Error(), "stop it first")

	cmd := natsconn.Config{DataDir: dir, Replicas: 1}
	cc, err := cmd.Open(log, "command", natsconn.RoleCommand)
	require.NoError(t, err)
	defer cc.Close()
	require.Nil(t, cc.Server, "no second server on the same files")
	require.Equal(t, os.Getpid(), cc.OwnerPID)
	require.NoError(t, cc.NC.Flush())
}

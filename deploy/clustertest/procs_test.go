package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// binaries are built once per test binary run, into a directory TestMain
// removes.
var binaries struct {
	once              sync.Once
	dir               string
	natsServer, agent string
	err               error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binaries.dir != "" {
		_ = os.RemoveAll(binaries.dir)
	}
	os.Exit(code)
}

// moduleRoot is the directory of the repository's go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	gomod := strings.TrimSpace(string(out))
	require.NotEmpty(t, gomod, "not inside a Go module")
	return filepath.Dir(gomod)
}

// buildBinaries builds nats-server (the version go.mod requires) and agentd
// and returns their paths.
func buildBinaries(t testing.TB) (natsServer, agentd string) {
	t.Helper()
	root := moduleRoot(t)
	binaries.once.Do(func() {
		binaries.dir, binaries.err = os.MkdirTemp("", "convlog-clustertest-bin-")
		if binaries.err != nil {
			return
		}
		binaries.natsServer = filepath.Join(binaries.dir, "nats-server")
		binaries.agent = filepath.Join(binaries.dir, "agentd")
		for _, b := range []struct{ out, pkg string }{
			{binaries.natsServer, "github.com/nats-io/nats-server/v2"},
			{binaries.agent, "./agentd"},
		} {
			cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				binaries.err = fmt.Errorf("go build %s: %w\n%s", b.pkg, err, out)
				return
			}
		}
	})
	require.NoError(t, binaries.err)
	return binaries.natsServer, binaries.agent
}

// natsTLSDir is where the compose file mounts the TLS files in the nats
// containers (deploy/nats/*.conf name the files there).
const natsTLSDir = "/etc/nats/tls/"

// makeTLS writes the deployment's TLS files into dir with agentd's own
// command (what compose's certs service runs), for this machine's
// loopback names.
func makeTLS(t testing.TB, agentdBin, dir string) {
	t.Helper()
	out, err := exec.Command(agentdBin, "tls", "init", "--dir", dir, "--hosts", "127.0.0.1,localhost").CombinedOutput()
	require.NoError(t, err, "agentd tls init: %s", out)
}

package agent_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The agent packages import no NATS package and, of convlog, only events
// and agent/internal.
func TestAgentPackagesDependOnlyOnEvents(t *testing.T) {
	const mod = "github.com/convlog/convlog/"
	for _, pkg := range []string{"./model", "./model/modeltest", "./tools"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		deps := strings.Fields(string(out))
		require.NotEmpty(t, deps)
		for _, d := range deps {
			require.False(t, strings.HasPrefix(d, "github.com/nats-io/"), "%s imports %s", pkg, d)
			if strings.HasPrefix(d, mod) {
				ours := strings.TrimPrefix(d, mod)
				ok := ours == "events" || strings.HasPrefix(ours, "agent/")
				require.True(t, ok, "%s imports %s", pkg, d)
			}
		}
	}
}

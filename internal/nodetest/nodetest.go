// Package nodetest runs the JavaScript checks of the cross-language test
// vectors (docs/check_*.mjs, Node's standard library only) from Go tests.
package nodetest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Node returns the path of the node binary. Without one the test is
// skipped, except in CI (the environment variable CI set), where it
// fails: .ci/run installs Node for the npm workspace, so a CI run checks
// every vector in JavaScript, and a machine with Go only still runs the
// Go half of the test and says what it did not run.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		require.Empty(t, os.Getenv("CI"), "CI must have node")
		t.Skip("node is not installed: the JavaScript check of the vector is skipped")
	}
	return node
}

// Run runs node script on the file path and returns its combined output
// and error (nil on exit 0).
func Run(t testing.TB, node, script, path string) (string, error) {
	t.Helper()
	out, err := exec.Command(node, script, path).CombinedOutput()
	return string(out), err
}

// RunOn writes v as JSON to a file of its own and runs node script on it
// (a vector a test altered, which the script must refuse).
func RunOn(t testing.TB, node, script string, v any) (string, error) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "vector.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return Run(t, node, script, path)
}

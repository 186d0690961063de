package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runCLIFull runs an agentd command and returns stdout, stderr and its
// error (nil on exit 0).
func runCLIFull(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return stdout.String(), stderr.String(), err
}

// The operator commands at their edges: a missing data directory, flag
// usage, progress output into a pipe, an import's projection.
func TestOperatorCommands(t *testing.T) {
	t.Run("a command on a data directory that does not exist fails and creates nothing", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "no-such-dir")
		for _, args := range [][]string{{"thread", "list"}, {"stream", "info"}, {"verify", "/dev/null"}} {
			_, stderr, err := runCLIFull(t, append(args, "--data-dir", missing)...)
			require.Error(t, err, "agentd %v", args)
			require.Contains(t, stderr, "does not exist", "agentd %v", args)
			_, statErr := os.Stat(missing)
			require.True(t, os.IsNotExist(statErr), "agentd %v created %s", args, missing)
		}
	})

	t.Run("the --format flags' usage names their argument type", func(t *testing.T) {
		for _, args := range [][]string{{"import", "--help"}, {"thread", "export", "--help"}} {
			out, _, err := runCLIFull(t, args...)
			require.NoError(t, err)
			var line string
			for l := range strings.Lines(out) {
				if strings.Contains(l, "--format") && strings.HasPrefix(strings.TrimSpace(l), "--format") {
					line = l
				}
			}
			require.NotEmpty(t, line, "agentd %v shows --format", args)
			require.Contains(t, line, "--format string ", "agentd %v: %q", args, line)
			require.NotContains(t, line, "`", "agentd %v: %q", args, line)
		}
	})

	t.Run("no progress bar is drawn into a pipe", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		conv := filepath.Join(t.TempDir(), "conv.jsonl")
		// Enough conversations that the import lasts past the bar's 100 ms
		// throttle.
		var lines strings.Builder
		for i := range 1000 {
			fmt.Fprintf(&lines, `{"source":"test","id":"p%d","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`+"\n", i)
		}
		require.NoError(t, os.WriteFile(conv, []byte(lines.String()), 0o600))
		for _, args := range [][]string{{"import", conv}, {"verify", conv}, {"thread", "export", "--all"}} {
			_, stderr, err := runCLIFull(t, append(args, "--data-dir", data)...)
			require.NoError(t, err, "agentd %v: %s", args, stderr)
			require.NotContains(t, stderr, "\r", "agentd %v drew a bar into a pipe: %q", args, stderr)
			require.NotContains(t, stderr, "%", "agentd %v drew a bar into a pipe: %q", args, stderr)
		}
	})

	t.Run("import --format events projects what it imports", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "src")
		conv := filepath.Join(t.TempDir(), "conv.jsonl")
		require.NoError(t, os.WriteFile(conv, []byte(`{"source":"test","id":"ev1","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`+"\n"), 0o600))
		runCLI(t, "import", "--no-progress", "--data-dir", src, conv)
		exported := runCLI(t, "thread", "export", "--all", "--format", "events", "--data-dir", src)
		file := filepath.Join(t.TempDir(), "events.jsonl")
		require.NoError(t, os.WriteFile(file, []byte(exported), 0o600))

		dst := filepath.Join(t.TempDir(), "dst")
		runCLI(t, "import", "--format", "events", "--data-dir", dst, file)
		// No server runs on dst: the listing comes from the snapshots the
		// import itself projected.
		out := runCLI(t, "thread", "list", "--json", "--data-dir", dst)
		require.Contains(t, out, `"source_id": "ev1"`)
		require.Contains(t, out, `"message_count": 2`)
	})
}

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exitStatus is the exit code of a finished command's error (0 for nil).
func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	return ee.ExitCode()
}

func TestCommandsOnMissingInputsSayWhatIsWrong(t *testing.T) {
	for _, args := range [][]string{
		{"import"},
		{"import", "--format", "events"},
		{"verify"},
		{"replay-run"},
	} {
		t.Run(args[0]+" of a file that does not exist fails before it does anything", func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			missing := filepath.Join(t.TempDir(), "nope.jsonl")
			stdout, stderr, err := runCLIFull(t, append(args, "--data-dir", dir, missing)...)
			require.Equal(t, 1, exitStatus(t, err), "stdout: %s\nstderr: %s", stdout, stderr)
			require.Empty(t, stdout, "nothing that looks like a result")
			require.Contains(t, stderr, "agentd: "+missing+" does not exist")
			_, statErr := os.Stat(dir)
			require.True(t, os.IsNotExist(statErr), "created the data directory %s", dir)
		})
	}

	t.Run("audit verify on a data directory that does not exist says so", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "no-such-dir")
		stdout, stderr, err := runCLIFull(t, "audit", "verify", "--data-dir", dir)
		require.Equal(t, 1, exitStatus(t, err), "stdout: %s\nstderr: %s", stdout, stderr)
		require.Contains(t, stderr, "data directory "+dir+" does not exist")
		require.NotContains(t, stderr, "audit key")
	})

	t.Run("audit verify on a data directory only imported into says nothing signed it", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		runCLI(t, "import", "--data-dir", dir, "--no-progress", filepath.Join("..", "testdata", "conversations", "tooltalk.jsonl"))
		stdout, stderr, err := runCLIFull(t, "audit", "verify", "--data-dir", dir)
		require.Equal(t, 1, exitStatus(t, err), "stdout: %s\nstderr: %s", stdout, stderr)
		require.Contains(t, stderr, "no audit key")
		require.Contains(t, stderr, "no agentd serve has run on it")
		require.NotContains(t, stderr, "does not exist")
	})
}

// The README's commands on the real transcripts run on a fresh clone: they
// read testdata/conversations, and each succeeds on the sample.
func TestReadmeTranscriptCommandsRunOnTheSample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(b), "\n## Real conversations\n")
	require.True(t, ok)
	sec, _, _ = strings.Cut(sec, "\n## ")
	bin, err := buildOnce()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "data")
	var ran []string
	for line := range strings.SplitSeq(sec, "\n") {
		cmdline, ok := strings.CutPrefix(line, "    go run ./agentd ")
		if !ok {
			continue
		}
		cmdline, _, _ = strings.Cut(cmdline, "#")
		var args []string
		for _, w := range strings.Fields(cmdline) {
			if !strings.Contains(w, "*") {
				args = append(args, w)
				continue
			}
			m, err := filepath.Glob(filepath.Join("..", w))
			require.NoError(t, err)
			require.NotEmpty(t, m, "%s matches files on a fresh clone", w)
			args = append(args, m...)
		}
		cmd := exec.Command(bin, append(args, "--data-dir", dir)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "agentd %s\n%s", cmdline, out)
		ran = append(ran, args[0])
		t.Logf("agentd %s\n%s", cmdline, out)
	}
	require.Equal(t, []string{"import", "verify", "replay-run"}, ran)
}

package convlog_test

import (
	"bufio"
	"context"
	"go/format"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quickstartBlock is a fenced code block of the README's Quickstart
// section, marked by the comment <!-- quickstart: KIND --> on the line
// before its fence.
type quickstartBlock struct {
	kind string
	code string
}

var quickstartRe = regexp.MustCompile("(?m)^<!-- quickstart: ([a-z ]+) -->\n```[a-z]*\n((?s:.*?))^```$")

// quickstartBlocks returns the marked blocks of README.md's Quickstart
// section, in order.
func quickstartBlocks(t *testing.T) []quickstartBlock {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, "\n## Quickstart\n")
	require.GreaterOrEqual(t, i, 0, "README.md has no Quickstart section")
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+4]
	}
	var blocks []quickstartBlock
	for _, m := range quickstartRe.FindAllStringSubmatch(s, -1) {
		blocks = append(blocks, quickstartBlock{kind: m[1], code: m[2]})
	}
	return blocks
}

func quickstartBlockOf(t *testing.T, blocks []quickstartBlock, kind string) string {
	t.Helper()
	for _, b := range blocks {
		if b.kind == kind {
			return b.code
		}
	}
	require.Failf(t, "README.md's Quickstart lacks a block", "no block marked <!-- quickstart: %s -->", kind)
	return ""
}

// serving is an `agentd serve` the test started.
type serving struct {
	url     string // the HTTP API's base URL
	dataDir string
	banner  string // what serve printed on stdout up to its banner's end
}

// startServe builds agentd and runs `agentd serve` as the README's first
// command does, on a temporary data directory and a port the kernel picks
// (CONVLOG_DATA_DIR, CONVLOG_HTTP_ADDR), without API keys. It returns once
// the banner is printed; the server is stopped with SIGTERM at cleanup.
func startServe(t *testing.T) serving {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "agentd")
	out, err := exec.Command("go", "build", "-o", bin, "./agentd").CombinedOutput()
	require.NoError(t, err, "go build ./agentd: %s", out)
	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(withoutEnv(os.Environ(), "CONVLOG_"),
		"CONVLOG_DATA_DIR="+data, "CONVLOG_HTTP_ADDR=127.0.0.1:0", "CONVLOG_LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	type result struct {
		banner, url string
	}
	got := make(chan result, 1)
	drained := make(chan struct{})
	go func() { // reads stdout until serve exits
		defer close(drained)
		var banner strings.Builder
		var url string
		sent := false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if sent {
				continue
			}
			banner.WriteString(line + "\n")
			if rest, ok := strings.CutPrefix(line, "HTTP API:"); ok {
				url = strings.TrimSuffix(strings.TrimSpace(rest), "/v1/threads")
			}
			if strings.HasPrefix(line, "curl ") { // the banner's last line
				got <- result{banner.String(), url}
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		if !sent {
			got <- result{banner.String(), url}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-drained
		_ = cmd.Wait()
	})
	select {
	case r := <-got:
		require.NotEmpty(t, r.url, "agentd serve printed no HTTP API address:\n%s", r.banner)
		return serving{url: r.url, dataDir: data, banner: r.banner}
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "agentd serve printed no banner within 2 minutes")
	}
	return serving{}
}

// withoutEnv drops the variables whose names start with prefix.
func withoutEnv(env []string, prefix string) []string {
	var kept []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			kept = append(kept, kv)
		}
	}
	return kept
}

func lookPath(t *testing.T, tool, why string) {
	t.Helper()
	_, err := exec.LookPath(tool)
	require.NoError(t, err, "%s is needed to run %s: install it (apt-get install -y %s)", tool, why, tool)
}

// The README's Quickstart, run as a user copies it: the shell block with
// bash and curl, the Go block as a program of its own module, and the
// curl that agentd serve's banner suggests, each against a real agentd
// serve whose demo agent answers. (js/packages/sdk-e2e runs the
// TypeScript blocks.)
func TestREADMEQuickstart(t *testing.T) {
	blocks := quickstartBlocks(t)
	sh := quickstartBlockOf(t, blocks, "sh")
	goSrc := quickstartBlockOf(t, blocks, "go")
	quickstartBlockOf(t, blocks, "ts openai")
	quickstartBlockOf(t, blocks, "ts convlog")
	lookPath(t, "bash", "the README's shell quickstart")
	lookPath(t, "curl", "the README's shell quickstart")
	srv := startServe(t)

	t.Run("the shell block creates a thread, sends a message and streams the demo agent's answer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", sh)
		cmd.Env = append(os.Environ(), "CONVLOG_URL="+srv.url)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && (!assert.ErrorAs(t, err, &exit) || exit.ExitCode() != 28) {
			require.NoError(t, err, "only the SSE curl's --max-time (exit 28) may end the block:\n%s", out)
		}
		assert.Contains(t, string(out), `"thread":"hello"`, "the PUT answers the thread")
		assert.Contains(t, string(out), "event: message.user")
		assert.Contains(t, string(out), `"content":"6*7 = 42."`, "the SSE stream holds the demo agent's answer:\n%s", out)
	})

	t.Run("the Go block, in a module of its own, prints the demo agent's answer", func(t *testing.T) {
		formatted, err := format.Source([]byte(goSrc))
		require.NoError(t, err)
		assert.Equal(t, string(formatted), goSrc, "the README's Go block is gofmt'ed")
		out := runGoBlock(t, goSrc, srv.dataDir)
		assert.Equal(t, "6*7 = 42.\n", out)
	})

	t.Run("the banner names the demo agent and a curl that it answers", func(t *testing.T) {
		assert.Contains(t, srv.banner, `"demo"`)
		var curl string
		for _, line := range strings.Split(srv.banner, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "curl ") {
				curl = strings.TrimSpace(line)
			}
		}
		require.NotEmpty(t, curl, "the banner holds a curl command:\n%s", srv.banner)
		assert.Contains(t, curl, srv.url)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "bash", "-c", curl).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), `"content":"6*7 = 42."`)
	})
}

// runGoBlock writes src as main.go of a new module that requires this
// repository's module (replace => the repository, go.sum copied from it)
// and returns what `go run .` prints on stdout.
func runGoBlock(t *testing.T, src, dataDir string) string {
	t.Helper()
	root, err := os.Getwd()
	require.NoError(t, err)
	modFile, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	goLine := regexp.MustCompile(`(?m)^go \S+$`).FindString(string(modFile))
	require.NotEmpty(t, goLine, "go.mod has a go line")
	dir := t.TempDir()
	goMod := "module hello\n\n" + goLine + "\n\nrequire github.com/convlog/convlog v0.0.0\n\nreplace github.com/convlog/convlog => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644))
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "CONVLOG_DATA_DIR="+dataDir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go run of the README's Go block: %s", stderr.String())
	return string(out)
}

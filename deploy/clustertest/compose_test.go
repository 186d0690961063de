package clustertest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// composeFile is the part of docker-compose.yml the tests read.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	// Extensions are the top-level x-* keys (YAML anchors for shared parts).
	Extensions map[string]any `yaml:",inline"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       *composeBuild     `yaml:"build"`
	Hostname    string            `yaml:"hostname"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Restart     string            `yaml:"restart"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		Retries     int      `yaml:"retries"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

// The topology both tests rely on.
var (
	natsNodes = []string{"n1", "n2", "n3"}
	// Ports the config files listen on inside the compose network.
	natsClientPort, natsClusterPort, natsHTTPPort = 4222, 6222, 8222
	// natsDataDir is where each node's volume is mounted and its store_dir.
	natsDataDir = "/data"
)

func loadCompose(t testing.TB) (composeFile, string) {
	t.Helper()
	root := moduleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&c), "docker-compose.yml (a key this test does not know fails it: add it to composeFile)")
	for k := range c.Extensions {
		require.True(t, strings.HasPrefix(k, "x-"), "unknown top-level key %q in docker-compose.yml", k)
	}
	return c, root
}

func TestComposeFile(t *testing.T) {
	c, root := loadCompose(t)
	natsServer, agentdBin := buildBinaries(t)
	tlsDir := filepath.Join(t.TempDir(), "tls")
	makeTLS(t, agentdBin, tlsDir)
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2").Output()
	require.NoError(t, err)
	natsVersion := strings.TrimSpace(string(out))

	t.Run("the three nats nodes each mount their own config file and volume", func(t *testing.T) {
		for _, n := range natsNodes {
			s, ok := c.Services[n]
			require.True(t, ok, "service %s", n)
			require.Equal(t, "nats:"+strings.TrimPrefix(natsVersion, "v")+"-alpine", s.Image,
				"%s runs the official nats image of the nats-server version go.mod requires (the one the cluster test runs)", n)
			require.Equal(t, n, s.Hostname)
			require.Equal(t, "unless-stopped", s.Restart, "%s restarts after a crash", n)
			conf := "/etc/nats/" + n + ".conf"
			require.Equal(t, []string{"--config", conf}, s.Command, "%s command", n)
			require.Contains(t, s.Volumes, "./deploy/nats/"+n+".conf:"+conf+":ro")
			require.Contains(t, s.Volumes, n+"-data:"+natsDataDir, "%s has its own volume at the store_dir", n)
			require.Contains(t, s.Volumes, "tls:"+strings.TrimSuffix(natsTLSDir, "/")+":ro", "%s reads the TLS files of the certs service", n)
			require.Equal(t, "service_completed_successfully", s.DependsOn["certs"].Condition, "%s starts once the certificates exist", n)
			require.Contains(t, c.Volumes, n+"-data", "volume %s-data is declared", n)
			require.NotNil(t, s.Healthcheck, "%s has a healthcheck", n)
			require.Contains(t, strings.Join(s.Healthcheck.Test, " "), fmt.Sprintf("127.0.0.1:%d/healthz", natsHTTPPort))
			for _, p := range s.Ports {
				require.True(t, strings.HasPrefix(p, "127.0.0.1:"), "%s publishes %s on loopback only", n, p)
			}

			path := filepath.Join(root, "deploy", "nats", n+".conf")
			src, err := os.ReadFile(path)
			require.NoError(t, err, "mounted config file of %s", n)
			kv := confValues(string(src))
			require.Equal(t, n, kv["server_name"], "%s server_name", n)
			require.Equal(t, fmt.Sprintf("0.0.0.0:%d", natsClientPort), kv["listen"])
			require.Equal(t, fmt.Sprintf("0.0.0.0:%d", natsHTTPPort), kv["http"])
			require.Equal(t, natsDataDir, kv["jetstream.store_dir"], "%s store_dir is its volume", n)
			require.Equal(t, fmt.Sprintf("0.0.0.0:%d", natsClusterPort), kv["cluster.listen"])
			require.Equal(t, "convlog", kv["cluster.name"])
			for _, peer := range natsNodes {
				require.Contains(t, string(src), fmt.Sprintf("nats-route://%s:%d", peer, natsClusterPort), "%s routes to %s", n, peer)
			}
			require.Equal(t, 6, strings.Count(string(src), `"`+natsTLSDir), "%s: TLS on client connections and routes", n)
			require.Contains(t, string(src), "verify: true", "%s: routes verify the peer's certificate (mutual TLS)", n)
			// nats-server -t loads the TLS files: test a copy naming those
			// agentd tls init wrote here.
			tested := filepath.Join(t.TempDir(), n+".conf")
			require.NoError(t, os.WriteFile(tested, []byte(strings.ReplaceAll(string(src), `"`+natsTLSDir, `"`+tlsDir+"/")), 0o644))
			out, err := exec.Command(natsServer, "-t", "-c", tested).CombinedOutput()
			require.NoError(t, err, "nats-server -t -c %s: %s", tested, out)
		}
	})

	t.Run("the config files differ only in server_name", func(t *testing.T) {
		norm := func(n string) string {
			b, err := os.ReadFile(filepath.Join(root, "deploy", "nats", n+".conf"))
			require.NoError(t, err)
			s := regexp.MustCompile(`(?m)^server_name: `+n+`$`).ReplaceAllString(string(b), "server_name: X")
			return strings.ReplaceAll(s, "node "+n+" of", "node X of")
		}
		for _, n := range natsNodes[1:] {
			require.Equal(t, norm(natsNodes[0]), norm(n))
		}
	})

	urls := make([]string, len(natsNodes))
	for i, n := range natsNodes {
		urls[i] = fmt.Sprintf("tls://%s:%d", n, natsClientPort)
	}
	t.Run("agentd serves HTTP with API keys on all three nodes with replicas 3", func(t *testing.T) {
		s, ok := c.Services["agentd"]
		require.True(t, ok)
		checkAgentdService(t, root, s)
		require.Equal(t, "serve", s.Command[0])
		require.Equal(t, []string{strings.Join(urls, ",")}, values(s.Command, "nats-url"))
		require.Equal(t, []string{"3"}, values(s.Command, "replicas"))
		require.Equal(t, []string{"0.0.0.0:8080"}, values(s.Command, "http-addr"))
		require.NotContains(t, s.Command, "--insecure-no-auth")
		require.Contains(t, s.Environment["CONVLOG_API_KEYS"], "${CONVLOG_API_KEYS:?", "API keys come from the environment and are required")
		require.Empty(t, values(s.Command, "projector"), "agentd runs the projector (default)")
	})

	t.Run("a second agentd runs only agent workers", func(t *testing.T) {
		s, ok := c.Services["workers"]
		require.True(t, ok)
		checkAgentdService(t, root, s)
		require.Equal(t, "serve", s.Command[0])
		require.Equal(t, []string{strings.Join(urls, ",")}, values(s.Command, "nats-url"))
		require.Equal(t, []string{"3"}, values(s.Command, "replicas"))
		require.Equal(t, []string{"false"}, values(s.Command, "projector"))
		require.Equal(t, []string{""}, values(s.Command, "http-addr"))
		require.Equal(t, []string{"8"}, values(s.Command, "workers"))
		require.Empty(t, s.Ports)
		require.Equal(t, values(c.Services["agentd"].Command, "worker-ack-wait"), values(s.Command, "worker-ack-wait"),
			"both agentd services configure the shared workers' consumer alike")
	})

	t.Run("the Dockerfile builds agentd with go.mod's Go version", func(t *testing.T) {
		df, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
		require.NoError(t, err)
		gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
		require.NoError(t, err)
		m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
		require.NotNil(t, m, "go directive in go.mod")
		require.Regexp(t, `(?m)^FROM golang:`+regexp.QuoteMeta(string(m[1]))+`\b`, string(df))
		require.Regexp(t, `(?m)^RUN .*go build .* \./agentd$`, string(df))
		require.Regexp(t, `(?m)^ENTRYPOINT \["/usr/local/bin/agentd"\]$`, string(df))
	})

	t.Run("the NATS config files are all the compose file mounts", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(root, "deploy", "nats", "*.conf"))
		require.NoError(t, err)
		var got []string
		for _, f := range files {
			got = append(got, strings.TrimSuffix(filepath.Base(f), ".conf"))
		}
		require.ElementsMatch(t, natsNodes, got)
		var services []string
		for name := range c.Services {
			services = append(services, name)
		}
		slices.Sort(services)
		require.Equal(t, []string{"agentd", "certs", "n1", "n2", "n3", "workers"}, services)
	})

	t.Run("a certs service creates the TLS files once, for the three nodes", func(t *testing.T) {
		s, ok := c.Services["certs"]
		require.True(t, ok)
		require.Equal(t, []string{"tls", "init", "--dir", agentdTLSDir, "--hosts", "n1,n2,n3,localhost,127.0.0.1"}, s.Command)
		require.Contains(t, s.Volumes, "tls:"+agentdTLSDir)
		require.Equal(t, "no", s.Restart)
		require.Contains(t, c.Volumes, "tls")
	})
}

// agentdTLSDir is where the compose file mounts the TLS files in the
// agentd containers.
const agentdTLSDir = "/home/nonroot/tls"

// checkAgentdService checks what both agentd services share.
func checkAgentdService(t *testing.T, root string, s composeService) {
	t.Helper()
	require.Equal(t, []string{agentdTLSDir + "/ca.pem"}, values(s.Command, "tls-ca"), "agentd trusts the deployment's CA")
	require.Contains(t, s.Volumes, "tls:"+agentdTLSDir+":ro")
	require.NotNil(t, s.Build, "built from the repository")
	require.Equal(t, ".", s.Build.Context)
	require.Equal(t, "deploy/Dockerfile", s.Build.Dockerfile)
	require.FileExists(t, filepath.Join(root, s.Build.Context, s.Build.Dockerfile))
	require.Equal(t, "unless-stopped", s.Restart)
	for _, n := range natsNodes {
		require.Equal(t, "service_healthy", s.DependsOn[n].Condition, "waits for %s", n)
	}
	require.NotEmpty(t, s.Command)
	for _, a := range s.Command[1:] {
		require.True(t, strings.HasPrefix(a, "--") && strings.Contains(a, "="), "flag %q is written --name=value", a)
	}
}

// values returns every value of --name=value in args.
func values(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// confValues reads "key: value" lines of a NATS config file, with keys
// inside a block prefixed by the block name ("cluster.listen"), values
// unquoted. It is enough for the files in deploy/nats, not a parser.
func confValues(src string) map[string]string {
	out := map[string]string{}
	var block []string
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasSuffix(line, "{"):
			block = append(block, strings.TrimSpace(strings.TrimSuffix(line, "{")))
		case line == "}":
			block = block[:len(block)-1]
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if len(block) > 0 {
				k = strings.Join(block, ".") + "." + k
			}
			out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return out
}

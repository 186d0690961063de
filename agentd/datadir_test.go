package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// runCLI runs an agentd operator command and returns its stdout; it fails
// the test when the command fails.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runCLIFull(t, args...)
	require.NoError(t, err, "agentd %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, stderr)
	return out
}

// stopServe stops a serve process gracefully and waits for it.
func stopServe(t *testing.T, p *proc) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "agentd exit after SIGTERM\n%s", p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("agentd did not stop after SIGTERM\n%s", p.log())
	}
}

// Writers append to `agentd serve`
// while operator commands (fork, delete, import) run with --data-dir on the
// same directory; after a graceful restart every acknowledged append and
// every write of the operator commands is there, and the snapshots agree
// with the log. Before the data directory had one owner, a second embedded
// server opened the same files and lost most acknowledged appends.
func TestOperatorCommandsBesideServeLoseNothing(t *testing.T) {
	runs := 20
	if testing.Short() {
		runs = 3
	}
	data := t.TempDir()
	ctx := context.Background()
	var all []acked
	var forks, imported []string
	var deleted []string
	var threads []string

	for run := 0; run < runs; run++ {
		p := startServe(t, data, "--workers", "0")
		c := connectServe(t, p)
		// Everything acknowledged so far is there after the restart.
		checkStored(t, c, all, forks, imported, deleted)

		var created []string
		for i := 0; i < 3; i++ {
			_, th, _, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
			require.NoError(t, err)
			created = append(created, th)
		}
		threads = append(threads, created...)

		stop := make(chan struct{})
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(th string) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					ev := events.Event{Payload: events.UserMessage{Content: events.Text(fmt.Sprintf("run %d message %d", run, i))}}
					res, err := c.Append(ctx, events.DefaultTenant, th, []events.Event{ev}, client.AnyVersion())
					if err != nil {
						continue // not acknowledged: the test only counts acknowledged appends
					}
					mu.Lock()
					all = append(all, acked{th, res.Events[0].ID})
					mu.Unlock()
				}
			}(created[w])
		}

		// Operator commands beside the running server, on the same directory.
		fork := strings.TrimSpace(runCLI(t, "thread", "fork", created[0], "--data-dir", data))
		require.NotEmpty(t, fork)
		forks = append(forks, fork)
		runCLI(t, "thread", "delete", created[1], "--data-dir", data)
		deleted = append(deleted, created[1])
		conv := filepath.Join(t.TempDir(), "conv.jsonl")
		convID := fmt.Sprintf("datadir-run-%d", run)
		require.NoError(t, os.WriteFile(conv, []byte(`{"source":"test","id":"`+convID+`","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`+"\n"), 0o600))
		runCLI(t, "import", "--no-progress", "--json", "--data-dir", data, conv)
		imported = append(imported, convID)

		time.Sleep(100 * time.Millisecond) // a few more appends after the last command
		close(stop)
		wg.Wait()
		stopServe(t, p)
	}
	p := startServe(t, data, "--workers", "0")
	c := connectServe(t, p)
	checkStored(t, c, all, forks, imported, deleted)
	t.Logf("%d runs: %d acknowledged appends, %d forks, %d imports, %d deletes: all present", runs, len(all), len(forks), len(imported), len(deleted))
	// The projector's snapshots agree with the log.
	// Bounded by the projector's AckWait (5 s): a graceful stop can leave a
	// few triggers delivered but unacked, which the restarted projector
	// gets when AckWait redelivers them.
	for _, th := range append(threads, forks...) {
		full, err := c.Get(ctx, events.DefaultTenant, th, client.Consistent(), client.IncludeDeleted())
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			snap, err := c.Get(ctx, events.DefaultTenant, th, client.IncludeDeleted())
			return err == nil && snap.Version == full.Version && len(snap.Messages) == len(full.Messages)
		}, 15*time.Second, 20*time.Millisecond, "snapshot of %s agrees with the log", th)
	}
}

// checkStored asserts that every acknowledged append, fork, import and
// delete is in the log.
func checkStored(t *testing.T, c *client.Client, all []acked, forks, imported, deleted []string) {
	t.Helper()
	ctx := context.Background()
	byThread := map[string]map[string]bool{}
	for _, a := range all {
		if byThread[a.thread] == nil {
			byThread[a.thread] = map[string]bool{}
		}
		byThread[a.thread][a.id] = true
	}
	lost := 0
	for th, ids := range byThread {
		seen := map[string]bool{}
		for ev, err := range c.Events(ctx, events.DefaultTenant, th, 0, 0) {
			require.NoError(t, err)
			seen[ev.ID] = true
		}
		for id := range ids {
			if !seen[id] {
				lost++
			}
		}
	}
	require.Zero(t, lost, "acknowledged appends lost of %d", len(all))
	for _, f := range forks {
		th, err := c.Get(ctx, events.DefaultTenant, f, client.Consistent())
		require.NoError(t, err, "fork %s made by the operator command", f)
		require.NotNil(t, th.ForkedFrom)
	}
	for _, d := range deleted {
		th, err := c.Get(ctx, events.DefaultTenant, d, client.Consistent(), client.IncludeDeleted())
		require.NoError(t, err, "deleted thread %s", d)
		require.True(t, th.Deleted, "delete of %s made by the operator command", d)
	}
	// The imports are projected (listed) once the projector has caught up.
	require.Eventually(t, func() bool {
		page, err := c.List(ctx, events.DefaultTenant, client.ListOptions{Metadata: map[string]string{"source": "test"}, Limit: 1000})
		if err != nil {
			return false
		}
		ids := map[string]bool{}
		for _, s := range page.Threads {
			ids[s.Metadata["source_id"]] = true
		}
		for _, id := range imported {
			if !ids[id] {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every imported conversation is listed")
}

// natsAuth returns the options that authenticate to the embedded server of
// dataDir with the credentials it generated (none when it has none).
func natsAuth(t *testing.T, dataDir string) []nats.Option {
	t.Helper()
	seed := filepath.Join(dataDir, "credentials", "agentd.nk")
	if _, err := os.Stat(seed); err != nil {
		return nil
	}
	o, err := nats.NkeyOptionFromSeed(seed)
	require.NoError(t, err)
	return []nats.Option{o}
}

// acked is one acknowledged append.
type acked struct{ thread, id string }

// connectServe connects a client to a running serve with the credentials in
// its data directory.
func connectServe(t *testing.T, p *proc) *client.Client {
	t.Helper()
	return connectClient(t, p.natsURL, natsAuth(t, p.dataDir)...)
}

// A second serve on a directory that a running serve owns fails at once and
// names the owner's process id.
func TestSecondServeOnTheSameDataDirFails(t *testing.T) {
	data := t.TempDir()
	p := startServe(t, data, "--workers", "0")
	bin, err := buildOnce()
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve", "--data-dir", data, "--http-addr", "127.0.0.1:0")
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("a second serve on %s did not fail at once:\n%s", data, out)
	}
	require.Error(t, err)
	require.Contains(t, string(out), fmt.Sprintf("%d", p.cmd.Process.Pid), "the error names the owner's PID")
	require.Contains(t, string(out), "in use")
}

// The embedded NATS server of serve
// requires the credentials generated in its data directory (owner-only
// permissions); a client without them cannot connect, so it can neither
// read a tenant's events nor publish a forged marker.
func TestEmbeddedNATSRequiresCredentials(t *testing.T) {
	data := t.TempDir()
	p := startServe(t, data, "--workers", "0")
	_, err := nats.Connect(p.natsURL)
	require.Error(t, err, "a client without credentials connected to the embedded NATS")
	require.Contains(t, strings.ToLower(err.Error()), "authorization")

	for _, path := range []string{filepath.Join(data, "credentials"), filepath.Join(data, "credentials", "agentd.nk"), filepath.Join(data, "convlog.owner.json")} {
		st, err := os.Stat(path)
		require.NoError(t, err)
		require.Zero(t, st.Mode().Perm()&0o077, "%s has mode %04o: group and others can read it", path, st.Mode().Perm())
	}
	c := connectServe(t, p)
	_, _, _, err = c.CreateThread(context.Background(), client.CreateOptions{})
	require.NoError(t, err, "a client with the generated credentials works")
}

// A non-loopback --nats-listen without TLS is refused, also by --check;
// --insecure-nats-listen or a certificate allows it.
func TestNonLoopbackNATSListenNeedsTLS(t *testing.T) {
	bin, err := buildOnce()
	require.NoError(t, err)
	cert, key := selfSignedCert(t)
	cases := []struct {
		name string
		args []string
		ok   bool
	}{
		{"a wildcard address without TLS is refused", []string{"--nats-listen", "0.0.0.0:4222"}, false},
		{"an empty host (every interface) is refused", []string{"--nats-listen", ":4222"}, false},
		{"a loopback address is fine", []string{"--nats-listen", "127.0.0.1:4222"}, true},
		{"--insecure-nats-listen allows it", []string{"--nats-listen", "0.0.0.0:4222", "--insecure-nats-listen"}, true},
		{"a TLS certificate allows it", []string{"--nats-listen", "0.0.0.0:4222", "--nats-tls-cert", cert, "--nats-tls-key", key}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--check", "--data-dir", t.TempDir(), "--api-keys-file", "/dev/null"}, tc.args...)
			out, err := exec.Command(bin, args...).CombinedOutput()
			if tc.ok {
				require.NoError(t, err, "%s", out)
				require.Contains(t, string(out), "configuration OK")
				return
			}
			require.Error(t, err, "%s", out)
			require.Contains(t, string(out), "not a loopback address")
			require.NotContains(t, string(out), "configuration OK")
		})
	}
}

// With a TLS listener, operator commands beside serve reach its NATS over
// TLS (pinned to the certificate file) with the generated credentials.
func TestOperatorCommandAttachesOverTLS(t *testing.T) {
	data := t.TempDir()
	cert, key := selfSignedCert(t)
	p := startServe(t, data, "--workers", "0", "--nats-tls-cert", cert, "--nats-tls-key", key)
	require.True(t, strings.HasPrefix(p.natsURL, "tls://") || strings.HasPrefix(p.natsURL, "nats://"), p.natsURL)
	_, err := nats.Connect(p.natsURL, append(natsAuth(t, data), nats.MaxReconnects(0))...)
	require.Error(t, err, "a plain-text client connected to a TLS listener")
	conv := filepath.Join(t.TempDir(), "conv.jsonl")
	require.NoError(t, os.WriteFile(conv, []byte(`{"source":"test","id":"over-tls","messages":[{"role":"user","content":"hi"}]}`+"\n"), 0o600))
	runCLI(t, "import", "--no-progress", "--data-dir", data, conv)
	require.Eventually(t, func() bool {
		return strings.Contains(runCLI(t, "thread", "list", "--data-dir", data, "--json"), "over-tls")
	}, 20*time.Second, 200*time.Millisecond, "the thread imported over TLS is listed")
}

// selfSignedCert writes a self-signed certificate for 127.0.0.1 and
// localhost and its key, and returns their paths.
func selfSignedCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "convlog test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile
}

package convlog_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deps lists the transitive imports of pkg (go list -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.Fields(string(out))
}

const mod = "github.com/convlog/convlog/"

// The dependency direction of docs/design.md ("The parts"), room by room:
//
//	events                         nothing of ours, no NATS
//	fold (the fold)                events; no NATS: a pure function
//	snapstore (the snapshot store) events, fold, internal/lru (its head cache); nats.go's KV
//	                               and orbit.go's jetstreamext (sealing through its Sealer interface)
//	threadkey (thread data keys)   events, internal/lru; nats.go's KV, x/crypto's XChaCha20-Poly1305
//	projector (the runner)         client (its durable consume) and below
//	internal/tenancy               events, threadkey, the internal leaves: the permission
//	                               set, the tenant service and its caller (no server);
//	                               it imports threadkey because its service creates a
//	                               thread's key record for a tenant that may not write the
//	                               key bucket, and checks the record by threadkey's own
//	                               rule (CheckNewRecord, Key): the record format has one owner
//	internal/quota                 events, the internal leaves: the usage meter, the limits, the writers' check
//	client                         events, fold, snapstore, threadkey, internal/tenancy, internal/quota, the internal leaves; never the runner
//	agent/...                      events only, no NATS
//	client adapters                client and below, nothing of agentd
//	agentd/chat (the chat service)  client and below; not the HTTP API
//	agentd/httpapi                 client and below, schemas, agentd/chat; no server, no worker
//	agentd/worker, replayrun       client and below, agent; replayrun drives the workers
//	agentd/importer                client and below, replayrun's comparison, the transcripts reader
//	agentd/internal/natsconn       client and below, the data directory's lock and the embedded server
//	agentd/internal/tlsfiles       nothing of ours, no NATS: a CA and a certificate
//	agentd/operator                internal/tenancy and below: operator mode's JWT directory
//	internal/memtune               nothing of ours, no NATS: the collector's settings agentd serve runs under
//	agentd/serve                   the parts above in one process (agentd serve); no test support
//	agentd (the command)           everything above but test support
//	test support                   natstest, clienttest, tenancytest, modeltest, checkpointertest, foldcases, benchtest, the
//	                               test agent (agentd/internal/agenttest: it implements
//	                               worker.Tools, so it sits under agentd with its users)
//
// The internal leaves (directget, provision, lru, shutdown, ports) are NATS
// plumbing, a cache, a stop gate and a port finder that import nothing of ours
// but one another (provision attempts its requests with directget's retry);
// only internal/embedded (and tests) import nats-server.
func TestDependencyDirection(t *testing.T) {
	for _, c := range dependencyRules() {
		t.Run(c.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "./"+c.pkg).CombinedOutput()
			require.NoError(t, err, "package %s: %s", c.pkg, out)
			for _, d := range deps(t, "./"+c.pkg) {
				for _, f := range c.forbidden {
					require.False(t, strings.HasPrefix(d, f), "%s imports %s", c.pkg, d)
				}
				if strings.HasPrefix(d, mod) && d != mod+c.pkg {
					ours := strings.TrimPrefix(d, mod)
					ok := false
					for _, a := range c.allowOurs {
						ok = ok || ours == a || strings.HasPrefix(ours, a+"/")
					}
					require.True(t, ok, "%s imports %s, which the dependency direction forbids", c.pkg, d)
				}
			}
		})
	}
}

// TestEveryPackageHasADependencyRule fails when a package of the module
// (go list ./...) has no rule in [dependencyRules], so that a new
// package states where it sits before it is merged.
func TestEveryPackageHasADependencyRule(t *testing.T) {
	ruled := map[string]bool{}
	for _, c := range dependencyRules() {
		require.False(t, ruled[c.pkg], "two rules for %s", c.pkg)
		ruled[c.pkg] = true
	}
	out, err := exec.Command("go", "list", "./...").CombinedOutput()
	require.NoError(t, err, string(out))
	var missing []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(p, mod)
		if p == strings.TrimSuffix(mod, "/") {
			rel = "."
		}
		if !ruled[rel] {
			missing = append(missing, rel)
		}
	}
	require.Empty(t, missing, "packages with no rule in dependencyRules")
}

// A dependencyRule says what one package may import: no import path with
// a prefix in forbidden, and of this module only the packages in
// allowOurs (and their subpackages).
type dependencyRule struct {
	pkg       string
	forbidden []string
	allowOurs []string
}

// testSupport is the module's test-support packages: production code
// imports none of them.
func testSupport() []string {
	var out []string
	for _, p := range []string{"internal/natstest", "internal/nodetest", "internal/tenancy/tenancytest",
		"agent/model/modeltest", "agentd/internal/agenttest", "client/deepagents/checkpointertest",
		"internal/foldcases", "internal/clienttest", "internal/eventfixtures", "internal/testlog", "internal/benchtest"} {
		out = append(out, mod+p)
	}
	return out
}

func dependencyRules() []dependencyRule {
	leaves := []string{"internal/provision", "internal/directget", "internal/lru", "internal/shutdown", "internal/ports"}
	below := func(extra ...string) []string {
		return append(append([]string{"events", "fold", "snapstore", "threadkey", "internal/tenancy", "internal/quota"}, leaves...), extra...)
	}
	return []dependencyRule{
		{"events", []string{"github.com/nats-io/"}, nil},
		{"internal/directget", []string{"github.com/nats-io/nats-server"}, nil},
		// Provisioning's requests are attempted as the log reads are.
		{"internal/provision", []string{"github.com/nats-io/nats-server"}, []string{"internal/directget"}},
		{"internal/lru", []string{"github.com/nats-io/"}, nil},
		{"internal/shutdown", []string{"github.com/nats-io/"}, nil},
		{"internal/ports", []string{"github.com/nats-io/"}, nil},
		// The data directory's lock and credentials: a leaf, no server.
		{"internal/datadir", []string{"github.com/nats-io/nats-server", "github.com/nats-io/nats.go"}, nil},
		{"fold", []string{"github.com/nats-io/"}, []string{"events"}},
		{"snapstore", []string{"github.com/nats-io/nats-server"}, []string{"events", "fold", "internal/lru"}},
		// Thread data keys: events' envelope, the key cache, nats.go.
		{"threadkey", []string{"github.com/nats-io/nats-server"}, []string{"events", "internal/lru"}},
		// The tenant boundary: no server, nothing above threadkey.
		{"internal/tenancy", []string{"github.com/nats-io/nats-server"}, append([]string{"events", "threadkey"}, leaves...)},
		// Quotas: no server, nothing above events.
		{"internal/quota", []string{"github.com/nats-io/nats-server"}, append([]string{"events"}, leaves...)},
		{"projector", []string{"github.com/nats-io/nats-server"}, below("client")},
		{"client", []string{"github.com/nats-io/nats-server"}, below()},
		// The agent loop's model and tools depend on events only (agent/doc.go):
		// another service can use them without NATS or convlog's storage.
		{"agent", []string{"github.com/nats-io/"}, []string{"events", "agent"}},
		{"agent/model", []string{"github.com/nats-io/"}, []string{"events", "agent"}},
		{"agent/tools", []string{"github.com/nats-io/"}, []string{"events", "agent"}},
		// The framework adapters sit on client and nothing of agentd.
		{"client/ag2b", []string{"github.com/nats-io/nats-server"}, below("client")},
		{"client/agentkit", []string{"github.com/nats-io/nats-server"}, below("client")},
		{"client/deepagents", []string{"github.com/nats-io/nats-server"}, below("client")},
		// The HTTP API is a layer on client: no agent loop, no embedded
		// server, no worker, no runner.
		{"audit", []string{"github.com/nats-io/nats-server"}, []string{"internal/directget", "internal/lru"}},
		{"agentd/httpapi", []string{"github.com/nats-io/nats-server"}, below("client", "schemas", "agentd/chat", "audit")},
		// The chat service is an application on client: no HTTP API, no
		// worker, no server.
		{"agentd/chat", []string{"github.com/nats-io/nats-server"}, below("client")},
		{"agentd/retention", []string{"github.com/nats-io/nats-server"}, below("client")},
		// Agent workers run the agent loop on client: no HTTP API, no server.
		{"agentd/worker", []string{"github.com/nats-io/nats-server"}, below("client", "agent")},
		// replay-run drives recorded conversations through the workers.
		{"agentd/replayrun", []string{"github.com/nats-io/nats-server"}, below("client", "agent", "agentd/worker")},
		// agentd import and verify's work: transcripts through client,
		// compared as replay-run compares them.
		{"agentd/importer", []string{"github.com/nats-io/nats-server"}, below("client", "agent", "agentd/worker", "agentd/replayrun", "internal/transcripts")},
		// The web page is static files: nothing of ours, no NATS.
		{"agentd/webui", []string{"github.com/nats-io/"}, nil},
		// agentd's NATS: the embedded server of a data directory (owned or
		// attached to) or a deployment's URL; client and below.
		{"agentd/internal/natsconn", testSupport(), below("client", "internal/datadir", "internal/embedded")},
		// Operator mode's directory: the operator's files and the tenant
		// registry; the caller owns the connections. No client, no server.
		{"agentd/operator", []string{"github.com/nats-io/nats-server"}, append([]string{"events", "threadkey", "internal/tenancy", "internal/datadir"}, leaves...)},
		// The collector's settings agentd serve runs under (also applied by
		// the bench): the standard library only.
		{"internal/memtune", []string{"github.com/nats-io/"}, nil},
		// agentd tls init's certificates: the standard library only.
		{"agentd/internal/tlsfiles", []string{"github.com/nats-io/"}, nil},
		// agentd serve: every part of a deployment in one process (the
		// embedded server through natsconn), no test support.
		{"agentd/serve", testSupport(), below("client", "projector", "audit", "agent", "schemas", "agentd/httpapi",
			"agentd/chat", "agentd/worker", "agentd/retention", "agentd/webui", "agentd/internal/natsconn",
			"internal/datadir", "internal/embedded", "internal/memtune")},
		// The command wires everything (the embedded server included) but
		// imports no test support.
		{"agentd", testSupport(), below("client", "projector", "audit", "agent", "agentd", "schemas",
			"internal/datadir", "internal/embedded", "internal/memtune", "internal/transcripts")},
		// The wire contract is JSON Schema files: nothing of ours, no NATS.
		{"schemas", []string{"github.com/nats-io/"}, nil},
		// The embedded server imports nats-server and nothing of ours.
		{"internal/embedded", nil, nil},
		// The real transcripts turn into events; no NATS.
		{"internal/transcripts", []string{"github.com/nats-io/"}, []string{"events"}},
		// The event registry's generator reads the registry; no NATS.
		{"events/internal/gen", []string{"github.com/nats-io/"}, []string{"events"}},
		{"events/internal/gen/cmd/eventsgen", []string{"github.com/nats-io/"}, []string{"events"}},
		// The fake model's recorder: events only.
		{"agent/internal/recording", []string{"github.com/nats-io/"}, []string{"events", "agent"}},
		// Test support: each sits on what it fakes or starts.
		{"agent/model/modeltest", []string{"github.com/nats-io/"}, []string{"events", "agent"}},
		{"agentd/internal/agenttest", []string{"github.com/nats-io/nats-server"}, below("client", "agent", "agentd/worker")},
		{"client/deepagents/checkpointertest", []string{"github.com/nats-io/nats-server"}, below("client")},
		{"internal/natstest", nil, append([]string{"internal/embedded"}, leaves...)},
		{"internal/tenancy/tenancytest", []string{"github.com/nats-io/nats-server"}, append([]string{"events", "threadkey", "internal/tenancy"}, leaves...)},
		{"internal/nodetest", []string{"github.com/nats-io/"}, nil},
		// The shared set-up of the tests of client and the layers on it: a
		// server (natstest), a client, a projector. Only external test
		// packages import it (client_test's arrow to it is test-only, which
		// go list -deps of client does not follow).
		{"internal/clienttest", nil, below("client", "projector", "internal/natstest", "internal/embedded")},
		// The fold's case table: events and the fold, no NATS.
		{"internal/foldcases", []string{"github.com/nats-io/"}, []string{"events", "fold"}},
		// The test events of every type: events only, no NATS.
		{"internal/eventfixtures", []string{"github.com/nats-io/"}, []string{"events"}},
		// A log buffer for tests: the standard library only.
		{"internal/testlog", []string{"github.com/nats-io/"}, nil},
		{"internal/benchtest", []string{"github.com/nats-io/"}, nil},
		// The cluster tests build with -tags cluster; without it, a doc.go.
		{"deploy/clustertest", []string{"github.com/nats-io/"}, nil},
		// This package: the tests that hold the repository together.
		{".", []string{"github.com/nats-io/"}, nil},
	}
}

// Only internal/embedded (and test-only code) imports nats-server.
func TestOnlyEmbeddedImportsNATSServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, "github.com/nats-io/nats-server") {
				require.Equal(t, mod+"internal/embedded", f[0], "%s imports nats-server", f[0])
			}
		}
	}
}

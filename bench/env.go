package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/embedded"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
	"github.com/convlog/convlog/projector"
	"github.com/convlog/convlog/snapstore"
)

// Names of what the bench adds next to convlog's own stream and buckets.
const (
	// rawStream is the raw JetStream baseline: the same configuration as
	// convlog's stream (provision.StreamConfig) under another name and
	// subject prefix, on the same server, so that the projector does not
	// consume it.
	rawStream = "RAWBENCH"
	rawPrefix = "raw"
	// rawBucket holds the raw KV baseline: one value per thread.
	rawBucket = "rawbench"
	// tenant is the tenant of every convlog thread the bench writes.
	tenant = "default"
)

// appendResources are the stream and buckets of the append section's
// convlog client: a deployment of their own, so that the projector (which
// consumes the default stream) does not have to catch up with the
// append section's events afterwards. Appends never involve the projector.
var appendResources = provision.Config{Stream: "CONVLOG_APPENDS", SubjectPrefix: "capp",
	SnapshotBucket: "capp_snapshots", IndexBucket: "capp_threads"}

// Env is one convlog deployment for the in-process sections: an embedded
// nats-server (JetStream file store in a temp dir, listening on loopback),
// a client on its own TCP connection, and the projector on another, all in
// this process (the shape of `agentd serve` with its embedded server).
type Env struct {
	Dir string
	// Server is the embedded server; nil when the server runs in a process
	// of its own (startEnv with split: srvChild).
	Server   *embedded.Server
	srvChild *child
	url      string
	// auth authenticates a TCP connection to Server (its NKey user);
	// a no-op option for a server in a child process.
	auth nats.Option
	// NC is the connection of the client and of the raw JetStream
	// baseline (the same connection, so both pay the same).
	NC *nats.Conn
	JS jetstream.JetStream
	// Client has the default configuration (a 64 MiB chunk cache), as a
	// service would; UncachedClient is a client of the same connection
	// and resources with the chunk cache off (ChunkCacheBytes -1), so that
	// each of its whole-thread Gets reads every byte from KV.
	Client         *client.Client
	UncachedClient *client.Client
	// AppendClient is a client of the same connection on appendResources;
	// nil after DropAppendResources.
	AppendClient *client.Client
	// LocalClient is a client with the default configuration on an
	// in-process connection to the embedded server, as agentd serve's
	// HTTP API reads (nil when the server runs in a process of its own).
	LocalClient *client.Client
	// TrackedClient is LocalClient with Config.TrackSnapshots, as agentd
	// serve's client (nil when the server runs in a process of its own).
	TrackedClient *client.Client
	localNC       *nats.Conn
	// RawKV is the raw KV baseline bucket; Snaps reads convlog snapshots
	// (chunk cache off: Snapshot.Bytes is the whole snapshot).
	RawKV jetstream.KeyValue
	Snaps *snapstore.Store

	projNC     *nats.Conn
	proj       *projector.Projector
	projCancel context.CancelFunc
	projWG     sync.WaitGroup
	projErr    error

	onApply atomic.Pointer[func(projector.Applied)]
	onStep  atomic.Pointer[func(projector.Step)]
}

// StartEnv starts a server in dir (created if missing) and connects the
// client. The projector is started separately ([Env.StartProjector]) so
// that append latencies are measured without it (see the append section).
func StartEnv(ctx context.Context, dir string) (*Env, error) {
	return startEnv(ctx, dir, false)
}

// startEnv is StartEnv; with split the server runs in a child process of
// its own (the shape of deploy/: nats-server beside the services), while
// the clients and the projector stay in this process.
func startEnv(ctx context.Context, dir string, split bool) (*Env, error) {
	e := &Env{Dir: dir, auth: func(*nats.Options) error { return nil }}
	if split {
		c, err := startChild(roleServer, "", filepath.Join(dir, "nats"))
		if err != nil {
			return nil, err
		}
		e.srvChild, e.url = c, c.URL
	} else {
		cfg, err := tenantAccounts(dir)
		if err != nil {
			return nil, err
		}
		srv, err := embedded.Start(cfg)
		if err != nil {
			return nil, err
		}
		e.Server, e.url = srv, srv.ClientURL()
		if e.auth, err = nats.NkeyOptionFromSeed(cfg.NKeySeed); err != nil {
			srv.Shutdown()
			return nil, err
		}
	}
	var err error
	if e.NC, err = nats.Connect(e.url, nats.Name("convlog-bench-client"), e.auth); err != nil {
		e.Close()
		return nil, err
	}
	if e.JS, err = jetstream.New(e.NC); err != nil {
		e.Close()
		return nil, err
	}
	if e.Client, err = client.New(ctx, e.NC, client.Config{Provision: true}); err != nil {
		e.Close()
		return nil, err
	}
	if e.UncachedClient, err = client.New(ctx, e.NC, client.Config{ChunkCacheBytes: -1}); err != nil {
		e.Close()
		return nil, err
	}
	if e.AppendClient, err = client.New(ctx, e.NC, client.Config{Provision: true, Resources: appendResources}); err != nil {
		e.Close()
		return nil, err
	}
	if e.Server != nil {
		if e.localNC, err = e.Server.Connect(nats.Name("convlog-bench-local-client")); err != nil {
			e.Close()
			return nil, err
		}
		if e.LocalClient, err = client.New(ctx, e.localNC, client.Config{}); err != nil {
			e.Close()
			return nil, err
		}
		if e.TrackedClient, err = client.New(ctx, e.localNC, client.Config{TrackSnapshots: true}); err != nil {
			e.Close()
			return nil, err
		}
	}
	raw := provision.Config{Stream: rawStream, SubjectPrefix: rawPrefix}.StreamConfig()
	if _, err := e.JS.CreateOrUpdateStream(ctx, raw); err != nil {
		e.Close()
		return nil, fmt.Errorf("raw stream: %w", err)
	}
	if e.RawKV, err = e.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: rawBucket, History: 1, Storage: jetstream.FileStorage}); err != nil {
		e.Close()
		return nil, fmt.Errorf("raw KV bucket: %w", err)
	}
	kv, err := e.JS.KeyValue(ctx, provision.DefaultConfig().SnapshotBucket)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.Snaps = snapstore.NewWith(kv, snapstore.Options{ChunkCacheBytes: -1, Sealer: e.UncachedClient.Keys()})
	return e, nil
}

// StartProjector runs the projector in this process, on its own
// connection (in process when the server is embedded, TCP to a server in
// a child process), and waits until it consumes. Its OnApply and OnStep call the
// functions set with [Env.SetOnApply] and [Env.SetOnStep].
func (e *Env) StartProjector(ctx context.Context) error {
	var nc *nats.Conn
	var err error
	if e.Server != nil {
		// In process, as agentd serve's projector connects to its
		// embedded server (internal/embedded's Connect); the writers and
		// readers stay on TCP (other services).
		nc, err = e.Server.Connect(nats.Name("convlog-bench-projector"))
	} else {
		nc, err = nats.Connect(e.url, nats.Name("convlog-bench-projector"), e.auth)
	}
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	p, err := projector.New(js, projector.Config{
		OnApply: func(a projector.Applied) {
			if f := e.onApply.Load(); f != nil {
				(*f)(a)
			}
		},
		OnStep: func(s projector.Step) {
			if f := e.onStep.Load(); f != nil {
				(*f)(s)
			}
		},
	})
	if err != nil {
		nc.Close()
		return err
	}
	pctx, cancel := context.WithCancel(context.Background())
	e.projNC, e.proj, e.projCancel = nc, p, cancel
	e.projWG.Go(func() { e.projErr = p.Run(pctx) })
	select {
	case <-p.Ready():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("projector not ready after 30s")
	}
}

// SetOnApply installs f as the projector's OnApply hook (nil removes it).
// f is called concurrently from the projector's workers.
func (e *Env) SetOnApply(f func(projector.Applied)) {
	if f == nil {
		e.onApply.Store(nil)
		return
	}
	e.onApply.Store(&f)
}

// SetOnStep installs f as the projector's OnStep hook (nil removes it).
func (e *Env) SetOnStep(f func(projector.Step)) {
	if f == nil {
		e.onStep.Store(nil)
		return
	}
	e.onStep.Store(&f)
}

// WaitProjected waits until the projector's durable consumer has no
// undelivered and no unacknowledged message: every event in the stream is
// in a snapshot (the projector acks a trigger after the head holding it is
// written).
func (e *Env) WaitProjected(ctx context.Context) error {
	return provision.WaitConsumerDrained(ctx, e.JS, provision.DefaultConfig().Stream, projector.DefaultConfig().Durable)
}

// WaitHead waits until the snapshot head of thread is at version v or
// later.
func (e *Env) WaitHead(ctx context.Context, thread string, v uint64) error {
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		h, err := e.Snaps.LoadHead(ctx, tenant, thread)
		if err == nil && h.State.Version >= v {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the snapshot of %s at version %d: %w", thread, v, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// ProjectorWritten is what the running projector wrote to KV so far
// (zero without one).
func (e *Env) ProjectorWritten() snapstore.Written {
	if e.proj == nil {
		return snapstore.Written{}
	}
	return e.proj.KVWritten()
}

// StopProjector stops the projector (if running) and waits for it.
func (e *Env) StopProjector() error {
	if e.proj == nil {
		return nil
	}
	e.projCancel()
	e.projWG.Wait()
	e.projNC.Close()
	e.proj = nil
	return e.projErr
}

// DropAppendResources closes AppendClient and deletes what only the append
// section uses: the raw baseline stream (rawStream) and AppendClient's
// stream and buckets (appendResources), hundreds of MB in a full run. A
// deployment has neither, and the sections after the append section
// would otherwise run beside them: their messages' files, the server's
// per-subject state and its duplicate-window ids. The raw KV bucket stays
// (the get section's baseline). Errors are the server's.
func (e *Env) DropAppendResources(ctx context.Context) error {
	if e.AppendClient != nil {
		e.AppendClient.Close()
		e.AppendClient = nil
	}
	for _, s := range []string{rawStream, appendResources.Stream} {
		if err := e.JS.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("delete stream %s: %w", s, err)
		}
	}
	for _, b := range []string{appendResources.SnapshotBucket, appendResources.IndexBucket} {
		if err := e.JS.DeleteKeyValue(ctx, b); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("delete bucket %s: %w", b, err)
		}
	}
	return nil
}

// Close stops everything and removes nothing (the caller owns Dir).
func (e *Env) Close() {
	_ = e.StopProjector()
	if e.Client != nil {
		e.Client.Close()
	}
	if e.UncachedClient != nil {
		e.UncachedClient.Close()
	}
	if e.AppendClient != nil {
		e.AppendClient.Close()
	}
	if e.LocalClient != nil {
		e.LocalClient.Close()
	}
	if e.TrackedClient != nil {
		e.TrackedClient.Close()
	}
	if e.localNC != nil {
		e.localNC.Close()
	}
	if e.NC != nil {
		e.NC.Close()
	}
	if e.Server != nil {
		e.Server.Shutdown()
	}
	if e.srvChild != nil {
		e.srvChild.stop()
	}
}

// serverVersion returns the version of the nats-server the env runs.
func (e *Env) serverVersion() string { return e.NC.ConnectedServerVersion() }

// removeAll removes dir, reporting (not failing on) an error.
func removeAll(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench: removing %s: %v\n", dir, err)
	}
}

// benchTenants is how many tenant accounts the in-process server holds.
const benchTenants = 100

// tenantAccounts is the configuration of an in-process server as agentd
// serve runs its embedded server: authentication by an NKey user (its
// seed written in dir) and convlog's account beside benchTenants tenant
// accounts, one user each, that import their tenants' subjects
// (tenancy.AccountsConf), so that the figures include what accounts cost.
func tenantAccounts(dir string) (embedded.Config, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return embedded.Config{}, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return embedded.Config{}, err
	}
	seed, _ := kp.Seed()
	seedFile := filepath.Join(dir, "bench.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		return embedded.Config{}, err
	}
	var users []tenancy.User
	for i := range benchTenants {
		u, err := nkeys.CreateUser()
		if err != nil {
			return embedded.Config{}, err
		}
		pub, _ := u.PublicKey()
		users = append(users, tenancy.User{Tenant: fmt.Sprintf("t%d", i), PublicKey: pub})
	}
	conf, err := tenancy.AccountsConf(tenancy.AccountsConfig{Resources: provision.DefaultConfig(), Users: users})
	if err != nil {
		return embedded.Config{}, err
	}
	return embedded.Config{StoreDir: filepath.Join(dir, "nats"), NKeySeed: seedFile, Accounts: conf, GlobalAccount: tenancy.ConvlogAccount}, nil
}

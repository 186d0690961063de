// Package clienttest starts what the tests of client and of the layers on
// it share: a real embedded JetStream server ([natstest.Run]), a
// [client.Client] that provisioned it, a projector running when the test
// asks for one, and threads with events. Everything it starts stops at
// the test's cleanup, in the reverse order: projector, client, server.
//
// Only external test packages (client_test, projector_test, ...) import
// it: it imports client and projector, so a package's internal tests
// cannot.
package clienttest

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/projector"
)

// Env is a running server and a client that provisioned it.
type Env struct {
	*natstest.Server
	Client *client.Client
}

// An Option changes what [New] starts.
type Option func(*settings)

type settings struct {
	cfg       client.Config
	projector *projector.Config
}

// WithConfig changes the client's configuration (Provision stays set).
func WithConfig(f func(*client.Config)) Option { return func(s *settings) { f(&s.cfg) } }

// WithProjector also runs a projector configured by cfg (snapshots, and
// the thread index that List reads).
func WithProjector(cfg projector.Config) Option {
	return func(s *settings) { s.projector = &cfg }
}

// New starts one embedded JetStream server and a client on it that
// provisions the stream and buckets.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	var set settings
	for _, o := range opts {
		o(&set)
	}
	s := natstest.Run(t)
	set.cfg.Provision = true
	c, err := client.New(context.Background(), s.NC, set.cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	if set.projector != nil {
		RunProjector(t, s.JS, *set.projector)
	}
	return &Env{Server: s, Client: c}
}

// Another returns a second client of the server, configured by cfg (as
// given: it provisions nothing unless cfg says so), on a connection of
// its own, as another service runs one. Both close at the test's cleanup.
func (e *Env) Another(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	nc, err := e.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c, err := client.New(context.Background(), nc, cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// Projector is a projector running until [Projector.Stop] or the end of
// the test.
type Projector struct {
	*projector.Projector
	cancel context.CancelFunc
	done   chan error
	err    error
	waited bool
}

// RunProjector runs a projector configured by cfg on js and returns once
// it consumes; t fails if it stops before. Its cleanup stops it.
func RunProjector(t testing.TB, js jetstream.JetStream, cfg projector.Config) *Projector {
	t.Helper()
	p, err := projector.New(js, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	rp := &Projector{Projector: p, cancel: cancel, done: make(chan error, 1)}
	go func() { rp.done <- p.Run(ctx) }()
	t.Cleanup(func() { _ = rp.Stop() })
	select {
	case <-p.Ready():
	case err := <-rp.done:
		rp.waited, rp.err = true, err
		t.Fatalf("projector stopped before it was ready: %v", err)
	}
	return rp
}

// Stop stops the projector, waits for it and returns what its Run
// returned (nil after a clean shutdown). Stopping again returns the same.
func (p *Projector) Stop() error {
	p.cancel()
	if !p.waited {
		p.waited, p.err = true, <-p.done
	}
	return p.err
}

// Msg is the NATS message of ev on subject as the client publishes it:
// the event's bytes ([events.Marshal]) and convlog's headers
// ([events.Headers]). t fails if ev does not encode.
func Msg(t testing.TB, subject string, ev events.Event) *nats.Msg {
	t.Helper()
	data, err := events.Marshal(ev)
	require.NoError(t, err)
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range events.Headers(ev) {
		m.Header.Set(k, v)
	}
	return m
}

// User is a user message of text.
func User(text string) events.Event {
	return events.Event{Payload: events.UserMessage{Content: events.Text(text)}}
}

// RepliesOff is the create options of a thread of tenant that no agent
// answers (a new id unless thread is set).
func RepliesOff(tenant, thread string) client.CreateOptions {
	return client.CreateOptions{Tenant: tenant, ThreadID: thread, ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}}
}

// Thread creates a thread with opts through c and appends n user
// messages to it, "message 0" to "message n-1", one append each; it
// returns the thread's id and version.
func Thread(t testing.TB, c *client.Client, opts client.CreateOptions, n int) (thread string, version uint64) {
	t.Helper()
	tenant, thread, v, err := c.CreateThread(context.Background(), opts)
	require.NoError(t, err)
	return thread, AppendUsers(t, c, tenant, thread, v, n, 1, func(i int) string { return fmt.Sprintf("message %d", i) })
}

// AppendUsers appends n user messages to tenant/thread through c, text(i)
// the i-th, in appends of batch events (the last one shorter), each
// expecting the version the one before returned and the first v; it
// returns the thread's version after the last. t fails on any error.
func AppendUsers(t testing.TB, c *client.Client, tenant, thread string, v uint64, n, batch int, text func(i int) string) uint64 {
	t.Helper()
	for i := 0; i < n; i += batch {
		evs := make([]events.Event, min(batch, n-i))
		for j := range evs {
			evs[j] = User(text(i + j))
		}
		res, err := c.Append(context.Background(), tenant, thread, evs, client.ExpectVersion(v))
		require.NoError(t, err)
		v = res.Version
	}
	return v
}

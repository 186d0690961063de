package tenancy_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
)

// BenchmarkScopedRead compares a tenant-scoped client (Config.Tenant: the
// log read through the tenant service) with a client of full permissions
// (batched direct gets), both over TCP to the same server, for a read of a whole
// 100-message thread from the log (Get with AtSeq, which skips the
// snapshot) and a Get of the snapshot (both: KV direct gets). Reported:
// ns/op of each and the scoped/direct ratio.
//
//	go test ./internal/tenancy -run '^$' -bench BenchmarkScopedRead -benchtime 2s
func BenchmarkScopedRead(b *testing.B) {
	d := newDeployment(b, 1)
	d.addUser(b, "acme")
	ctx := context.Background()
	scoped := d.tenantClient(b, d.connect(b, "acme"), "acme")
	auth, err := nats.NkeyOptionFromSeed(d.adminSeed)
	require.NoError(b, err)
	nc, err := nats.Connect(d.srv.ClientURL(), auth)
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	full, err := client.New(ctx, nc, client.Config{})
	require.NoError(b, err)
	_, _, v, err := scoped.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "long"})
	require.NoError(b, err)
	for range 100 {
		r, err := scoped.Append(ctx, "acme", "long", userMessage("a message of some length, as a user would write it"), client.ExpectVersion(v))
		require.NoError(b, err)
		v = r.Version
	}
	_, err = scoped.Get(ctx, "acme", "long", client.AtLeastVersion(v))
	require.NoError(b, err)
	for _, kind := range []struct {
		name string
		opts []client.GetOption
	}{{"log", []client.GetOption{client.AtSeq(v)}}, {"snapshot", nil}} {
		b.Run(kind.name, func(b *testing.B) {
			// Interleaved: each iteration reads once with each client.
			var took [2]time.Duration
			for b.Loop() {
				for i, c := range []*client.Client{full, scoped} {
					start := time.Now()
					th, err := c.Get(ctx, "acme", "long", kind.opts...)
					took[i] += time.Since(start)
					require.NoError(b, err)
					require.Len(b, th.Messages, 100)
				}
			}
			b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "direct-ns/get")
			b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "scoped-ns/get")
			b.ReportMetric(float64(took[1])/float64(took[0]), "scoped/direct")
		})
	}
}

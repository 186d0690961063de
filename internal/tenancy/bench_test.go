package tenancy_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
)

// BenchmarkTenantClient measures what accounts cost a tenant-scoped
// client: a sequential append (one event, expected version) and a Get of
// a thread of 100 messages, by a tenant user in an account of its own
// (its requests cross imports into convlog's account) and by a tenant
// user inside convlog's account (oneAccount, the model accounts replace),
// on the same machine in the same run. BENCHMARKS.md gives the ratio.
func BenchmarkTenantClient(b *testing.B) {
	for _, mode := range []struct {
		name       string
		oneAccount bool
	}{{"one-account", true}, {"tenant-account", false}} {
		d := newDeploymentOf(b, 1, mode.oneAccount)
		d.addUser(b, "acme")
		c := d.tenantClient(b, d.connect(b, "acme"), "acme")
		ctx := context.Background()
		_, _, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "a"})
		require.NoError(b, err)
		b.Run("append/"+mode.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r, err := c.Append(ctx, "acme", "a", userMessage(fmt.Sprint("hello ", i)), client.ExpectVersion(v))
				if err != nil {
					b.Fatal(err)
				}
				v = r.Version
			}
		})
		_, _, gv, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "g"})
		require.NoError(b, err)
		for i := range 100 {
			r, err := c.Append(ctx, "acme", "g", userMessage(fmt.Sprint("message ", i)), client.ExpectVersion(gv))
			require.NoError(b, err)
			gv = r.Version
		}
		b.Run("get/"+mode.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				th, err := c.Get(ctx, "acme", "g")
				if err != nil {
					b.Fatal(err)
				}
				if th.Version < gv {
					b.Fatalf("version %d, want %d", th.Version, gv)
				}
			}
		})
	}
}

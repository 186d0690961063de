package provision_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// A request of Ensure the server never receives is asked again after the
// attempt timeout (the default one, or Config.AttemptTimeout), within the
// caller's deadline: Ensure provisions everything instead of failing at
// the deadline.
func TestEnsureAsksAgainWhatGoesUnanswered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prefix  string
		attempt time.Duration
	}{
		{"a bucket's stream update, after the default attempt timeout", "$JS.API.STREAM.UPDATE.KV_convlog_config", 0},
		{"the event stream's create, after Config.AttemptTimeout", "$JS.API.STREAM.CREATE.CONVLOG", 500 * time.Millisecond},
		{"the get of the partitions record", "$JS.API.DIRECT.GET.KV_convlog_config", 500 * time.Millisecond},
		{"the conditional create of the partitions record", "$KV.convlog_config." + provision.PartitionsKey, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Run(t)
			nc, d := natstest.ConnectDropping(t, srv.ClientURL(), tc.prefix, 1)
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			r, err := provision.Ensure(ctx, js, provision.Config{AttemptTimeout: tc.attempt})
			require.NoError(t, err)
			require.EqualValues(t, 1, d.Dropped.Load(), "the first request was dropped")
			require.EqualValues(t, 2, d.Seen.Load(), "and made again")
			if tc.attempt != 0 {
				require.Less(t, time.Since(start), provision.DefaultAttemptTimeout, "asked again after Config.AttemptTimeout")
			}
			require.Equal(t, "CONVLOG", r.Stream.CachedInfo().Config.Name)
			require.Equal(t, 1, r.Partitions)
			k, err := provision.ReadPartitions(ctx, srv.JS, provision.Config{})
			require.NoError(t, err)
			require.Equal(t, 1, k)
			_, err = srv.JS.KeyValue(ctx, provision.DefaultConfig().TenantBucket)
			require.NoError(t, err, "provisioned to the end")
		})
	}
}

// A negative attempt timeout is a Validate error; zero means the default.
func TestValidateRefusesANegativeAttemptTimeout(t *testing.T) {
	require.ErrorContains(t, provision.Config{AttemptTimeout: -time.Second}.Validate(), "attempt timeout")
	require.NoError(t, provision.Config{}.Validate())
	require.Equal(t, provision.DefaultAttemptTimeout, provision.Config{}.WithDefaults().AttemptTimeout)
}

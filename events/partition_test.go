package events_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

// events.Partition agrees with nats-server's own {{partition(k,1,2)}}
// subject mapping: a real server maps "conv.<tenant>.<thread>" to
// "pmap.<partition>.<tenant>.<thread>" and the partition it chose is the
// one Partition computes, for random ids and several k.
func TestPartitionIsTheServersMapping(t *testing.T) {
	for _, k := range []int{2, 3, 7} {
		dir := t.TempDir()
		conf := filepath.Join(dir, "nats.conf")
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`listen: 127.0.0.1:-1
mappings: { "conv.*.*": "pmap.{{partition(%d,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}" }
`, k)), 0o600))
		opts, err := server.ProcessConfigFile(conf)
		require.NoError(t, err)
		opts.NoSigs, opts.NoLog = true, true
		s, err := server.NewServer(opts)
		require.NoError(t, err)
		go s.Start()
		require.True(t, s.ReadyForConnections(10*time.Second))
		nc, err := nats.Connect(s.ClientURL())
		require.NoError(t, err)
		sub, err := nc.SubscribeSync("pmap.>")
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		seen := map[int]bool{}
		for i := range 200 {
			tenant, thread := fmt.Sprintf("tenant-%d", i%7), events.NewID()
			require.NoError(t, nc.Publish("conv."+tenant+"."+thread, nil))
			m, err := sub.NextMsg(5 * time.Second)
			require.NoError(t, err)
			tok := strings.Split(m.Subject, ".")
			require.Equal(t, []string{tenant, thread}, tok[2:], m.Subject)
			p, err := strconv.Atoi(tok[1])
			require.NoError(t, err)
			require.Equal(t, p, events.Partition(tenant, thread, k), "k=%d %s/%s", k, tenant, thread)
			seen[p] = true
		}
		require.Len(t, seen, k, "every partition of %d is used", k)
		nc.Close()
		s.Shutdown()
	}
	require.Zero(t, events.Partition("a", "b", 1))
	require.Zero(t, events.Partition("a", "b", 0))
}

//go:build cluster

package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/threadkey"
)

// eraseLeavesNothing checks that erase means gone on the 3-node
// cluster: a thread's text, title and blob are in no file of any node's
// store directory in the clear (sealed with the thread's data key), and
// after the erasure the key is in no replica's stream files either
// (JetStream's secure delete overwrote it on every node) at once, and in
// no file at all once JetStream has compacted the key stream's raft logs
// (it snapshots a changed stream every 2 to 3 minutes; the test waits up
// to 5). docs/audit.md reports the time measured.
func (top *topology) eraseLeavesNothing(t *testing.T, logf func(*testing.T, string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const marker = "CLUSTER-GONE-MARKER-93ae1"
	c := top.c
	_, thread, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "erase", ThreadCreated: events.ThreadCreated{Title: "title " + marker, Replies: events.RepliesOff}})
	require.NoError(t, err)
	for i := range 10 {
		res, err := c.Append(ctx, "erase", thread, []events.Event{{Payload: events.UserMessage{Content: events.Text(fmt.Sprintf("text %d %s", i, marker))}}}, client.ExpectVersion(v))
		require.NoError(t, err)
		v = res.Version
	}
	_, err = c.PutBlob(ctx, "erase", thread, "doc", "text/plain", strings.NewReader(strings.Repeat("blob "+marker+" ", 10_000)), 0)
	require.NoError(t, err)
	require.NoError(t, poll(30*time.Second, 50*time.Millisecond, func() error {
		th, err := c.Get(ctx, "erase", thread)
		if err != nil {
			return err
		}
		if th.Version < v {
			return fmt.Errorf("projected up to %d of %d", th.Version, v)
		}
		return nil
	}), "the projector wrote the thread's snapshot")
	keys, err := top.js.KeyValue(ctx, top.c.For("erase", thread).Config().Resources.KeyBucket)
	require.NoError(t, err)
	rec, err := keys.Get(ctx, threadkey.Key("erase", thread))
	require.NoError(t, err)
	key := bytes.Clone(rec.Value()[9:])

	for _, n := range top.nats.nodes {
		require.Empty(t, natstest.FilesContaining(t, n.storeDir, []byte(marker)), "clear text on %s", n.name)
		require.NotEmpty(t, natstest.FilesContaining(t, n.storeDir, key), "the key is on %s before the erasure (else the check below proves nothing)", n.name)
	}
	rep, err := c.Erase(ctx, "erase", thread, "cluster test")
	require.NoError(t, err)
	require.True(t, rep.KeyDestroyed)
	var inRaft []string
	require.NoError(t, poll(30*time.Second, 100*time.Millisecond, func() error {
		inRaft = nil
		for _, n := range top.nats.nodes {
			for _, f := range natstest.FilesContaining(t, n.storeDir, key) {
				if !strings.Contains(f, string(filepath.Separator)+"_js_"+string(filepath.Separator)) {
					return fmt.Errorf("the destroyed key is still in %s", f)
				}
				inRaft = append(inRaft, f)
			}
			if f := natstest.FilesContaining(t, n.storeDir, []byte(marker)); len(f) > 0 {
				return fmt.Errorf("clear text in %v", f)
			}
		}
		return nil
	}), "no stream file of any node holds the destroyed key")
	logf(t, "erased %s/%s: no clear byte of it on any node; its destroyed key is in no stream file; copies in raft logs (compacted later): %d", "erase", thread, len(inRaft))
	t0 := time.Now()
	require.NoError(t, poll(5*time.Minute, time.Second, func() error {
		for _, n := range top.nats.nodes {
			if f := natstest.FilesContaining(t, n.storeDir, key); len(f) > 0 {
				return fmt.Errorf("the destroyed key is still in %v", f)
			}
		}
		return nil
	}))
	logf(t, "raft logs compacted: the key is in no file after %s", time.Since(t0).Round(time.Second))
}

package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/projector"
)

// TestPartitionedDeployment runs a deployment of 3 partitions on a real
// server: K is recorded by the first provisioning and learned by every
// later client; each thread's events are stored in its partition's stream
// (events.Partition) and only there; one projector per partition
// projects them; Get, List (merged and paged across partitions), Watch,
// forks across partitions and the per-partition durable consumers work;
// an event a raw publisher put in the wrong partition is not projected.
func TestPartitionedDeployment(t *testing.T) {
	s := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const k = 3
	c, err := client.New(ctx, s.NC, client.Config{Provision: true, Resources: provision.Config{Partitions: k}})
	require.NoError(t, err)
	require.Len(t, c.Partitions(), k)

	// K is the deployment's: a later client learns it, another K is refused.
	c2, err := client.New(ctx, s.NC, client.Config{})
	require.NoError(t, err)
	require.Len(t, c2.Partitions(), k)
	_, err = client.New(ctx, s.NC, client.Config{Provision: true, Resources: provision.Config{Partitions: 2}})
	require.ErrorContains(t, err, "the deployment has 3 partitions")

	var mu sync.Mutex
	misplaced := map[string]bool{}
	for p := range k {
		pr, err := projector.New(s.JS, projector.Config{Partition: p, OnFailure: func(f projector.Failure) {
			if f.Reason == projector.FailureMisplaced {
				mu.Lock()
				misplaced[f.Tenant+"/"+f.Thread] = true
				mu.Unlock()
			}
		}})
		require.NoError(t, err)
		pctx, pcancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = pr.Run(pctx) }()
		t.Cleanup(func() { pcancel(); <-done })
		<-pr.Ready()
	}

	// 30 threads land in every partition, each in its own stream only.
	const n = 30
	perPartition := make([]int, k)
	threads := make([]string, n)
	for i := range threads {
		threads[i] = fmt.Sprintf("thread-%02d", i)
		_, _, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: threads[i],
			ThreadCreated: events.ThreadCreated{Replies: events.RepliesOff}})
		require.NoError(t, err)
		_, err = c.Append(ctx, "acme", threads[i], []events.Event{{Payload: events.UserMessage{Content: events.Text("hello " + threads[i])}}}, client.ExpectVersion(v))
		require.NoError(t, err)
		perPartition[events.Partition("acme", threads[i], k)]++
	}
	for p, pc := range c.Partitions() {
		require.Positive(t, perPartition[p], "partition %d got no thread of %d", p, n)
		info, err := s.JS.Stream(ctx, pc.Config().Resources.Stream)
		require.NoError(t, err)
		si, err := info.Info(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2*perPartition[p], si.State.Msgs, "events in stream %s", si.Config.Name)
		require.Equal(t, []string{fmt.Sprintf("%s.*.*", pc.Subjects().Prefix), pc.Subjects().Prefix + ".audit"}, si.Config.Subjects)
	}
	for _, th := range threads {
		got, err := c2.Get(ctx, "acme", th, client.Consistent())
		require.NoError(t, err)
		require.Len(t, got.Messages, 1)
		require.Equal(t, "hello "+th, got.Messages[0].Content.Text)
		require.Same(t, c2.Partitions()[events.Partition("acme", th, k)], c2.For("acme", th))
	}

	// List merges the partitions' index buckets, newest first, paged.
	require.Eventually(t, func() bool {
		page, err := c.List(ctx, "acme", client.ListOptions{Limit: client.MaxListLimit})
		return err == nil && len(page.Threads) == n
	}, 30*time.Second, 50*time.Millisecond, "the projectors did not index every thread")
	seen := map[string]bool{}
	opts := client.ListOptions{Limit: 7}
	for {
		page, err := c.List(ctx, "acme", opts)
		require.NoError(t, err)
		for i, ts := range page.Threads {
			require.False(t, seen[ts.Thread], "thread %s listed twice", ts.Thread)
			seen[ts.Thread] = true
			if i > 0 {
				require.False(t, ts.UpdatedAt.After(page.Threads[i-1].UpdatedAt), "not newest first")
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	require.Len(t, seen, n)

	// Watch of a thread in the last partition sees a new message.
	var last string
	for _, th := range threads {
		if events.Partition("acme", th, k) == k-1 {
			last = th
		}
	}
	w, err := c.Watch(ctx, "acme", last, client.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	_, err = c2.Append(ctx, "acme", last, []events.Event{{Payload: events.UserMessage{Content: events.Text("watched")}}}, client.AnyVersion())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		select {
		case u := <-w.C:
			if u.Event != nil {
				if um, ok := u.Event.Payload.(events.UserMessage); ok && um.Content.Text == "watched" {
					return true
				}
			}
		default:
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "watch did not see the append")

	// A fork by reference into another partition folds its source's history.
	var src, dst string
	for _, a := range threads {
		for i := range 100 {
			b := fmt.Sprintf("fork-%s-%d", a, i)
			if events.Partition("acme", b, k) != events.Partition("acme", a, k) {
				src, dst = a, b
				break
			}
		}
		if src != "" {
			break
		}
	}
	_, _, _, err = c.Fork(ctx, "acme", src, client.ForkOptions{ThreadID: dst, ByReference: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := c.Get(ctx, "acme", dst)
		return err == nil && len(got.Messages) == 1 && got.Messages[0].Content.Text == "hello "+src
	}, 10*time.Second, 20*time.Millisecond, "the projected fork lacks its source's history")

	// Durable consumers are per partition.
	_, err = c.ConsumeDurable(ctx, client.DurableConfig{Name: "workers"})
	require.ErrorContains(t, err, "consume each one through Client.Partitions()")
	d, err := c.Partitions()[1].ConsumeDurable(ctx, client.DurableConfig{Name: "workers"})
	require.NoError(t, err)
	msg, err := d.Next()
	require.NoError(t, err)
	tenant, thread, err := c.Partitions()[1].Subjects().Parse(msg.Subject())
	require.NoError(t, err)
	require.Equal(t, 1, events.Partition(tenant, thread, k))
	d.Stop()

	// A raw publisher that puts a thread in the wrong partition: stored
	// (the server cannot know), never projected, reported.
	var wrong string
	for i := range 100 {
		if th := fmt.Sprintf("wrong-%d", i); events.Partition("acme", th, k) != 0 {
			wrong = th
			break
		}
	}
	subj, err := c.Partitions()[0].Subjects().Thread("acme", wrong)
	require.NoError(t, err)
	data, err := events.Marshal(events.New("acme", wrong, "raw", events.ThreadCreated{Replies: events.RepliesOff}))
	require.NoError(t, err)
	m := nats.NewMsg(subj)
	m.Data = data
	_, err = s.JS.PublishMsg(ctx, m)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return misplaced["acme/"+wrong]
	}, 10*time.Second, 20*time.Millisecond, "the misplaced event was not reported")
	_, err = c.Get(ctx, "acme", wrong)
	require.ErrorIs(t, err, client.ErrThreadNotFound)
}

// TestPartitionsRefusedOnUnpartitionedData: a stream that already holds
// events placed without partitions cannot be given K > 1 (its threads
// would move); K = 1 goes on working and is then recorded.
func TestPartitionsRefusedOnUnpartitionedData(t *testing.T) {
	s := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// a deployment made before partitions existed: stream, no record
	_, err := s.JS.CreateStream(ctx, provision.Config{}.StreamConfig())
	require.NoError(t, err)
	data, err := events.Marshal(events.New("acme", "old", "raw", events.ThreadCreated{Replies: events.RepliesOff}))
	require.NoError(t, err)
	_, err = s.JS.Publish(ctx, "conv.acme.old", data)
	require.NoError(t, err)

	_, err = client.New(ctx, s.NC, client.Config{Provision: true, Resources: provision.Config{Partitions: 3}})
	require.ErrorContains(t, err, "already holds 1 events placed without partitions")
	c, err := client.New(ctx, s.NC, client.Config{Provision: true})
	require.NoError(t, err)
	require.Len(t, c.Partitions(), 1)
	th, err := c.Get(ctx, "acme", "old", client.Consistent())
	require.NoError(t, err)
	require.Equal(t, "old", th.Thread)
	k, err := provision.ReadPartitions(ctx, s.JS, provision.Config{})
	require.NoError(t, err)
	require.Equal(t, 1, k)
}

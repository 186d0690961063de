package quota_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/quota"
)

// env is a real server with convlog's resources, an admin client and a
// meter with limits.
type env struct {
	c     *client.Client
	mu    sync.Mutex
	usage map[string]quota.Usage
}

func newEnv(t *testing.T, limits quota.Config) *env { return newEnvK(t, limits, 1) }

// newEnvK is newEnv on a deployment of k partitions, with a meter per
// partition (as agentd serve runs them).
func newEnvK(t *testing.T, limits quota.Config, k int) *env {
	t.Helper()
	s, _ := natstest.Provisioned(t, provision.Config{Partitions: k})
	ctx := context.Background()
	c, err := client.New(ctx, s.NC, client.Config{})
	require.NoError(t, err)
	require.Len(t, c.Partitions(), k)
	e := &env{c: c, usage: map[string]quota.Usage{}}
	for _, pc := range c.Partitions() {
		m, err := quota.NewMeter(ctx, s.JS, quota.MeterConfig{Resources: pc.Config().Resources, Limits: limits, OnUsage: func(tenant string, u quota.Usage) {
			e.mu.Lock()
			e.usage[tenant] = u
			e.mu.Unlock()
		}})
		require.NoError(t, err)
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = m.Run(mctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return e
}

func (e *env) get(tenant string) quota.Usage {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.usage[tenant]
}

func (e *env) thread(t *testing.T, tenant, thread string) {
	t.Helper()
	_, _, _, err := e.c.CreateThread(context.Background(), client.CreateOptions{Tenant: tenant, ThreadID: thread})
	require.NoError(t, err)
}

func (e *env) say(tenant, thread, text string) error {
	_, err := e.c.Append(context.Background(), tenant, thread, []events.Event{{Payload: events.UserMessage{Content: events.Text(text)}}}, client.AnyVersion())
	return err
}

// A tenant over its storage quota gets a clear error naming the limit and
// its usage; another tenant is unaffected; deleting stays allowed, and
// erasing a thread gives its bytes back, after which the tenant writes
// again.
func TestStorageQuota(t *testing.T) {
	const limit = 20_000
	e := newEnv(t, quota.Config{Tenants: map[string]quota.Limits{"acme": {StorageBytes: limit}}})
	e.thread(t, "acme", "big")
	e.thread(t, "globex", "other")
	text := strings.Repeat("x", 1000)
	var qe *quota.Error
	deadline := time.Now().Add(30 * time.Second)
	stored := 0
	for time.Now().Before(deadline) {
		err := e.say("acme", "big", text)
		if errors.As(err, &qe) {
			break
		}
		require.NoError(t, err)
		stored++
		time.Sleep(5 * time.Millisecond)
	}
	require.NotNil(t, qe, "no quota error after %d appends of 1 KB", stored)
	require.ErrorIs(t, qe, client.ErrQuotaExceeded)
	require.Equal(t, quota.KindStorage, qe.Kind)
	require.Equal(t, int64(limit), qe.Limit)
	require.GreaterOrEqual(t, qe.Used, int64(limit))
	require.Contains(t, qe.Error(), "tenant acme stores")
	require.Contains(t, qe.Error(), "limit of 20000 bytes")
	// It stays refused (the limit is soft: the writes of about a check
	// interval and a metering round got through, see the package doc).
	t.Logf("%d appends of 1 KB stored under a limit of %d bytes", stored, limit)
	for range 20 {
		require.ErrorIs(t, e.say("acme", "big", text), client.ErrQuotaExceeded)
	}
	u := e.get("acme")
	require.GreaterOrEqual(t, u.Bytes, int64(limit))
	require.Equal(t, int64(limit), u.Limits.StorageBytes)

	// Another tenant is unaffected.
	require.NoError(t, e.say("globex", "other", text))
	// Removing content is never refused.
	_, err := e.c.Delete(context.Background(), "acme", "big", "free space")
	require.NoError(t, err)
	// Erasing gives the thread's bytes back; then acme writes again.
	_, err = e.c.Erase(context.Background(), "acme", "big", "free space")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.get("acme").Bytes < 2000 }, 10*time.Second, 20*time.Millisecond,
		"usage after the erasure: %+v", e.get("acme"))
	// (once the writer's check interval has passed)
	time.Sleep(quota.CheckTTL)
	e.thread(t, "acme", "small")
	require.NoError(t, e.say("acme", "small", "hello"))
}

// On a deployment of 3 partitions the meters of the partitions add up one
// tenant's usage: a tenant writing to threads of every partition reaches
// its storage quota with what all of them stored, and every event is
// counted once.
func TestStorageQuotaAcrossPartitions(t *testing.T) {
	const limit = 30_000
	e := newEnvK(t, quota.Config{Tenants: map[string]quota.Limits{"acme": {StorageBytes: limit}}}, 3)
	var threads []string
	used := map[int]bool{}
	for i := 0; len(used) < 3; i++ {
		th := fmt.Sprintf("t%d", i)
		if p := events.Partition("acme", th, 3); !used[p] {
			used[p] = true
			threads = append(threads, th)
			e.thread(t, "acme", th)
		}
	}
	text := strings.Repeat("x", 1000)
	var qe *quota.Error
	stored := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && qe == nil; stored++ {
		err := e.say("acme", threads[stored%len(threads)], text)
		if errors.As(err, &qe) {
			break
		}
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	require.NotNil(t, qe, "no quota error after %d appends of 1 KB over 3 partitions", stored)
	// Each event of every partition is counted once (creations and
	// messages), and all their bytes: the usage is the three partitions'
	// sum, not one partition's.
	require.Eventually(t, func() bool {
		u := e.get("acme")
		return u.Events == int64(len(threads)+stored) && u.Bytes >= int64(stored*1000)
	}, 10*time.Second, 20*time.Millisecond, "usage %+v after %d creations and %d messages of 1 KB", e.get("acme"), len(threads), stored)
	t.Logf("%d appends of 1 KB over 3 partitions stored under a limit of %d bytes; usage %+v", stored, limit, e.get("acme"))
}

// A tenant that stores more events in a second than its rate limit gets
// a rate error with a retry delay; another tenant is unaffected; after
// the delay it writes again.
func TestRateQuota(t *testing.T) {
	e := newEnv(t, quota.Config{Default: quota.Limits{EventsPerSecond: 20}, Tenants: map[string]quota.Limits{"globex": {}}})
	e.thread(t, "acme", "fast")
	e.thread(t, "globex", "fast")
	var qe *quota.Error
	n := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && qe == nil; n++ {
		err := e.say("acme", "fast", "tick")
		if !errors.As(err, &qe) {
			require.NoError(t, err)
		}
	}
	require.NotNil(t, qe, "no rate error after %d appends", n)
	require.Equal(t, quota.KindRate, qe.Kind)
	require.Equal(t, int64(20), qe.Limit)
	require.Greater(t, qe.Used, int64(20))
	require.Positive(t, qe.RetryAfter)
	require.LessOrEqual(t, qe.RetryAfter, quota.RateHold+time.Second, "held until RateHold after the second ended")
	require.Contains(t, qe.Error(), "events per second")
	// globex (no limit) writes as fast as it likes meanwhile.
	for range 50 {
		require.NoError(t, e.say("globex", "fast", "tick"))
	}
	// The appends made before the check saw the first refusal may have
	// filled the next second over the limit too, which holds the tenant
	// longer: wait for the delay the latest refusal gives, as a client
	// that honours Retry-After does.
	wait := qe.RetryAfter
	for attempt := 0; ; attempt++ {
		time.Sleep(wait + quota.CheckTTL)
		err := e.say("acme", "fast", "later")
		if err == nil {
			break
		}
		var again *quota.Error
		require.True(t, errors.As(err, &again) && again.Kind == quota.KindRate, "after the delay: %v", err)
		require.Less(t, attempt, 2, "still refused after %d delays: %v", attempt+1, err)
		require.LessOrEqual(t, again.RetryAfter, quota.RateHold+time.Second, "held until RateHold after the second ended")
		wait = again.RetryAfter
	}
}

func TestLoadFileNamesWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "q.json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	c, err := quota.LoadFile(write(`{"default":{"storage_bytes":100},"tenants":{"acme":{"events_per_second":5}}}`))
	require.NoError(t, err)
	require.Equal(t, quota.Limits{StorageBytes: 100}, c.For("other"))
	require.Equal(t, quota.Limits{EventsPerSecond: 5}, c.For("acme"))
	_, err = quota.LoadFile(write(`{"tenants":{"a.b":{}}}`))
	require.ErrorContains(t, err, `tenant "a.b"`)
	_, err = quota.LoadFile(write(`{"tenants":{"acme":{"storage_bytes":-1}}}`))
	require.ErrorContains(t, err, "tenant acme: limits must be >= 0")
	_, err = quota.LoadFile(write(`{"default":{"bytes":1}}`))
	require.ErrorContains(t, err, `unknown field "bytes"`)
}

// BenchmarkCheckCached is the cost a quota check adds to an append when
// the tenant's record is cached (every append but one per CheckTTL).
//
//	go test ./internal/quota -run '^$' -bench BenchmarkCheckCached
func BenchmarkCheckCached(b *testing.B) {
	s, _ := natstest.Provisioned(b, provision.Config{})
	c := quota.NewChecker(s.JS, provision.DefaultConfig().UsageBucket)
	ctx := context.Background()
	require.NoError(b, c.Check(ctx, "acme"))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.Check(ctx, "acme"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agentd/internal/agenttest"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
)

func setup(t *testing.T) (*client.Client, *natstest.Server, map[string]*worker.Agent) {
	e := clienttest.New(t)
	return e.Client, e.Server, agenttest.Demo(t, 0)
}

// finalAnswers reports whether every user message of th is followed by a
// final assistant answer, and counts the user messages and final answers.
func finalAnswers(th *client.Thread) (users, finals int, ok bool) {
	ok = true
	pendingUser := false
	for _, m := range th.Messages {
		switch {
		case m.Role == events.RoleUser:
			if pendingUser {
				ok = false
			}
			users++
			pendingUser = true
		case m.Role == events.RoleAssistant && len(m.ToolCalls) == 0:
			finals++
			if !pendingUser {
				ok = false
			}
			pendingUser = false
		}
	}
	return users, finals, ok && !pendingUser
}

// answered reads thread th of the default tenant (consistent) and reports
// whether it holds n user messages, each followed by its final answer; a
// failed read is not answered yet.
func answered(ctx context.Context, c *client.Client, th string, n int) bool {
	got, err := c.Get(ctx, "default", th, client.Consistent())
	if err != nil {
		return false
	}
	u, f, ok := finalAnswers(got)
	return ok && u == n && f == n
}

func TestWorkersAnswerEveryUserMessageOnce(t *testing.T) {
	c, s, agents := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		p, err := worker.New(c, s.NC, worker.Config{Agents: agents, Concurrency: 4})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Run(ctx) }()
		<-p.Ready()
	}
	const threads, msgs = 200, 5
	var ids []string
	for i := 0; i < threads; i++ {
		_, th, _, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
		require.NoError(t, err)
		ids = append(ids, th)
	}
	var aw sync.WaitGroup
	for _, th := range ids {
		aw.Add(1)
		go func() {
			defer aw.Done()
			for j := 0; j < msgs; j++ {
				text := fmt.Sprintf("hello %d", j)
				if j == 1 {
					text = "what time is it?"
				}
				// Wait until the previous message is answered, then ask the next.
				require.Eventually(t, func() bool { return answered(ctx, c, th, j) }, 120*time.Second, 100*time.Millisecond)
				_, err := c.Append(ctx, "default", th, []events.Event{{Payload: events.UserMessage{Content: events.Text(text)}}}, client.AnyVersion())
				require.NoError(t, err)
			}
		}()
	}
	aw.Wait()
	for _, th := range ids {
		require.Eventually(t, func() bool {
			got, err := c.Get(ctx, "default", th, client.Consistent())
			require.NoError(t, err)
			u, f, ok := finalAnswers(got)
			return ok && u == msgs && f == msgs
		}, 120*time.Second, 100*time.Millisecond, "thread %s", th)
		got, err := c.Get(ctx, "default", th, client.Consistent())
		require.NoError(t, err)
		require.Zero(t, got.RejectedCount)
	}
	cancel()
	wg.Wait()
}

// A worker cancelled at 20 random points of turns with tool calls: after
// another worker takes over, every user message has exactly one complete
// answer, every tool call exactly one result, and nothing was rejected.
func TestWorkerCancelledAtRandomPointsAnswersOnce(t *testing.T) {
	c, s, _ := setup(t)
	slow, err := model.NewOffline(model.OfflineConfig{TokenDelay: 200 * time.Microsecond})
	require.NoError(t, err)
	agents := map[string]*worker.Agent{"demo": {Provider: slow, Tools: agenttest.ClockTools{}}}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		_, th, v, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
		require.NoError(t, err)
		pctx, cancel := context.WithCancel(ctx)
		p, err := worker.New(c, s.NC, worker.Config{Agents: agents, Consumer: "kill-test", AckWait: time.Second})
		require.NoError(t, err)
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Run(pctx) }()
		<-p.Ready()
		_, err = c.Append(ctx, "default", th, []events.Event{{Payload: events.UserMessage{Content: events.Text("what time is it? tell me the time now")}}}, client.ExpectVersion(v))
		require.NoError(t, err)
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // the random kill point
		cancel()
		<-done
		// Another worker takes over.
		p2, err := worker.New(c, s.NC, worker.Config{Agents: agents, Consumer: "kill-test", AckWait: time.Second})
		require.NoError(t, err)
		p2ctx, cancel2 := context.WithCancel(ctx)
		done2 := make(chan struct{})
		go func() { defer close(done2); _ = p2.Run(p2ctx) }()
		require.Eventually(t, func() bool { return answered(ctx, c, th, 1) }, 30*time.Second, 5*time.Millisecond, "round %d", i)
		cancel2()
		<-done2
		got, err := c.Get(ctx, "default", th, client.Consistent())
		require.NoError(t, err)
		require.Zero(t, got.RejectedCount)
		require.Empty(t, got.Pending)
		calls, results := 0, 0
		for _, m := range got.Messages {
			calls += len(m.ToolCalls)
			if m.Role == events.RoleTool {
				results++
			}
		}
		require.Equal(t, calls, results)
	}
}

// countingProvider counts model calls.
type countingProvider struct {
	model.Provider
	n atomic.Int64
}

func (c *countingProvider) Generate(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	c.n.Add(1)
	return c.Provider.Generate(ctx, req, onDelta)
}

// A tool-calling turn costs exactly two model calls: the tool results the
// worker appended with its step do not start a second, concurrent step.
func TestToolStepIsGeneratedOnce(t *testing.T) {
	c, s, _ := setup(t)
	off, err := model.NewOffline(model.OfflineConfig{})
	require.NoError(t, err)
	cp := &countingProvider{Provider: off}
	p, err := worker.New(c, s.NC, worker.Config{Agents: map[string]*worker.Agent{"demo": {Provider: cp, Tools: agenttest.ClockTools{}}}, Concurrency: 4})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-p.Ready()
	const turns = 10
	var ids []string
	for i := 0; i < turns; i++ {
		_, th, v, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
		require.NoError(t, err)
		_, err = c.Append(ctx, "default", th, []events.Event{{Payload: events.UserMessage{Content: events.Text("what time is it?")}}}, client.ExpectVersion(v))
		require.NoError(t, err)
		ids = append(ids, th)
	}
	for _, th := range ids {
		require.Eventually(t, func() bool { return answered(ctx, c, th, 1) }, 30*time.Second, 10*time.Millisecond)
	}
	require.Equal(t, int64(2*turns), cp.n.Load())
}

// Shutdown stops a running pool after its turns in flight and returns once
// Run has returned; before Run it makes Run return at once.
func TestPoolShutdownStopsRunAndWaits(t *testing.T) {
	c, s, agents := setup(t)
	p, err := worker.New(c, s.NC, worker.Config{Agents: agents})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	<-p.Ready()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, th, _, err := c.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
	require.NoError(t, err)
	_, err = c.Append(ctx, "default", th, []events.Event{{Payload: events.UserMessage{Content: events.Text("hello")}}}, client.AnyVersion())
	require.NoError(t, err)
	require.NoError(t, p.Shutdown(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	default:
		t.Fatal("Shutdown returned before Run did")
	}

	early, err := worker.New(c, s.NC, worker.Config{Agents: agents, Consumer: "early"})
	require.NoError(t, err)
	require.NoError(t, early.Shutdown(ctx))
	require.NoError(t, early.Run(context.Background()), "Run after Shutdown returns at once")
}

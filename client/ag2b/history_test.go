package ag2b_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/ag2b"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
)

// env is one embedded server with two clients on separate connections:
// "this" service (which holds the History) and "another" service.
type env struct {
	s        *natstest.Server
	c, other *client.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := clienttest.New(t)
	return &env{s: e.Server, c: e.Client, other: e.Another(t, client.Config{})}
}

// thread creates a thread with the given user messages.
func (e *env) thread(t *testing.T, id string, texts ...string) {
	t.Helper()
	ctx := context.Background()
	_, _, _, err := e.c.CreateThread(ctx, client.CreateOptions{ThreadID: id})
	require.NoError(t, err)
	for _, s := range texts {
		_, err := e.c.Append(ctx, events.DefaultTenant, id, []events.Event{userEv(s)}, client.AnyVersion())
		require.NoError(t, err)
	}
}

func open(t *testing.T, c *client.Client, thread string) *ag2b.History {
	t.Helper()
	h, err := ag2b.New(context.Background(), c, "", thread)
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

func userEv(s string) events.Event {
	return events.Event{Payload: events.UserMessage{Content: events.Text(s)}}
}

func assistantEv(s string, calls ...events.ToolCall) events.Event {
	p := events.AssistantMessage{ToolCalls: calls}
	if s != "" {
		p.Content = events.Text(s)
	}
	return events.Event{Payload: p}
}

func texts(ms []events.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Role) + ":" + m.Content.String()
	}
	return out
}

// sameSlice reports whether a and b are the same slice value: same
// backing array, same length.
func sameSlice(a, b []events.Message) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// counter counts listener calls.
type counter struct{ n atomic.Int64 }

func (c *counter) listen() { c.n.Add(1) }

func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, msg)
}

func TestSnapshotIsTheSameSliceUntilTheHistoryChanges(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "same", "one", "two")
	h := open(t, e.c, "same")

	s1 := h.Snapshot()
	require.Equal(t, []string{"user:one", "user:two"}, texts(s1))
	require.True(t, sameSlice(s1, h.Snapshot()), "two reads without a change")

	// An event that is not a history change (state.set) keeps the slice.
	v, err := e.other.SetState(ctx, events.DefaultTenant, "same", "k", 1)
	require.NoError(t, err)
	require.NoError(t, h.WaitVersion(ctx, v))
	require.True(t, sameSlice(s1, h.Snapshot()), "a state change is not a history change")

	// A rejected event changes nothing either.
	subject, err := e.c.Subjects().Thread(events.DefaultTenant, "same")
	require.NoError(t, err)
	_, err = e.s.JS.Publish(ctx, subject, []byte("not an event"))
	require.NoError(t, err)
	eventually(t, func() bool { return h.Version() > v }, "the undecodable event is folded")
	require.True(t, sameSlice(s1, h.Snapshot()), "a rejected event is not a history change")

	// A message is.
	res, err := e.other.Append(ctx, events.DefaultTenant, "same", []events.Event{assistantEv("three")}, client.AnyVersion())
	require.NoError(t, err)
	require.NoError(t, h.WaitVersion(ctx, res.Version))
	s2 := h.Snapshot()
	require.False(t, sameSlice(s1, s2))
	require.Equal(t, []string{"user:one", "user:two", "assistant:three"}, texts(s2))
	require.Equal(t, []string{"user:one", "user:two"}, texts(s1), "an earlier snapshot does not change")
	require.Equal(t, res.Version, s2[2].Seq)
}

// Every kind of change, made by another service's client, reaches this
// History's snapshot and listeners.
func TestListenersAreCalledAfterEveryChangeByAnyWriter(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "live")
	h := open(t, e.c, "live")
	var calls counter
	unsubscribe := h.Subscribe(calls.listen)
	defer unsubscribe()

	steps := []struct {
		name   string
		change func(t *testing.T) uint64
		want   []string
	}{
		{"a user message appended by another service", func(t *testing.T) uint64 {
			res, err := e.other.Append(ctx, events.DefaultTenant, "live", []events.Event{userEv("hi")}, client.AnyVersion())
			require.NoError(t, err)
			return res.Version
		}, []string{"user:hi"}},
		{"an atomic turn with a tool call and its result", func(t *testing.T) uint64 {
			res, err := e.other.Append(ctx, events.DefaultTenant, "live", []events.Event{
				assistantEv("", events.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`}),
				{Payload: events.ToolResult{ToolCallID: "c1", Content: events.Text("noon")}},
				assistantEv("It is noon."),
			}, client.AnyVersion())
			require.NoError(t, err)
			return res.Version
		}, []string{"user:hi", "assistant:", "tool:noon", "assistant:It is noon."}},
		{"a reset by this History", func(t *testing.T) uint64 {
			v, err := h.Reset(ctx)
			require.NoError(t, err)
			require.Empty(t, h.Snapshot(), "reset returns once the snapshot shows it")
			return v
		}, []string{}},
		{"a restore by this History", func(t *testing.T) uint64 {
			v, err := h.Restore(ctx, []events.Message{
				{Role: events.RoleUser, Content: events.Text("saved question")},
				{Role: events.RoleAssistant, Content: events.Text("saved answer")},
			})
			require.NoError(t, err)
			return v
		}, []string{"user:saved question", "assistant:saved answer"}},
		{"a compaction by another service", func(t *testing.T) uint64 {
			first := h.Snapshot()[0].Seq
			res, err := e.other.Append(ctx, events.DefaultTenant, "live", []events.Event{userEv("next")}, client.AnyVersion())
			require.NoError(t, err)
			res, err = e.other.Append(ctx, events.DefaultTenant, "live", []events.Event{{Payload: events.Compaction{
				UpToSeq: first, Summary: events.Text("summary")}}}, client.ExpectVersion(res.Version))
			require.NoError(t, err)
			return res.Version
		}, []string{"user:summary", "user:next"}},
		{"a restore to a history of the same length", func(t *testing.T) uint64 {
			v, err := h.Restore(ctx, []events.Message{
				{Role: events.RoleUser, Content: events.Text("other")},
				{Role: events.RoleUser, Content: events.Text("history")},
			})
			require.NoError(t, err)
			return v
		}, []string{"user:other", "user:history"}},
		{"a reset by another service", func(t *testing.T) uint64 {
			res, err := e.other.Append(ctx, events.DefaultTenant, "live", []events.Event{{Payload: events.Reset{}}}, client.AnyVersion())
			require.NoError(t, err)
			return res.Version
		}, []string{}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			before := calls.n.Load()
			v := s.change(t)
			require.NoError(t, h.WaitVersion(ctx, v))
			require.Equal(t, s.want, texts(h.Snapshot()))
			eventually(t, func() bool { return calls.n.Load() > before }, "the listener is called")
		})
	}
}

// The seed's in-flight problem, made well defined: a reset between
// another writer's read and its append makes that append fail, and
// nothing of the old turn reaches the new history.
func TestResetDuringATurnInFlight(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "inflight", "question before the reset")
	h := open(t, e.c, "inflight")

	t.Run("a worker's conditional append conflicts and, reloaded, has nothing to answer", func(t *testing.T) {
		// The worker reads the thread and starts generating.
		seen, err := e.other.Get(ctx, events.DefaultTenant, "inflight", client.Consistent())
		require.NoError(t, err)
		require.NotNil(t, seen.LastUser)

		// Meanwhile the user resets the conversation.
		rv, err := h.Reset(ctx)
		require.NoError(t, err)

		// The worker's answer, conditional on what it read, is refused.
		_, err = e.other.Append(ctx, events.DefaultTenant, "inflight", []events.Event{assistantEv("stale answer")}, client.ExpectVersion(seen.Version))
		var conflict *client.ConflictError
		require.ErrorAs(t, err, &conflict)
		require.ErrorIs(t, err, client.ErrConflict)
		require.Equal(t, seen.Version, conflict.Expected)
		require.Equal(t, rv, conflict.Actual)

		// Reloaded, the question it was answering is gone.
		now, err := e.other.Get(ctx, events.DefaultTenant, "inflight", client.Consistent())
		require.NoError(t, err)
		require.Empty(t, now.Messages)
		require.Nil(t, now.LastUser)
		require.Equal(t, rv, now.Version, "nothing was stored")
		require.Empty(t, h.Snapshot())
	})

	t.Run("a tool result for a call made before the reset is rejected", func(t *testing.T) {
		res, err := e.other.Append(ctx, events.DefaultTenant, "inflight", []events.Event{userEv("what time is it?"),
			assistantEv("", events.ToolCall{ID: "slow", Name: "clock", Arguments: `{}`})}, client.AnyVersion())
		require.NoError(t, err)
		require.NoError(t, h.WaitVersion(ctx, res.Version))

		rv, err := h.Reset(ctx)
		require.NoError(t, err)

		_, err = e.other.Append(ctx, events.DefaultTenant, "inflight", []events.Event{{Payload: events.ToolResult{ToolCallID: "slow", Content: events.Text("noon")}}}, client.AnyVersion())
		var rej *fold.RejectionError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, fold.CodeNotPending, rej.Code)
		require.Equal(t, rv, h.Version())
		require.Empty(t, h.Snapshot())
	})

	t.Run("a reset conditional on a version the thread has left conflicts", func(t *testing.T) {
		v := h.Version()
		res, err := e.other.Append(ctx, events.DefaultTenant, "inflight", []events.Event{userEv("new")}, client.AnyVersion())
		require.NoError(t, err)
		_, err = h.Reset(ctx, client.ExpectVersion(v))
		require.ErrorIs(t, err, client.ErrConflict)
		require.NoError(t, h.WaitVersion(ctx, res.Version))
		require.Equal(t, []string{"user:new"}, texts(h.Snapshot()))
	})
}

func TestRestoreOfAnInvalidHistoryStoresNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "bad-restore", "keep me")
	h := open(t, e.c, "bad-restore")
	before := h.Snapshot()
	_, err := h.Restore(ctx, []events.Message{{Role: events.RoleTool, ToolCallID: "nobody", Content: events.Text("x")}})
	require.ErrorIs(t, err, fold.ErrRejected)
	require.True(t, sameSlice(before, h.Snapshot()))
}

func TestAHistoryOfAThreadThatDoesNotExistYetFillsAsEventsArrive(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := open(t, e.c, "later")
	require.Empty(t, h.Snapshot())
	require.Zero(t, h.Version())
	var calls counter
	defer h.Subscribe(calls.listen)()

	e.thread(t, "later", "first")
	eventually(t, func() bool { return len(h.Snapshot()) == 1 }, "the first message arrives")
	require.Equal(t, []string{"user:first"}, texts(h.Snapshot()))
	eventually(t, func() bool { return calls.n.Load() > 0 }, "the listener is called")
	_ = ctx
}

// A listener that blocks delays neither the fold nor other listeners; the
// changes made meanwhile are coalesced into one more call.
func TestASlowListenerDoesNotStallTheHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "slow")
	h := open(t, e.c, "slow")

	release := make(chan struct{})
	var slow, fast counter
	unsubSlow := h.Subscribe(func() {
		slow.listen()
		<-release
	})
	defer unsubSlow()
	defer h.Subscribe(fast.listen)()

	// The slow listener's goroutine may take its wake-up late: the changes
	// below must come while it blocks in its first call, so that they are
	// the ones coalesced into one more call.
	_, err := e.other.Append(ctx, events.DefaultTenant, "slow", []events.Event{userEv("m")}, client.AnyVersion())
	require.NoError(t, err)
	eventually(t, func() bool { return slow.n.Load() == 1 }, "the slow listener is in its first call")

	const n = 50
	var last uint64
	for i := range n {
		res, err := e.other.Append(ctx, events.DefaultTenant, "slow", []events.Event{userEv("m")}, client.AnyVersion())
		require.NoError(t, err, "append %d", i)
		last = res.Version
	}
	require.NoError(t, h.WaitVersion(ctx, last), "the fold goes on while a listener blocks")
	require.Len(t, h.Snapshot(), n+1)
	eventually(t, func() bool { return fast.n.Load() > 0 }, "the other listener is called")
	require.Equal(t, int64(1), slow.n.Load(), "the slow listener is still in its first call")

	close(release)
	eventually(t, func() bool { return slow.n.Load() == 2 }, "the changes made meanwhile give one more call")
	// No further call is due: one more change gives exactly one more.
	res, err := e.other.Append(ctx, events.DefaultTenant, "slow", []events.Event{userEv("m")}, client.AnyVersion())
	require.NoError(t, err)
	require.NoError(t, h.WaitVersion(ctx, res.Version))
	eventually(t, func() bool { return slow.n.Load() == 3 }, "one more change, one more call")
}

func TestUnsubscribedListenersAreNotCalled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "unsub")
	h := open(t, e.c, "unsub")
	var gone, kept counter
	unsubscribe := h.Subscribe(gone.listen)
	defer h.Subscribe(kept.listen)()
	unsubscribe()
	unsubscribe() // twice is fine

	res, err := e.other.Append(ctx, events.DefaultTenant, "unsub", []events.Event{userEv("x")}, client.AnyVersion())
	require.NoError(t, err)
	require.NoError(t, h.WaitVersion(ctx, res.Version))
	eventually(t, func() bool { return kept.n.Load() == 1 }, "the subscribed listener is called")
	require.Zero(t, gone.n.Load())

	// A listener may unsubscribe itself.
	var self counter
	var unsubSelf func()
	ready := make(chan struct{})
	unsubSelf = h.Subscribe(func() {
		<-ready
		self.listen()
		unsubSelf()
	})
	close(ready)
	for range 3 {
		res, err = e.other.Append(ctx, events.DefaultTenant, "unsub", []events.Event{userEv("y")}, client.AnyVersion())
		require.NoError(t, err)
		require.NoError(t, h.WaitVersion(ctx, res.Version))
		// Wait for the call of this change before making the next one.
		eventually(t, func() bool { return self.n.Load() >= 1 }, "the self-unsubscribing listener is called")
	}
	eventually(t, func() bool { return kept.n.Load() >= 2 }, "later changes reach the other listener")
	require.Equal(t, int64(1), self.n.Load())
}

// Close stops every goroutine of the History (the watch, the fold, the
// listeners) and later calls say so.
func TestCloseStopsEverythingAndLaterCallsFail(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "closing", "a")
	// The server keeps an ephemeral consumer for a while after its watch
	// stops (nats.go's ordered consumers have a 5-minute inactivity
	// threshold): those goroutines are the in-process server's, not ours.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*consumer).setLeader.func2"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*consumer).setLeader.func3"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*consumer).setLeader.func4"))

	h, err := ag2b.New(ctx, e.c, "", "closing")
	require.NoError(t, err)
	block := make(chan struct{})
	var calls counter
	unsubscribe := h.Subscribe(func() { calls.listen(); <-block })
	res, err := e.other.Append(ctx, events.DefaultTenant, "closing", []events.Event{userEv("b")}, client.AnyVersion())
	require.NoError(t, err)
	require.NoError(t, h.WaitVersion(ctx, res.Version))
	eventually(t, func() bool { return calls.n.Load() == 1 }, "the listener is running")

	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the fold did not stop")
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a listener call was under way")
	default:
	}
	close(block)
	<-closed
	h.Close()
	unsubscribe()

	snap := h.Snapshot()
	require.Equal(t, []string{"user:a", "user:b"}, texts(snap), "the last snapshot stays readable")
	_, err = h.Reset(ctx)
	require.ErrorIs(t, err, ag2b.ErrClosed)
	_, err = h.Restore(ctx, nil)
	require.ErrorIs(t, err, ag2b.ErrClosed)
	require.ErrorIs(t, h.WaitVersion(ctx, h.Version()+1), ag2b.ErrClosed)
	require.NoError(t, h.WaitVersion(ctx, h.Version()), "a version already reached")
	h.Subscribe(calls.listen)() // a no-op on a closed History
	require.NoError(t, h.Err())
}

// When the watch ends on its own (the connection is closed), the History
// says so instead of going stale silently.
func TestAHistoryWhoseConnectionClosesReportsIt(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "conn", "a")
	nc, err := nats.Connect(e.s.ClientURL())
	require.NoError(t, err)
	c, err := client.New(ctx, nc, client.Config{})
	require.NoError(t, err)
	h, err := ag2b.New(ctx, c, "", "conn")
	require.NoError(t, err)
	defer h.Close()

	nc.Close()
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the History did not notice its connection closed")
	}
	require.Error(t, h.Err())
	err = h.WaitVersion(ctx, h.Version()+1)
	require.ErrorIs(t, err, ag2b.ErrClosed)
}

// Earlier snapshots stay intact while the fold appends to the history
// (run with -race: the snapshot shares the fold's backing array).
func TestSnapshotsAreImmutableWhileTheFoldGoesOn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.thread(t, "immutable", "0")
	h := open(t, e.c, "immutable")
	stop := make(chan struct{})
	readerDone := make(chan []string)
	go func() {
		var snaps [][]events.Message
		for {
			select {
			case <-stop:
				var bad []string
				for _, s := range snaps {
					for i, m := range s {
						if m.Content.String() != string(rune('0'+i%10)) {
							bad = append(bad, m.Content.String())
						}
					}
				}
				readerDone <- bad
				return
			default:
				s := h.Snapshot()
				if len(snaps) == 0 || !sameSlice(snaps[len(snaps)-1], s) {
					snaps = append(snaps, s)
				}
			}
		}
	}()
	var last uint64
	for i := 1; i < 40; i++ {
		res, err := e.other.Append(ctx, events.DefaultTenant, "immutable", []events.Event{userEv(string(rune('0' + i%10)))}, client.AnyVersion())
		require.NoError(t, err)
		last = res.Version
	}
	require.NoError(t, h.WaitVersion(ctx, last))
	close(stop)
	require.Empty(t, <-readerDone)
	require.Len(t, h.Snapshot(), 40)
}

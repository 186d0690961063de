//go:build cluster

package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

const (
	// probeThreads is how many probe threads a load writes to, one event
	// every probeInterval each.
	probeThreads  = 4
	probeInterval = 20 * time.Millisecond
	// loadTenant is the tenant of every load thread.
	loadTenant = events.DefaultTenant
	// loadAgent is agentd's built-in offline agent.
	loadAgent = "demo"
	// appendPatience bounds how long one user message is retried (same
	// event id) before the load gives up on it.
	appendPatience = 90 * time.Second
	// answerPatience bounds the wait for the agent's answer.
	answerPatience = 90 * time.Second
)

// load is a load generator: one goroutine per thread, each appending a user
// message conditionally on the thread's version, waiting until the agent
// answered it, and repeating. Appends whose outcome is unknown (timeouts,
// no leader) are retried with the same event id until acknowledged.
type load struct {
	c       *client.Client
	name    string
	threads []*loadThread

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	probes []*loadThread

	mu   sync.Mutex
	acks []time.Time // when each append to a load thread was acknowledged
	// probeAcks are when each append to each probe thread was
	// acknowledged.
	probeAcks map[string][]time.Time
	fails     []error
	// slowest is the longest time from a user message's ack to its answer.
	slowest time.Duration

	acked      atomic.Int64 // appends acknowledged (thread creations, user messages, probe events)
	duplicates atomic.Int64 // acknowledged as already stored (a retry whose first attempt landed)
	retried    atomic.Int64 // Append calls that failed with an unknown outcome and were repeated
	conflicts  atomic.Int64 // version conflicts the load met (it is the only user writer)
	stale      atomic.Int64 // consistent reads right after an ack that did not show it
	answered   atomic.Int64
}

// loadThread is one thread of a load and the events acknowledged on it.
type loadThread struct {
	id string
	// probe threads get state.set events only, which agents do not answer
	// and workers skip: their appends measure write availability alone.
	probe  bool
	mu     sync.Mutex
	acked  []string // event ids, in acknowledgement order
	rounds int
}

func (lt *loadThread) ack(id string) {
	lt.mu.Lock()
	lt.acked = append(lt.acked, id)
	lt.mu.Unlock()
}

func (lt *loadThread) ackedIDs() []string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return slices.Clone(lt.acked)
}

func (lt *loadThread) roundsDone() int {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.rounds
}

// startLoad starts n threads named <name>-<i> and probe threads named
// <name>-probe-<i>: probeThreads of them, spread evenly over the
// deployment's partitions (at least one in each).
func startLoad(c *client.Client, name string, n int) *load {
	l := &load{c: c, name: name, stop: make(chan struct{}), probeAcks: map[string][]time.Time{}}
	for i := range n {
		lt := &loadThread{id: fmt.Sprintf("%s-%03d", name, i)}
		l.threads = append(l.threads, lt)
		l.wg.Go(func() { l.run(lt) })
	}
	k := len(c.Partitions())
	per := max(probeThreads/k, 1)
	count := make([]int, k)
	for i := 0; len(l.probes) < per*k; i++ {
		id := fmt.Sprintf("%s-probe-%d", name, i)
		if part := events.Partition(loadTenant, id, k); count[part] < per {
			count[part]++
			lt := &loadThread{id: id, probe: true}
			l.probes = append(l.probes, lt)
			l.wg.Go(func() { l.runProbe(lt) })
		}
	}
	return l
}

// runProbe appends a state.set event every probeInterval until stopped.
func (l *load) runProbe(lt *loadThread) {
	created := events.Event{ID: events.NewID(), Payload: events.ThreadCreated{Title: lt.id, Replies: events.RepliesOff}}
	res, err := l.append(lt, created, 0)
	if err != nil {
		l.fail(err)
		return
	}
	version := res.Version
	for i := 0; !l.stopped(); i++ {
		ev := events.Event{ID: events.NewID(), Payload: events.StateSet{Key: "probe", Value: json.RawMessage(strconv.Itoa(i))}}
		res, err := l.append(lt, ev, version)
		if err != nil {
			l.fail(err)
			return
		}
		version = res.Version
		time.Sleep(probeInterval) // pacing
	}
}

func (l *load) fail(err error) {
	l.mu.Lock()
	l.fails = append(l.fails, err)
	l.mu.Unlock()
}

func (l *load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *load) run(lt *loadThread) {
	created := events.Event{ID: events.NewID(), Payload: events.ThreadCreated{Agent: loadAgent, Title: lt.id}}
	res, err := l.append(lt, created, 0)
	if err != nil {
		l.fail(err)
		return
	}
	version := res.Version
	for round := 0; !l.stopped(); round++ {
		// Text the offline agent answers with an echo (no tool applies).
		ev := events.Event{ID: events.NewID(), Payload: events.UserMessage{
			Content: events.Text(fmt.Sprintf("ping %d from %s", round, lt.id))}}
		res, err := l.append(lt, ev, version)
		if err != nil {
			l.fail(err)
			return
		}
		acked := time.Now()
		version, err = l.awaitAnswer(lt, ev.ID, res.Version)
		if err != nil {
			l.fail(err)
			return
		}
		l.mu.Lock()
		l.slowest = max(l.slowest, time.Since(acked))
		l.mu.Unlock()
		lt.mu.Lock()
		lt.rounds++
		lt.mu.Unlock()
	}
}

// append appends ev at version expect, repeating it (same id, same
// version) while the outcome is unknown.
func (l *load) append(lt *loadThread, ev events.Event, expect uint64) (client.AppendResult, error) {
	deadline := time.Now().Add(appendPatience)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := l.c.Append(ctx, loadTenant, lt.id, []events.Event{ev}, client.ExpectVersion(expect))
		cancel()
		if err == nil {
			l.mu.Lock()
			// Under the lock, so that both series stay sorted.
			if lt.probe {
				l.probeAcks[lt.id] = append(l.probeAcks[lt.id], time.Now())
			} else {
				l.acks = append(l.acks, time.Now())
			}
			l.mu.Unlock()
			l.acked.Add(1)
			if res.Duplicate {
				l.duplicates.Add(1)
			}
			lt.ack(ev.ID)
			return res, nil
		}
		var conflict *client.ConflictError
		if errors.As(err, &conflict) {
			l.conflicts.Add(1)
			return res, fmt.Errorf("thread %s: event %s (%s) at version %d: %w", lt.id, ev.ID, ev.Type, expect, err)
		}
		if errors.Is(err, fold.ErrRejected) || errors.Is(err, client.ErrInvalidAppend) || errors.Is(err, client.ErrClosed) {
			return res, fmt.Errorf("thread %s: event %s: %w", lt.id, ev.ID, err)
		}
		l.retried.Add(1)
		if time.Now().After(deadline) {
			return res, fmt.Errorf("thread %s: event %s not acknowledged after %s: %w", lt.id, ev.ID, appendPatience, err)
		}
		time.Sleep(backoff) // retry pacing, not a wait for a condition
		backoff = min(2*backoff, time.Second)
	}
}

// awaitAnswer polls the thread (consistent reads) until the user message
// userID at sequence seq has its final answer, and returns the version.
func (l *load) awaitAnswer(lt *loadThread, userID string, seq uint64) (uint64, error) {
	deadline := time.Now().Add(answerPatience)
	first := true
	wait := 5 * time.Millisecond
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		th, err := l.c.Get(ctx, loadTenant, lt.id, client.Consistent())
		cancel()
		if err == nil {
			if first && th.Version < seq {
				// Read-your-writes: the append was acknowledged at seq.
				l.stale.Add(1)
			}
			first = false
			if answeredBy(th.FoldState(), userID) {
				l.answered.Add(1)
				return th.Version, nil
			}
			last = fmt.Sprintf("version %d, %d messages", th.Version, th.MessageCount())
		} else {
			if errors.Is(err, client.ErrClosed) {
				return 0, err
			}
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("thread %s: user message %s (seq %d) not answered within %s (last read: %s)", lt.id, userID, seq, answerPatience, last)
		}
		time.Sleep(wait) // polling interval
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// answeredBy reports whether s's last user message is userID and the
// history ends with an assistant answer to it without pending tool calls.
func answeredBy(s *fold.State, userID string) bool {
	if s.LastUser == nil || s.LastUser.EventID != userID || len(s.Pending) > 0 || len(s.Messages) == 0 {
		return false
	}
	last := s.Messages[len(s.Messages)-1]
	return last.Role == events.RoleAssistant && len(last.ToolCalls) == 0
}

// waitRounds waits until every thread has completed n rounds.
func (l *load) waitRounds(t *testing.T, n int, d time.Duration) {
	t.Helper()
	require.NoError(t, poll(d, 50*time.Millisecond, func() error {
		if err := l.err(); err != nil {
			return nil // reported by finish
		}
		for _, lt := range l.threads {
			if r := lt.roundsDone(); r < n {
				return fmt.Errorf("thread %s has done %d rounds of %d", lt.id, r, n)
			}
		}
		return nil
	}))
}

// ackedSince counts the appends acknowledged after t0.
func (l *load) ackedSince(t0 time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.acks, t0, func(a, b time.Time) int { return a.Compare(b) })
	return len(l.acks) - i
}

// waitProgress waits until n appends were acknowledged after t0 and at
// least minDur has passed since t0: the cluster takes writes.
func (l *load) waitProgress(t *testing.T, t0 time.Time, n int, minDur, d time.Duration) {
	t.Helper()
	require.NoError(t, poll(d, 20*time.Millisecond, func() error {
		if err := l.err(); err != nil {
			return nil // reported by finish
		}
		if got := l.ackedSince(t0); got < n || time.Since(t0) < minDur {
			return fmt.Errorf("%d appends acknowledged in %s since %s, want %d", got, time.Since(t0).Round(time.Millisecond), t0.Format("15:04:05.000"), n)
		}
		return nil
	}))
}

// halt tells every thread to stop after its current round.
func (l *load) halt() { l.stopOnce.Do(func() { close(l.stop) }) }

func (l *load) slowestAnswer() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slowest
}

func (l *load) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.fails...)
}

// finish stops the load after every thread's current round (its answer
// included) and returns the threads' failures.
func (l *load) finish() error {
	l.halt()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(appendPatience + answerPatience + 10*time.Second):
		return fmt.Errorf("load %s: threads did not finish their rounds", l.name)
	}
	if err := l.err(); err != nil {
		return fmt.Errorf("load %s: %w", l.name, err)
	}
	return nil
}

// pauses are the longest times without an acknowledged append in a time
// window: to a probe thread (writes) and to a load thread (a user message
// can only be appended once the previous one was answered, so this gap
// includes the agents' answers).
type pauses struct{ write, answered time.Duration }

func (l *load) pauses(from, to time.Time) pauses {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A write pause is a probe thread's: with partitions, a lost leader
	// pauses its own partition's threads only.
	var write time.Duration
	for _, acks := range l.probeAcks {
		write = max(write, maxGap(acks, from, to))
	}
	return pauses{write: write, answered: maxGap(l.acks, from, to)}
}

// maxGap is the longest time between two consecutive times of acks (sorted)
// in [from, to], counting from `from` and to `to` as well.
func maxGap(acks []time.Time, from, to time.Time) time.Duration {
	var longest time.Duration
	prev := from
	for _, a := range acks {
		if a.Before(from) {
			continue
		}
		if a.After(to) {
			break
		}
		longest = max(longest, a.Sub(prev))
		prev = a
	}
	return max(longest, to.Sub(prev))
}

// logCounter is a slog handler that counts records by message (and the
// "how" attribute of duplicate resolutions), to learn the client's retries.
type logCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newLogCounter() *logCounter { return &logCounter{n: map[string]int{}} }

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "how" {
			key += " (" + a.Value.String() + ")"
		}
		return true
	})
	c.mu.Lock()
	c.n[key]++
	c.mu.Unlock()
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }

func (c *logCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

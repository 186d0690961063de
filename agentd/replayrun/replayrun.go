// Package replayrun replays recorded conversations through the whole
// system, as separate services sharing each thread would:
//
//   - a driver (one per conversation) creates the thread with only its first
//     user message(s), and appends the simulated user's later messages when
//     the thread reaches the point where the recording has them;
//   - agent workers (agentd/worker, any number of pools on one durable
//     consumer) answer with the replay model (agent/model.Replay), which
//     plays back the recorded assistant turns;
//   - a replay tool runner (its own durable consumer) answers every tool
//     call with the recorded tool result.
//
// Every append is conditional on the version its writer read, so the
// services race and resolve conflicts exactly as production writers do.
// At the end each thread is compared with its recording.
package replayrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// AgentName is the agent of replayed threads.
const AgentName = "replay"

// Config configures a run.
type Config struct {
	// Tenant of the replayed threads. Default "replay".
	Tenant string
	// Pools is the number of worker pools (processes, in production) on the
	// shared consumer. Default 1.
	Pools int
	// Concurrency of each pool. Default 4.
	Concurrency int
	// Parallel is how many conversations are driven at once. Default 16.
	Parallel int
	// RunID distinguishes runs: thread ids are derived from it and the
	// conversation, so two runs do not collide. Default: the current time.
	RunID string
	// Timeout for one conversation. Default 60 s.
	Timeout time.Duration
	// Logger (nil = discard).
	Logger *slog.Logger
	// OnThread, if set, is called when a conversation's thread is created
	// (tests use it to watch threads).
	OnThread func(tenant, thread string)
}

// Report is the outcome of a run.
type Report struct {
	Threads   int     `json:"threads"`
	Identical int     `json:"identical"`
	Events    int     `json:"events"`
	Seconds   float64 `json:"seconds"`
	EventsPS  float64 `json:"events_per_second"`
	// Conflicts resolved by each kind of writer (OCC retries).
	WorkerConflicts int64 `json:"worker_conflicts"`
	DriverConflicts int64 `json:"driver_conflicts"`
	ToolConflicts   int64 `json:"tool_conflicts"`
	// Unresolved lists conversations whose thread does not equal the
	// recording, with the first difference.
	Unresolved []Diff `json:"unresolved,omitempty"`
	// Threads maps conversation id to thread id.
	ThreadIDs map[string]string `json:"-"`
}

// Diff names a conversation that did not replay identically.
type Diff struct {
	ID     string `json:"id"`
	Thread string `json:"thread"`
	Reason string `json:"reason"`
}

type recording struct {
	conv   events.Conversation
	system *string
	msgs   []events.Message // without the leading system message
	replay *model.Replay
}

// Run replays convs. It needs a client on a provisioned deployment and the
// NATS connection (for live deltas).
func Run(ctx context.Context, c *client.Client, nc *nats.Conn, convs []events.Conversation, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	start := time.Now()
	rep := Report{ThreadIDs: map[string]string{}}
	recs, order, err := loadRecordings(convs, cfg.RunID, &rep)
	if err != nil {
		return rep, err
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var svc sync.WaitGroup
	defer svc.Wait()
	defer cancel()

	var workerConflicts atomic.Int64
	if err := startPools(ctx, runCtx, &svc, c, nc, cfg, recs, &workerConflicts); err != nil {
		return rep, err
	}
	trs, err := startToolRunners(runCtx, &svc, c, cfg, recs)
	if err != nil {
		return rep, err
	}
	rep.DriverConflicts = driveAll(ctx, runCtx, c, cfg, recs, order, &rep)
	rep.WorkerConflicts = workerConflicts.Load()
	for _, tr := range trs {
		rep.ToolConflicts += tr.conflicts.Load()
	}
	rep.Seconds = time.Since(start).Seconds()
	if rep.Seconds > 0 {
		rep.EventsPS = float64(rep.Events) / rep.Seconds
	}
	return rep, nil
}

// withDefaults is cfg with every zero setting at its default.
func (cfg Config) withDefaults() Config {
	if cfg.Tenant == "" {
		cfg.Tenant = "replay"
	}
	if cfg.Pools <= 0 {
		cfg.Pools = 1
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 16
	}
	if cfg.RunID == "" {
		cfg.RunID = time.Now().UTC().Format("20060102T150405.000000000")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// loadRecordings prepares each conversation's replay, keyed by the
// thread it replays into, and returns the threads in the order of convs.
// It records each conversation's thread in rep.ThreadIDs.
func loadRecordings(convs []events.Conversation, runID string, rep *Report) (map[string]*recording, []string, error) {
	recs := map[string]*recording{}
	order := make([]string, 0, len(convs))
	for _, conv := range convs {
		sys, msgs, err := events.SplitSystem(conv.Messages)
		if err != nil {
			return nil, nil, fmt.Errorf("replayrun: conversation %s: %w", conv.ID, err)
		}
		rp, err := model.NewReplay(conv, model.ReplayConfig{})
		if err != nil {
			return nil, nil, err
		}
		thread := threadID(runID, conv)
		recs[thread] = &recording{conv: conv, system: sys, msgs: msgs, replay: rp}
		rep.ThreadIDs[conv.ID] = thread
		order = append(order, thread)
	}
	return recs, order, nil
}

// startPools starts cfg.Pools worker pools on one shared consumer, each
// run on runCtx under svc, and waits until each is ready (or ctx ends).
// Their conflicts add up in conflicts.
func startPools(ctx, runCtx context.Context, svc *sync.WaitGroup, c *client.Client, nc *nats.Conn, cfg Config,
	recs map[string]*recording, conflicts *atomic.Int64) error {
	router := &replayRouter{recs: recs}
	for i := 0; i < cfg.Pools; i++ {
		pool, err := worker.New(c, nc, worker.Config{
			Agents:      map[string]*worker.Agent{AgentName: {Provider: router, ExternalTools: true, MaxSteps: 1000}},
			Consumer:    "replay-agents-" + sanitize(cfg.RunID),
			Concurrency: cfg.Concurrency,
			Producer:    fmt.Sprintf("replay-worker-%d", i),
			Logger:      cfg.Logger.With("component", "worker", "pool", i),
			OnTurn:      func(r worker.TurnResult) { conflicts.Add(int64(r.Conflicts)) },
		})
		if err != nil {
			return err
		}
		svc.Add(1)
		go func() { defer svc.Done(); _ = pool.Run(runCtx) }()
		select {
		case <-pool.Ready():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// startToolRunners starts a tool runner per partition (each consumes its
// partition's stream), run on runCtx under svc, each ready on return.
func startToolRunners(runCtx context.Context, svc *sync.WaitGroup, c *client.Client, cfg Config, recs map[string]*recording) ([]*toolRunner, error) {
	var trs []*toolRunner
	for _, pc := range c.Partitions() {
		tr := &toolRunner{c: pc, recs: recs, tenant: cfg.Tenant, logger: cfg.Logger}
		trs = append(trs, tr)
		trReady := make(chan error, 1)
		svc.Add(1)
		go func() { defer svc.Done(); tr.run(runCtx, "replay-tools-"+sanitize(cfg.RunID), trReady) }()
		if err := <-trReady; err != nil {
			return nil, err
		}
	}
	return trs, nil
}

// driveAll drives the conversations of order, cfg.Parallel at a time,
// each within cfg.Timeout, compares each thread with its recording into
// rep, and returns the drivers' conflicts.
func driveAll(ctx, runCtx context.Context, c *client.Client, cfg Config, recs map[string]*recording, order []string, rep *Report) int64 {
	var driverConflicts atomic.Int64
	var mu sync.Mutex
	sem := make(chan struct{}, cfg.Parallel)
	var drivers sync.WaitGroup
	for _, thread := range order {
		rec := recs[thread]
		sem <- struct{}{}
		drivers.Add(1)
		go func() {
			defer drivers.Done()
			defer func() { <-sem }()
			dctx, dcancel := context.WithTimeout(runCtx, cfg.Timeout)
			defer dcancel()
			n, conflicts, err := drive(dctx, c, cfg, thread, rec)
			driverConflicts.Add(conflicts)
			diff := ""
			if err != nil {
				diff = err.Error()
			} else {
				th, err := c.Get(ctx, cfg.Tenant, thread, client.Consistent())
				if err != nil {
					diff = err.Error()
				} else {
					diff = Compare(rec.conv, th)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			rep.Threads++
			rep.Events += n
			if diff == "" {
				rep.Identical++
			} else {
				rep.Unresolved = append(rep.Unresolved, Diff{ID: rec.conv.ID, Thread: thread, Reason: diff})
			}
		}()
	}
	drivers.Wait()
	return driverConflicts.Load()
}

func threadID(runID string, conv events.Conversation) string {
	return "r" + sanitize(runID) + "-" + events.ConversationThreadID(conv)[:18]
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[len(b)-40:]
	}
	return string(b)
}

// Compare returns "" when th holds exactly conv's messages (system prompt
// and every message, byte for byte in the flat OpenAI form), or the first
// difference.
func Compare(conv events.Conversation, th *client.Thread) string {
	if th.RejectedCount > 0 {
		return fmt.Sprintf("%d rejected event(s), first: %s", th.RejectedCount, th.Rejections[0].Reason)
	}
	got := client.ConversationOf(th)
	if len(got.Messages) != len(conv.Messages) {
		return fmt.Sprintf("%d messages, source has %d", len(got.Messages), len(conv.Messages))
	}
	for i := range conv.Messages {
		a, _ := json.Marshal(conv.Messages[i])
		b, _ := json.Marshal(got.Messages[i])
		if string(a) != string(b) {
			return fmt.Sprintf("message %d differs: source %.200s, thread %.200s", i, a, b)
		}
	}
	return ""
}

// replayRouter is the replay model for every replayed thread: it routes a
// request to the thread's recording.
type replayRouter struct{ recs map[string]*recording }

func (r *replayRouter) Generate(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	rec, ok := r.recs[req.Thread]
	if !ok {
		return model.Response{}, fmt.Errorf("%w: no recording for thread %s", model.ErrNoRecordedTurn, req.Thread)
	}
	return rec.replay.Generate(ctx, req, onDelta)
}

// drive creates the thread with its first user message(s), then appends
// the recording's next user messages whenever the thread has reached them,
// until the thread holds the whole recording. It returns the number of
// events in the thread and the conflicts it resolved.
func drive(ctx context.Context, c *client.Client, cfg Config, thread string, rec *recording) (int, int64, error) {
	if err := createThread(ctx, c, cfg, thread, rec); err != nil {
		return 0, 0, err
	}
	w, err := c.Watch(ctx, cfg.Tenant, thread, client.WatchOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	s := fold.NewState(cfg.Tenant, thread)
	var conflicts int64
	appended := -1 // history length at which we last appended user messages
	for {
		// Fold what the watch delivered so far.
		select {
		case u, ok := <-w.C:
			if !ok {
				return 0, conflicts, fmt.Errorf("watch ended: %v", w.Err())
			}
			foldUpdates(s, u, w.C)
		case <-ctx.Done():
			return int(s.Events), conflicts, fmt.Errorf("timed out at %d of %d messages: %w", len(s.Messages), len(rec.msgs), ctx.Err())
		}
		n := len(s.Messages)
		if s.RejectedCount > 0 {
			return int(s.Events), conflicts, fmt.Errorf("thread has rejections: %s", s.Rejections[0].Reason)
		}
		if n == len(rec.msgs) {
			return int(s.Events), conflicts, nil
		}
		if n > len(rec.msgs) {
			return int(s.Events), conflicts, fmt.Errorf("thread has %d messages, the recording %d", n, len(rec.msgs))
		}
		// The user's turn: the recording goes on with user message(s) here
		// and nothing is pending. Append all consecutive ones as one turn.
		if rec.msgs[n].Role != events.RoleUser || len(s.Pending) > 0 || appended == n {
			continue
		}
		_, err := c.Append(ctx, cfg.Tenant, thread, userTurn(rec, n), client.ExpectVersion(s.Version))
		var ce *client.ConflictError
		switch {
		case errors.As(err, &ce):
			conflicts++ // something else moved the thread; the watch will show it
		case err != nil:
			return int(s.Events), conflicts, err
		default:
			appended = n
		}
	}
}

// createThread creates the thread of rec, marked with the recording's
// source, and calls cfg.OnThread.
func createThread(ctx context.Context, c *client.Client, cfg Config, thread string, rec *recording) error {
	md := map[string]string{"source": rec.conv.Source, "source_id": rec.conv.ID}
	if len(rec.conv.Meta) > 0 {
		md["source_meta"] = string(rec.conv.Meta)
	}
	created := events.Event{Payload: events.ThreadCreated{Agent: AgentName, SystemPrompt: rec.system, Metadata: md, Replies: events.RepliesAuto}}
	_, _, _, err := c.CreateThread(ctx, client.CreateOptions{Tenant: cfg.Tenant, ThreadID: thread, ThreadCreated: created.Payload.(events.ThreadCreated)})
	if err != nil {
		return err
	}
	if cfg.OnThread != nil {
		cfg.OnThread(cfg.Tenant, thread)
	}
	return nil
}

// foldUpdates folds the update u into s (an event that does not decode
// counts as rejected), then the updates already waiting in c.
func foldUpdates(s *fold.State, u client.Update, c <-chan client.Update) {
	if u.Event != nil {
		if u.Err != nil {
			_ = fold.ApplyBytes(s, u.Event.Seq, u.Event.StoredAt, nil)
		} else {
			_ = fold.Apply(s, *u.Event)
		}
	}
	for len(c) > 0 {
		u := <-c
		if u.Event != nil && u.Err == nil {
			_ = fold.Apply(s, *u.Event)
		}
	}
}

// userTurn is the recording's consecutive user messages from message n,
// as the events of one turn.
func userTurn(rec *recording, n int) []events.Event {
	var turn []events.Event
	for j := n; j < len(rec.msgs) && rec.msgs[j].Role == events.RoleUser; j++ {
		turn = append(turn, events.Event{Payload: rec.msgs[j].Payload(), Producer: "replay-driver"})
	}
	return turn
}

// toolRunner answers tool calls with the recorded results: a separate
// service on its own durable consumer.
type toolRunner struct {
	c         *client.Client
	recs      map[string]*recording
	tenant    string
	logger    *slog.Logger
	conflicts atomic.Int64
}

func (t *toolRunner) run(ctx context.Context, consumer string, ready chan<- error) {
	it, err := t.c.ConsumeDurable(ctx, client.DurableConfig{
		Name: consumer, Tenant: t.tenant, DeliverNew: true, AckWait: 30 * time.Second,
		MaxAckPending: 256, PullMaxMessages: 256, PullExpiry: 30 * time.Second,
	})
	if err != nil {
		ready <- err
		return
	}
	defer func() { _ = it.Delete(context.Background()) }()
	ready <- nil
	go func() { <-ctx.Done(); it.Stop() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, 8)
	for {
		m, err := it.Next()
		if err != nil {
			return
		}
		if events.Type(m.Headers().Get(events.HeaderType)) != events.TypeAssistantMessage {
			_ = m.Ack()
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := t.answer(ctx, m.Subject()); err != nil && ctx.Err() == nil {
				t.logger.Warn("replay tool runner", "subject", m.Subject(), "err", err)
				_ = m.NakWithDelay(100 * time.Millisecond)
				return
			}
			_ = m.Ack()
		}()
	}
}

// answer appends the recorded results of the thread's pending calls.
func (t *toolRunner) answer(ctx context.Context, subject string) error {
	tenant, thread, err := t.c.Subjects().Parse(subject)
	if err != nil {
		return nil
	}
	rec, ok := t.recs[thread]
	if !ok {
		return nil
	}
	for {
		th, err := t.c.Get(ctx, tenant, thread, client.Consistent())
		if err != nil {
			return err
		}
		if len(th.Pending) == 0 {
			return nil
		}
		n := len(th.Messages)
		var turn []events.Event
		for i, p := range th.Pending {
			if n+i >= len(rec.msgs) {
				return fmt.Errorf("recording has no result for call %q at message %d", p.ID, n+i)
			}
			m := rec.msgs[n+i]
			if m.Role != events.RoleTool || m.ToolCallID != p.ID {
				return fmt.Errorf("recording message %d is %s %q, not the result of pending call %q", n+i, m.Role, m.ToolCallID, p.ID)
			}
			turn = append(turn, events.Event{Payload: m.Payload(), Producer: "replay-tools"})
		}
		_, err = t.c.Append(ctx, tenant, thread, turn, client.ExpectVersion(th.Version))
		var ce *client.ConflictError
		if errors.As(err, &ce) {
			t.conflicts.Add(1)
			continue
		}
		return err
	}
}

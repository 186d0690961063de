package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/shutdown"
)

// Tools is what a worker needs from a tool set: the specs offered to the
// model and a runner. Run never fails: errors become tool results with
// IsError set. Run may record key-value state changes through env.
type Tools interface {
	Specs() []model.Tool
	Run(ctx context.Context, call events.ToolCall, env Env) events.ToolResult
}

// Env is what a tool sees of its thread: the thread id and its key-value
// state. Set records a state change that the worker appends (as a
// state.set event) in the same atomic turn as the tool results.
type Env interface {
	Tenant() string
	Thread() string
	Get(key string) (json.RawMessage, bool)
	Set(key string, value json.RawMessage)
}

// Agent is one named agent a worker serves.
type Agent struct {
	// Name is the agent's name (the thread's agent, the OpenAI model field).
	Name string
	// SystemPrompt is used when the thread has none.
	SystemPrompt string
	// Model overrides the provider's model name ("" = provider default).
	Model string
	// Provider generates the turns. Required.
	Provider model.Provider
	// Tools offered to the model (nil = none).
	Tools Tools
	// MaxSteps caps model calls per user message. Default 8.
	MaxSteps int
	// ExternalTools: the worker appends the assistant message with its tool
	// calls alone and a separate tool-runner service appends the results
	// (the thread then waits for the agent again). Tools is then only used
	// for the specs offered to the model.
	ExternalTools bool
}

// Config configures a [Pool]. Agents is required.
type Config struct {
	// Agents served by this pool, by name.
	Agents map[string]*Agent
	// Consumer is the durable consumer shared by every worker of the pool.
	// Default "convlog-agents".
	Consumer string
	// Concurrency is how many turns one process runs at once. Default 4.
	Concurrency int
	// AckWait before the server redelivers work to another worker; the
	// worker sends in-progress signals while a turn runs. Default 30 s.
	AckWait time.Duration
	// Producer recorded on appended events. Default "agentd-worker".
	Producer string
	// Logger (nil = discard).
	Logger *slog.Logger
	// OnTurn, if set, is called after each turn run (a work item handed
	// over to a running turn is reported with that turn's next run), from
	// the worker goroutine; it must be fast.
	OnTurn func(TurnResult)
}

// TurnResult reports one turn run, for metrics.
type TurnResult struct {
	Tenant, Thread, Agent string
	// Outcome: "answered", "step" (a step was appended; more follow),
	// "superseded", "not_waiting", "skipped", "error" (retried later),
	// "failed" (a permanent model error, not retried), "declined" (the
	// model has no turn to give, e.g. a replayed recording ended).
	Outcome   string
	Steps     int
	Conflicts int
	Took      time.Duration
	Err       error
}

// Pool is a set of agent workers in one process. Run it with Run; it is
// safe to run several Pools (processes) on the same consumer.
type Pool struct {
	c     *client.Client
	cfg   Config
	js    jetstream.JetStream
	nc    *nats.Conn
	ready chan struct{}
	once  sync.Once
	gate  shutdown.Gate

	mu       sync.Mutex
	inflight map[string]*flight // threads this process is working on
}

// maxTurnRetries is how often a turn that failed with a transient error is
// retried in the worker (backoff 0.5 s, 1 s, ... about 14 s in all) before
// its work item is handed back to JetStream for redelivery.
const maxTurnRetries = 7

// flight is a thread being worked on; again records triggers that arrived
// meanwhile, so the running turn looks at the thread once more instead of
// a second goroutine generating the same step. seq is the highest stream
// sequence of those triggers: the turn reads the thread at least up to it.
type flight struct {
	again bool
	seq   uint64
}

// New returns a pool using c. It validates cfg.
func New(c *client.Client, nc *nats.Conn, cfg Config) (*Pool, error) {
	if len(cfg.Agents) == 0 {
		return nil, errors.New("worker: no agents configured")
	}
	for name, a := range cfg.Agents {
		if a == nil || a.Provider == nil {
			return nil, fmt.Errorf("worker: agent %q has no model provider", name)
		}
		if a.Name == "" {
			a.Name = name
		}
		if a.MaxSteps <= 0 {
			a.MaxSteps = 8
		}
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "convlog-agents"
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.Producer == "" {
		cfg.Producer = "agentd-worker"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pool{c: c, cfg: cfg, js: c.JetStream(), nc: nc, ready: make(chan struct{}), inflight: map[string]*flight{}}, nil
}

// Ready is closed once the pool consumes.
func (p *Pool) Ready() <-chan struct{} { return p.ready }

// Shutdown stops Run as cancelling its context does and waits until Run
// has returned (in-flight turns finished), or until ctx ends: then it
// returns ctx's error, wrapped, and Run goes on stopping. Called before
// Run, it makes Run return at once. Safe to call concurrently.
func (p *Pool) Shutdown(ctx context.Context) error { return p.gate.Shutdown(ctx) }

// Run consumes work until ctx ends, then waits for in-flight turns (their
// appends are atomic; an interrupted turn is redelivered elsewhere). It
// returns nil on ctx cancellation, or the error that stopped consumption.
func (p *Pool) Run(ctx context.Context) error {
	ctx, end := p.gate.Begin(ctx)
	defer end()
	if p.gate.Requested() {
		return nil // Shutdown came first
	}
	it := p.consume(ctx)
	if it == nil {
		return nil
	}
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		it.Stop()
	}()
	defer close(stopped)
	p.once.Do(func() { close(p.ready) })
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, client.ErrDurableStopped) {
				return nil
			}
			return fmt.Errorf("worker: %w", err)
		}
		if !p.isWork(msg) {
			_ = msg.Ack()
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p.handle(ctx, msg)
		}()
	}
}

// consume opens the workers' shared durable consumer. The consumer may
// not be creatable yet (NATS starting, a cluster electing leaders): it
// retries with backoff until ctx ends, and then returns nil.
func (p *Pool) consume(ctx context.Context) *client.Durable {
	dcfg := client.DurableConfig{
		Name:        p.cfg.Consumer,
		Description: "convlog agent workers: threads waiting for their agent",
		DeliverNew:  true,
		AckWait:     p.cfg.AckWait,
		// A short pull expiry (heartbeat 2.5 s) notices a consumer leader
		// lost with its NATS node within seconds; the default (30 s) stalls
		// the workers that long (deploy/clustertest).
		MaxAckPending:   max(64, p.cfg.Concurrency*16),
		PullMaxMessages: p.cfg.Concurrency * 4,
		PullExpiry:      5 * time.Second,
		Logger:          p.cfg.Logger,
	}
	for backoff := 100 * time.Millisecond; ; backoff = min(backoff*2, 5*time.Second) {
		it, err := p.c.ConsumeDurable(ctx, dcfg)
		if err == nil {
			return it
		}
		p.cfg.Logger.Warn("worker consumer not ready; retrying", "consumer", p.cfg.Consumer, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// isWork reports whether msg may leave its thread waiting for its agent:
// a user message, a restore, a compaction, or a tool result that no
// worker of this deployment appended with its assistant message.
func (p *Pool) isWork(msg jetstream.Msg) bool {
	switch events.Type(msg.Headers().Get(events.HeaderType)) {
	case events.TypeUserMessage, events.TypeRestore, events.TypeCompaction:
		return true
	case events.TypeToolResult:
		// Results a worker appended in the same atomic step as its
		// assistant message need no trigger: that worker's turn goes on
		// (and if it crashed, its unacked work item is redelivered).
		// The envelope is clear also when the payload is sealed.
		ev, err := events.Unmarshal(msg.Data())
		return !((err == nil || errors.Is(err, events.ErrSealed)) && strings.HasPrefix(ev.Producer, p.cfg.Producer+"/"))
	}
	return false
}

// handle runs one work item and acks it unless the turn failed in a way
// worth redelivering.
func (p *Pool) handle(ctx context.Context, msg jetstream.Msg) {
	tenant, thread, err := p.c.Subjects().Parse(msg.Subject())
	if err != nil {
		_ = msg.Term()
		return
	}
	// Keep the work ours while the model runs.
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go p.keepInProgress(hbCtx, msg)
	// The turn reads the thread at least up to the trigger: on a
	// replicated stream a read may be served by a replica that lags, and
	// must not miss the message it is to answer (or conclude that a newer
	// user message superseded it).
	var seq uint64
	if md, err := msg.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	key := tenant + "." + thread
	p.mu.Lock()
	if f, ok := p.inflight[key]; ok {
		// Another goroutine of this process is on the thread: hand the
		// trigger over to it.
		f.again, f.seq = true, max(f.seq, seq)
		p.mu.Unlock()
		_ = msg.Ack()
		return
	}
	f := &flight{seq: seq}
	p.inflight[key] = f
	p.mu.Unlock()
	res := p.fly(ctx, tenant, thread, key, f)
	p.settle(ctx, msg, tenant, thread, res)
}

// keepInProgress tells NATS the work item msg is still being worked on,
// every third of AckWait, until ctx ends.
func (p *Pool) keepInProgress(ctx context.Context, msg jetstream.Msg) {
	t := time.NewTicker(p.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = msg.InProgress()
		}
	}
}

// fly runs turns on tenant/thread for the flight f (registered in
// p.inflight under key) until no trigger was handed over to it, retrying
// a turn that failed transiently, and then ends the flight. It returns
// the last turn's result.
func (p *Pool) fly(ctx context.Context, tenant, thread, key string, f *flight) TurnResult {
	retries := 0
	for {
		p.mu.Lock()
		seq := f.seq
		p.mu.Unlock()
		turnStart := time.Now()
		res := p.turn(ctx, tenant, thread, seq)
		if p.cfg.OnTurn != nil {
			// One report per turn run: a trigger handed over to this
			// goroutine gets its own.
			r := res
			r.Took = time.Since(turnStart)
			p.cfg.OnTurn(r)
		}
		if res.Outcome == "error" && ctx.Err() == nil && retries < maxTurnRetries {
			// Transient (a NATS node lost, a leader election): retry here
			// with backoff rather than rely on the nak reaching a consumer
			// leader that may be changing too; the heartbeat keeps the work.
			retries++
			p.cfg.Logger.Info("turn failed; retrying", "tenant", tenant, "thread", thread, "attempt", retries, "err", res.Err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(retries) * 500 * time.Millisecond):
			}
			continue
		}
		p.mu.Lock()
		if f.again && res.Outcome != "error" && res.Outcome != "failed" && ctx.Err() == nil {
			f.again = false
			p.mu.Unlock()
			continue
		}
		delete(p.inflight, key)
		p.mu.Unlock()
		return res
	}
}

// settle acks, terminates or naks the work item msg by the outcome of its
// last turn res.
func (p *Pool) settle(ctx context.Context, msg jetstream.Msg, tenant, thread string, res TurnResult) {
	if res.Outcome == "declined" {
		p.cfg.Logger.Debug("model declined to answer", "tenant", tenant, "thread", thread)
		_ = msg.Ack()
	} else if res.Outcome == "failed" {
		p.cfg.Logger.Warn("turn failed permanently; not retried", "tenant", tenant, "thread", thread, "err", res.Err)
		_ = msg.Term()
	} else if res.Outcome == "error" && ctx.Err() == nil {
		p.cfg.Logger.Warn("turn failed; will be redelivered", "tenant", tenant, "thread", thread, "err", res.Err)
		_ = msg.NakWithDelay(time.Second)
	} else if ctx.Err() != nil {
		// Shutting down: let another worker take it now.
		_ = msg.Nak()
	} else {
		_ = msg.Ack()
	}
}

// Turn runs the agent on tenant/thread until it is no longer waiting for it.
// It is exported for tests and for running a turn synchronously.
func (p *Pool) Turn(ctx context.Context, tenant, thread string) TurnResult {
	return p.turn(ctx, tenant, thread, 0)
}

// turn is Turn reading the thread at version atLeast or later.
func (p *Pool) turn(ctx context.Context, tenant, thread string, atLeast uint64) TurnResult {
	res := TurnResult{Tenant: tenant, Thread: thread}
	var replyTo string
	for {
		gctx, cancel := context.WithTimeout(ctx, p.c.Config().Timeout)
		th, err := p.c.Get(gctx, tenant, thread, client.Consistent(), client.AtLeastVersion(atLeast))
		cancel()
		if err != nil {
			if errors.Is(err, client.ErrThreadNotFound) {
				res.Outcome = "skipped"
				return res
			}
			res.Outcome, res.Err = "error", err
			return res
		}
		if th.LastUser != nil {
			if replyTo == "" {
				replyTo = th.LastUser.EventID
			} else if th.LastUser.EventID != replyTo {
				res.Outcome = "superseded"
				p.cfg.Logger.Debug("turn superseded by a newer user message", "tenant", tenant, "thread", thread, "reason", "superseded")
				return res
			}
		}
		if !th.WaitingForAgent() {
			if res.Steps > 0 {
				res.Outcome = "answered"
			} else {
				res.Outcome = "not_waiting"
			}
			return res
		}
		agent, ok := p.cfg.Agents[th.Agent]
		if !ok {
			res.Outcome = "skipped"
			return res
		}
		res.Agent = agent.Name
		evs, err := p.step(ctx, agent, th, replyTo, stepsSinceUser(th.Messages))
		if err != nil {
			res.Outcome, res.Err = stepFailure(ctx, err)
			return res
		}
		_, err = p.c.Append(ctx, tenant, thread, evs, client.ExpectVersion(th.Version))
		var conflict *client.ConflictError
		switch {
		case errors.As(err, &conflict):
			res.Conflicts++
			// Reload (someone else moved the thread), at least at the
			// version the server reported: a replica may lag it.
			atLeast = max(atLeast, conflict.Actual)
			continue
		case errors.Is(err, fold.ErrRejected):
			res.Conflicts++
			continue
		case err != nil:
			res.Outcome, res.Err = "error", err
			return res
		}
		res.Steps++
		if outcome, done := stepEnds(evs, agent); done {
			res.Outcome = outcome
			return res
		}
	}
}

// stepFailure is the outcome of a turn whose step failed with err:
// "declined" (no error) when a replayed recording has nothing more to
// say, "failed" when retrying cannot help ([permanent]), else "error";
// both with err. A ctx that ended makes it "error".
func stepFailure(ctx context.Context, err error) (string, error) {
	switch {
	case ctx.Err() != nil:
		return "error", err
	case errors.Is(err, model.ErrNoRecordedTurn):
		return "declined", nil
	case permanent(err):
		return "failed", err
	}
	return "error", err
}

// stepEnds reports whether the step that appended evs ends agent's turn,
// and its outcome: "answered" for an answer without tool calls, "step"
// when an external tool runner has the calls (its results bring the
// thread back).
func stepEnds(evs []events.Event, agent *Agent) (string, bool) {
	am, ok := evs[0].Payload.(events.AssistantMessage)
	switch {
	case !ok:
		return "", false
	case len(am.ToolCalls) == 0:
		return "answered", true
	case agent.ExternalTools:
		return "step", true
	}
	return "", false
}

func stepsSinceUser(ms []events.Message) int {
	n := 0
	for i := len(ms) - 1; i >= 0; i-- {
		switch ms[i].Role {
		case events.RoleUser:
			return n
		case events.RoleAssistant:
			n++
		}
	}
	return n
}

// step generates one model turn and, when it calls tools, runs them; it
// returns the events of the step (assistant message, tool results, state
// changes) to append atomically.
func (p *Pool) step(ctx context.Context, a *Agent, th *client.Thread, replyTo string, steps int) ([]events.Event, error) {
	mk := func(pl events.Payload) events.Event {
		return events.Event{Payload: pl, Producer: p.cfg.Producer + "/" + a.Name, CorrelationID: replyTo, CausationID: replyTo}
	}
	if steps >= a.MaxSteps {
		msg := events.AssistantMessage{Content: events.Text(fmt.Sprintf("I stopped after %d steps without a final answer.", steps)),
			Agent: a.Name, ReplyTo: replyTo}
		return []events.Event{mk(msg)}, nil
	}
	sys := a.SystemPrompt
	if th.SystemPrompt != nil {
		sys = *th.SystemPrompt
	}
	var specs []model.Tool
	if a.Tools != nil {
		specs = a.Tools.Specs()
	}
	clientTools, offered := clientToolsOf(th.Messages, replyTo)
	specs = append(specs, offered...)
	req := model.Request{Tenant: th.Tenant, Thread: th.Thread, Agent: a.Name, Model: a.Model,
		SystemPrompt: sys, Messages: th.Messages, Tools: specs}
	onDelta, done := p.deltas(th, a, replyTo, steps)
	resp, err := a.Provider.Generate(ctx, req, onDelta)
	if err != nil {
		return nil, fmt.Errorf("worker: agent %s on %s/%s: model: %w", a.Name, th.Tenant, th.Thread, err)
	}
	done()
	am := resp.AssistantMessage()
	am.Agent, am.ReplyTo = a.Name, replyTo
	if am.Content.IsNull() && len(am.ToolCalls) == 0 && am.Reasoning == "" {
		am.Content = events.Text("")
	}
	out := []events.Event{mk(am)}
	if len(am.ToolCalls) == 0 || a.ExternalTools {
		return out, nil
	}
	return append(out, runTools(ctx, a, th, am.ToolCalls, clientTools, mk)...), nil
}

// clientToolsOf returns the tools the client offered with the user
// message replyTo of ms (the model may call them; their calls are left
// pending for the client to run): their names, and their specs for the
// model.
func clientToolsOf(ms []events.Message, replyTo string) (map[string]bool, []model.Tool) {
	names := map[string]bool{}
	var specs []model.Tool
	for i := len(ms) - 1; i >= 0; i-- {
		if m := ms[i]; m.Role == events.RoleUser && m.EventID == replyTo {
			for _, ct := range events.ClientToolsOf(m.Metadata) {
				names[ct.Name] = true
				specs = append(specs, model.Tool{Name: ct.Name, Description: ct.Description, Parameters: ct.Parameters})
			}
			break
		}
	}
	return names, specs
}

// deltas returns the function that publishes the model's deltas of step
// steps of a on th's delta subject (best effort: a delta that cannot be
// published is dropped), and the function that publishes the step's
// last delta (Done).
func (p *Pool) deltas(th *client.Thread, a *Agent, replyTo string, steps int) (func(model.Delta), func()) {
	dsubj, _ := p.c.Subjects().Delta(th.Tenant, th.Thread)
	onDelta := func(d model.Delta) {
		ed := events.Delta{ReplyTo: replyTo, Step: steps, Agent: a.Name, Content: d.Content, Reasoning: d.Reasoning}
		if d.ToolCall != nil {
			ed.ToolCall = &events.ToolCallDelta{Index: d.ToolCall.Index, ID: d.ToolCall.ID, Name: d.ToolCall.Name, Arguments: d.ToolCall.Arguments}
		}
		if b, err := json.Marshal(ed); err == nil {
			_ = p.nc.Publish(dsubj, b)
		}
	}
	done := func() {
		if b, err := json.Marshal(events.Delta{ReplyTo: replyTo, Step: steps, Agent: a.Name, Done: true}); err == nil {
			_ = p.nc.Publish(dsubj, b)
		}
	}
	return onDelta, done
}

// runTools runs a's tools for calls (those of clientTools excepted: the
// client runs them and appends the results) and returns their results
// and then the state the tools set, in the order first set, each made an
// event by mk.
func runTools(ctx context.Context, a *Agent, th *client.Thread, calls []events.ToolCall, clientTools map[string]bool, mk func(events.Payload) events.Event) []events.Event {
	var out []events.Event
	env := &turnEnv{tenant: th.Tenant, thread: th.Thread, kv: th.KV}
	for _, call := range calls {
		if clientTools[call.Name] {
			continue // the client runs it and appends the result
		}
		var r events.ToolResult
		if a.Tools == nil {
			r = events.ToolResult{ToolCallID: call.ID, Name: call.Name, Content: events.Text("no tools are available"), IsError: true}
		} else {
			r = a.Tools.Run(ctx, call, env)
		}
		r.ToolCallID = call.ID
		out = append(out, mk(r))
	}
	for _, k := range env.order {
		out = append(out, mk(events.StateSet{Key: k, Value: env.sets[k]}))
	}
	return out
}

type turnEnv struct {
	tenant, thread string
	kv             map[string]json.RawMessage
	sets           map[string]json.RawMessage
	order          []string
	mu             sync.Mutex
}

func (e *turnEnv) Tenant() string { return e.tenant }
func (e *turnEnv) Thread() string { return e.thread }
func (e *turnEnv) Get(k string) (json.RawMessage, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.sets[k]; ok {
		return v, true
	}
	v, ok := e.kv[k]
	return v, ok
}
func (e *turnEnv) Set(k string, v json.RawMessage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sets == nil {
		e.sets = map[string]json.RawMessage{}
	}
	if _, ok := e.sets[k]; !ok {
		e.order = append(e.order, k)
	}
	e.sets[k] = append(json.RawMessage(nil), v...)
}

// permanent reports whether a model error will not go away by retrying:
// a replayed recording that diverged or ended, or a provider error the
// provider marks as not retryable (e.g. HTTP 400/401/404). Other errors
// (network, timeouts, 429/5xx) are retried by redelivery.
func permanent(err error) bool {
	if errors.Is(err, model.ErrDiverged) || errors.Is(err, model.ErrNoRecordedTurn) {
		return true
	}
	var apiErr *model.APIError
	return errors.As(err, &apiErr) && !model.IsRetryable(err)
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/agentd/worker"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// TurnParams size the agent turn section.
type TurnParams struct {
	Samples   int // turns per kind
	PerThread int // turns per thread before a new thread is created
}

// TurnResults are the agent turn section's figures, per kind of turn
// ("echo": one model step, no tool; "tool": a calculator call, its result
// and the final answer, two model steps and two appends).
type TurnResults struct {
	Kinds []string
	// SSE and Watch: user message acknowledged -> final assistant message
	// received over SSE (agentd/httpapi on loopback HTTP) and through
	// client.Watch. Worker: the worker's own time for the turn, from the
	// delivery of the user message to its last append (TurnResult.Took).
	SSE, Watch, Worker map[string]Dist
}

// demoAgents is agentd's default agent: "demo", the offline model with
// every built-in tool.
func demoAgents() (map[string]*worker.Agent, error) {
	m, err := model.NewOffline(model.OfflineConfig{})
	if err != nil {
		return nil, err
	}
	reg, err := tools.NewRegistry(tools.Config{})
	if err != nil {
		return nil, err
	}
	if err := reg.Register(tools.Builtins(nil)...); err != nil {
		return nil, err
	}
	return map[string]*worker.Agent{"demo": {Provider: m, Tools: worker.RegistryTools(reg)}}, nil
}

// sighting is one event an observer received.
type sighting struct {
	at    time.Time
	typ   string
	seq   uint64
	final bool // an assistant message without tool calls
}

// RunTurn runs agent workers (the offline "demo" agent) and the HTTP API
// in this process, on the env's client (as `agentd serve` does), and times
// turns: a user message is appended, and an SSE reader and a client.Watch
// reader of the thread note when the final assistant message arrives.
func RunTurn(ctx context.Context, e *Env, p TurnParams, log func(string, ...any)) (*TurnResults, error) {
	agents, err := demoAgents()
	if err != nil {
		return nil, err
	}
	var (
		mu     sync.Mutex
		worked = map[string][]time.Duration{}
		kindOf = map[string]string{} // thread -> kind of the turn in flight
		// answered gets one value per answered turn, after worked has it.
		answered = make(chan struct{}, 2*p.Samples)
	)
	pool, err := worker.New(e.Client, e.NC, worker.Config{Agents: agents, OnTurn: func(r worker.TurnResult) {
		if r.Outcome != "answered" {
			return
		}
		mu.Lock()
		worked[kindOf[r.Thread]] = append(worked[kindOf[r.Thread]], r.Took)
		mu.Unlock()
		select {
		case answered <- struct{}{}:
		default: // more answers than turns: the figures' check reports it
		}
	}})
	if err != nil {
		return nil, err
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	var poolWG, httpWG sync.WaitGroup
	var poolErr error
	poolWG.Go(func() { poolErr = pool.Run(wctx) })
	defer func() { stopWorkers(); poolWG.Wait() }()

	api, err := httpapi.New(httpapi.Config{Client: e.Client, NC: e.NC, Agents: []string{"demo"}, Auth: httpapi.Auth{Disabled: true}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	httpWG.Go(func() { _ = hs.Serve(ln) })
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = api.Shutdown(sctx)
		_ = hs.Shutdown(sctx)
		httpWG.Wait()
	}()
	base := "http://" + ln.Addr().String()
	select {
	case <-pool.Ready():
	case <-time.After(30 * time.Second):
		return nil, errors.New("workers not ready after 30s")
	}

	kinds := []struct{ name, prompt string }{
		{"echo", "hello, this is turn %d of the benchmark"},
		{"tool", "what is 12*(3+%d)"},
	}
	res := &TurnResults{SSE: map[string]Dist{}, Watch: map[string]Dist{}, Worker: map[string]Dist{}}
	sse, watch := map[string][]time.Duration{}, map[string][]time.Duration{}
	var ob *observers
	defer func() {
		if ob != nil {
			ob.stop()
		}
	}()
	version := uint64(0)
	log("turn: %d turns per kind, %d per thread", p.Samples, p.PerThread)
	for i := range 2 * p.Samples {
		if i%p.PerThread == 0 {
			if ob != nil {
				ob.stop()
			}
			_, id, v, err := e.Client.CreateThread(ctx, client.CreateOptions{ThreadCreated: events.ThreadCreated{Agent: "demo"}})
			if err != nil {
				return nil, err
			}
			if ob, err = observe(ctx, e, base, id); err != nil {
				return nil, err
			}
			version = v
		}
		k := kinds[i%2]
		mu.Lock()
		kindOf[ob.thread] = k.name
		mu.Unlock()
		r, err := e.Client.Append(ctx, tenant, ob.thread, []events.Event{{Payload: events.UserMessage{Content: events.Text(fmt.Sprintf(k.prompt, i))}}}, client.ExpectVersion(version))
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", i, err)
		}
		acked := time.Now()
		ws, ss, err := ob.waitFinal(ctx, r.Version)
		if err != nil {
			return nil, fmt.Errorf("turn %d (%s): %w", i, k.name, err)
		}
		watch[k.name] = append(watch[k.name], ws.at.Sub(acked))
		sse[k.name] = append(sse[k.name], ss.at.Sub(acked))
		version = max(ws.seq, ss.seq)
		// The worker's OnTurn runs after its ack, which can be after the
		// final message was seen. Wait for it before the next turn
		// relabels the thread, or this turn's time would count for the
		// next turn's kind. The wait is outside every measured interval.
		select {
		case <-answered:
		case <-time.After(5 * time.Second):
		}
	}
	for _, k := range kinds {
		res.Kinds = append(res.Kinds, k.name)
		res.SSE[k.name], res.Watch[k.name] = distOf(sse[k.name]), distOf(watch[k.name])
		mu.Lock()
		res.Worker[k.name] = distOf(worked[k.name])
		mu.Unlock()
	}
	stopWorkers()
	poolWG.Wait()
	if poolErr != nil {
		return nil, poolErr
	}
	return res, nil
}

// observers are an SSE reader and a client.Watch reader of one thread.
type observers struct {
	thread  string
	sse, wt chan sighting
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	watcher *client.Watcher
}

// observe opens both readers and waits until each has delivered the
// thread's first event (so both are live before the turn starts).
func observe(ctx context.Context, e *Env, base, thread string) (*observers, error) {
	octx, cancel := context.WithCancel(ctx)
	o := &observers{thread: thread, sse: make(chan sighting, 256), wt: make(chan sighting, 256), cancel: cancel}
	w, err := e.Client.Watch(octx, tenant, thread, client.WatchOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	o.watcher = w
	o.wg.Go(func() {
		for u := range w.C {
			if u.Event == nil {
				continue
			}
			s := sighting{at: time.Now(), typ: string(u.Event.Type), seq: u.Event.Seq}
			if am, ok := u.Event.Payload.(events.AssistantMessage); ok && len(am.ToolCalls) == 0 {
				s.final = true
			}
			select {
			case o.wt <- s:
			case <-octx.Done():
				return
			}
		}
	})
	req, err := http.NewRequestWithContext(octx, http.MethodGet, base+"/v1/threads/"+thread+"/events", nil)
	if err != nil {
		o.stop()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.stop()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		o.stop()
		return nil, fmt.Errorf("SSE: %s", resp.Status)
	}
	o.wg.Go(func() {
		defer resp.Body.Close()
		// It ends with an error when the stream is closed (stop).
		_ = readSSE(octx, bufio.NewReader(resp.Body), o.sse)
	})
	for _, ch := range []chan sighting{o.wt, o.sse} {
		select {
		case s := <-ch:
			if s.typ != string(events.TypeThreadCreated) {
				o.stop()
				return nil, fmt.Errorf("observer of %s: first event %q", thread, s.typ)
			}
		case <-time.After(10 * time.Second):
			o.stop()
			return nil, fmt.Errorf("observer of %s: no first event after 10s", thread)
		}
	}
	return o, nil
}

// readSSE parses frames (event, id, data lines) into sightings.
func readSSE(ctx context.Context, r *bufio.Reader, out chan<- sighting) error {
	var typ, data string
	var seq uint64
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if typ != "" && data != "" {
				s := sighting{at: time.Now(), typ: typ, seq: seq}
				if typ == string(events.TypeAssistantMessage) {
					var ev struct {
						Payload struct {
							ToolCalls []json.RawMessage `json:"tool_calls"`
						} `json:"payload"`
					}
					if err := json.Unmarshal([]byte(data), &ev); err != nil {
						return fmt.Errorf("SSE data: %w", err)
					}
					s.final = len(ev.Payload.ToolCalls) == 0
				}
				select {
				case out <- s:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			typ, data, seq = "", "", 0
		case strings.HasPrefix(line, "event: "):
			typ = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			_, _ = fmt.Sscan(line[len("id: "):], &seq)
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
}

// waitFinal waits until both readers delivered a final assistant message
// after version and returns the two sightings.
func (o *observers) waitFinal(ctx context.Context, after uint64) (sighting, sighting, error) {
	var got [2]sighting
	timeout := time.After(30 * time.Second)
	for i, ch := range []chan sighting{o.wt, o.sse} {
		for got[i].at.IsZero() {
			select {
			case s := <-ch:
				if s.final && s.seq > after {
					got[i] = s
				}
			case <-timeout:
				return got[0], got[1], fmt.Errorf("no final assistant message after 30s (watch: %v)", o.watcher.Err())
			case <-ctx.Done():
				return got[0], got[1], ctx.Err()
			}
		}
	}
	return got[0], got[1], nil
}

// stop ends both readers and waits for them.
func (o *observers) stop() {
	o.cancel()
	o.watcher.Stop()
	o.wg.Wait()
}

package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// Config configures a [Service].
type Config struct {
	// Producer is the producer of the events a turn appends. Default
	// "agentd-http".
	Producer string
	// Logger receives the service's warnings (a streamed answer that
	// differs from the stored one); nil discards them.
	Logger *slog.Logger
}

// Service runs chat turns on the threads of one client. It is safe for
// concurrent use.
type Service struct {
	c   *client.Client
	cfg Config
	log *slog.Logger
}

// New returns a service that reads, watches and appends through c.
func New(c *client.Client, cfg Config) *Service {
	if cfg.Producer == "" {
		cfg.Producer = "agentd-http"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{c: c, cfg: cfg, log: log}
}

// Turn is one chat-completions request, parsed.
type Turn struct {
	// Tenant owns the conversation; Agent is the agent to answer (the
	// request's "model").
	Tenant, Agent string
	// System is the request's leading system (or developer) message, nil
	// when it has none: it becomes the thread's system prompt.
	System *string
	// Messages are the request's other messages, in order; Positions their
	// indexes in the request (for errors that name a message).
	Messages  []events.Message
	Positions []int
	// Key is the conversation key; its ThreadID names the thread.
	Key client.ConvKey
	// EventID, when set, derives the id of each event the turn appends from
	// its purpose ("created", "system", "message:<position>"), so that a
	// retried request (same Idempotency-Key) appends nothing twice; nil
	// gives new ids.
	EventID func(purpose string) string
	// Deltas asks for the live deltas of the answer ([Answer.Stream]).
	Deltas bool
	// ClientTools are tools the client offers and runs itself (OpenAI
	// "tools"): they travel with the answered user message
	// (events.ClientToolsKey), the agent may call them, and an answer that
	// calls one ends there ([Answer.ClientCalls]); the client sends the
	// results in its next request.
	ClientTools []events.ClientTool
}

// Plan modes: what a turn does.
const (
	modeCreate = "create" // a new thread with the request's messages
	modeAppend = "append" // the request continues the thread
	modeDelta  = "delta"  // the request holds only new user messages
	modeReplay = "replay" // a retry of an answered turn: nothing appended
	modeWait   = "wait"   // nothing new, the thread waits for its agent
)

// plan is what one attempt at a turn does.
type plan struct {
	mode string
	// version is the expected thread version of the append.
	version uint64
	evs     []events.Event
	// evIndex maps appended event ids to request message positions.
	evIndex map[string]int
	// replyTo is the user message being answered (set before the append
	// when it is already stored, else the id of the appended one).
	replyTo    string
	replySeq   uint64
	watchAfter uint64
	// base is the number of the turn's steps stored before watchAfter.
	base int
}

// maxAttempts bounds how often a turn re-plans after its append
// conflicted with a concurrent one.
const maxAttempts = 8

// Start runs a turn up to the point where the answer is awaited: it reads
// the thread, plans the turn, watches the thread from before the append
// (so no live delta is missed), appends the plan atomically, and returns
// the [Answer] to wait on. Stop the answer when done.
//
// Errors: *[Error] for a turn the policy refuses; *[AppendError] when the
// append fails (validation, storage); client and context errors from the
// read or the watch.
func (s *Service) Start(ctx context.Context, t *Turn) (*Answer, error) {
	thread := t.Key.ThreadID()
	var (
		p   plan
		wt  *client.Watcher
		err error
	)
	for attempt := 1; ; attempt++ {
		p, err = s.plan(ctx, t, thread)
		if err != nil {
			return nil, err
		}
		wt, err = s.c.Watch(ctx, t.Tenant, thread, client.WatchOptions{After: p.watchAfter, Deltas: t.Deltas, Buffer: 1024})
		if err != nil {
			return nil, err
		}
		if len(p.evs) == 0 {
			break
		}
		res, aerr := s.c.Append(ctx, t.Tenant, thread, p.evs, client.ExpectVersion(p.version))
		var conflict *client.ConflictError
		if errors.As(aerr, &conflict) && attempt < maxAttempts {
			// Another request moved the thread on: re-plan against it.
			wt.Stop()
			continue
		}
		if aerr != nil {
			wt.Stop()
			return nil, &AppendError{Err: aerr, EventIndex: p.evIndex}
		}
		for _, st := range res.Events {
			if st.ID == p.replyTo {
				p.replySeq = st.Seq
			}
		}
		if res.Duplicate {
			// A retry (same event ids) of an append already stored: watch
			// from the stored user message instead.
			wt.Stop()
			p.watchAfter, p.base = p.replySeq, 0
			if wt, err = s.c.Watch(ctx, t.Tenant, thread, client.WatchOptions{After: p.watchAfter, Deltas: t.Deltas, Buffer: 1024}); err != nil {
				return nil, err
			}
		}
		break
	}
	a := &Answer{s: s, t: t, thread: thread, plan: p, wt: wt, clientTools: map[string]bool{}}
	for _, ct := range t.ClientTools {
		a.clientTools[ct.Name] = true
	}
	return a, nil
}

// plan reads the conversation's thread and decides what to append and
// which user message's answer to wait for (the divergence policy).
func (s *Service) plan(ctx context.Context, t *Turn, thread string) (plan, error) {
	th, err := s.c.Get(ctx, t.Tenant, thread, client.Consistent(), client.IncludeDeleted())
	var nf *client.NotFoundError
	if errors.As(err, &nf) {
		if errors.Is(err, client.ErrThreadErased) {
			return plan{}, newError(CodeErased, thread,
				fmt.Sprintf("the thread of this conversation (%s) was erased: start a new conversation id", thread))
		}
		if err := lastMustBeAnswerable(t.Messages, t.Positions, thread); err != nil {
			return plan{}, err
		}
		return s.planCreate(t), nil
	}
	if err != nil {
		return plan{}, err
	}
	if err := refusal(t, th, thread); err != nil {
		return plan{}, err
	}
	hv, rv := viewOf(th.Messages), viewOf(t.Messages)
	kind, n := match(hv, rv)
	p := plan{version: th.Version, watchAfter: th.Version, evIndex: map[string]int{}}
	var suffix []events.Message
	var suffixIdx []int
	switch kind {
	case matchDiverged:
		if cf, ok := currentFirst(hv, rv, th.Pending); ok {
			return s.planCurrentFirst(t, th, p, cf, rv)
		}
		return plan{}, diverged(t, thread, th, hv, rv, n)
	case matchReplay:
		x := hv[n].msgs[0]
		p.mode, p.replyTo, p.replySeq, p.watchAfter = modeReplay, x.EventID, x.Seq, x.Seq
		return p, nil
	case matchDelta:
		p.mode = modeDelta
		suffix, suffixIdx = t.Messages, t.Positions
	case matchAppend:
		p.mode = modeAppend
		suffix, suffixIdx = appendSuffix(t, th, hv, rv, n)
	}
	if len(suffix) == 0 {
		return planNothingNew(p, th, thread)
	}
	if err := lastMustBeAnswerable(suffix, suffixIdx, thread); err != nil {
		return plan{}, err
	}
	if t.System != nil && (th.SystemPrompt == nil || *th.SystemPrompt != *t.System) {
		sp := *t.System
		p.evs = append(p.evs, events.Event{ID: eventID(t, "system"), Payload: events.ThreadUpdated{SystemPrompt: &sp}, Producer: s.cfg.Producer})
	}
	s.addMessages(t, &p, suffix, suffixIdx)
	if p.replyTo == "" {
		if th.LastUser == nil {
			return plan{}, invalid(thread, "messages", "the thread has no user message for the agent to answer")
		}
		p.replyTo, p.replySeq = th.LastUser.EventID, th.LastUser.Seq
		p.base = stepsSince(th.Messages, th.LastUser.EventID)
	}
	return p, nil
}

// planNothingNew plans a request that adds nothing to the thread: a
// retry of a turn not answered yet waits for the answer; otherwise there
// is nothing to answer.
func planNothingNew(p plan, th *client.Thread, thread string) (plan, error) {
	if th.WaitingForAgent() && th.LastUser != nil {
		// A retry of a turn not answered yet: wait for the answer.
		p.mode, p.replyTo, p.replySeq, p.watchAfter = modeWait, th.LastUser.EventID, th.LastUser.Seq, th.LastUser.Seq
		return p, nil
	}
	return plan{}, invalid(thread, "messages", fmt.Sprintf("nothing new to answer: thread %s already holds every message of the request and its last one is answered; add a user message", thread))
}

// refusal is the error of a thread the turn may not go on: deleted, with
// replies off, or answered by another agent than t's (nil when none).
func refusal(t *Turn, th *client.Thread, thread string) error {
	switch {
	case th.Deleted:
		return newError(CodeDeleted, thread,
			fmt.Sprintf("the thread of this conversation (%s) is deleted: undelete it with POST /v1/threads/%s/undelete or start a new conversation id", thread, thread))
	case th.Replies == events.RepliesOff:
		return newError(CodeRepliesOff, thread, fmt.Sprintf("thread %s has replies turned off: no agent answers it", thread))
	case th.Agent != t.Agent:
		return newError(CodeAgentMismatch, thread, fmt.Sprintf("thread %s is answered by agent %q, not %q", thread, th.Agent, t.Agent))
	}
	return nil
}

// appendSuffix is what a request that extends the thread (its first n
// items match the thread's hv) appends, with the messages' positions in
// the request: the client's results for the thread's pending tool calls
// when the thread ends with the agent's calls, then the request's
// messages after the match.
func appendSuffix(t *Turn, th *client.Thread, hv, rv []viewItem, n int) (suffix []events.Message, suffixIdx []int) {
	if n > 0 && !hv[n-1].user && len(th.Pending) > 0 {
		// The client ran the pending tools: take its results for them.
		for _, k := range pendingResults(rv[n-1], th.Pending) {
			suffix = append(suffix, t.Messages[k])
			suffixIdx = append(suffixIdx, t.Positions[k])
		}
	}
	if n < len(rv) {
		from := rv[n].from
		suffix = append(suffix, t.Messages[from:]...)
		suffixIdx = append(suffixIdx, t.Positions[from:]...)
	}
	return suffix, suffixIdx
}

// planCurrentFirst plans a request in the current-first order (rule 5 of
// the divergence policy): a new user message is appended, and so are the
// client's results for the pending calls of the stored turn's answer; a
// retry waits for, or replays, the answer to the stored one.
func (s *Service) planCurrentFirst(t *Turn, th *client.Thread, p plan, cf currentFirstMatch, rv []viewItem) (plan, error) {
	switch cf.kind {
	case matchReplay:
		x := cf.stored.msgs[0]
		p.mode, p.replyTo, p.replySeq, p.watchAfter = modeReplay, x.EventID, x.Seq, x.Seq
		return p, nil
	case matchDelta: // stored, not answered yet
		if th.WaitingForAgent() && th.LastUser != nil {
			p.mode, p.replyTo, p.replySeq, p.watchAfter = modeWait, th.LastUser.EventID, th.LastUser.Seq, th.LastUser.Seq
			return p, nil
		}
		return plan{}, invalid(th.Thread, "messages", fmt.Sprintf("nothing new to answer: thread %s already holds every message of the request and its last one is answered; add a user message", th.Thread))
	}
	p.mode = modeAppend
	if t.System != nil && (th.SystemPrompt == nil || *th.SystemPrompt != *t.System) {
		sp := *t.System
		p.evs = append(p.evs, events.Event{ID: eventID(t, "system"), Payload: events.ThreadUpdated{SystemPrompt: &sp}, Producer: s.cfg.Producer})
	}
	if len(cf.results) > 0 {
		// The client ran the pending tools: take its results for them; the
		// answer to the stored user message goes on.
		var msgs []events.Message
		var idx []int
		for _, k := range cf.results {
			msgs, idx = append(msgs, t.Messages[k]), append(idx, t.Positions[k])
		}
		s.addMessages(t, &p, msgs, idx)
		x := cf.stored.msgs[0]
		p.replyTo, p.replySeq, p.base = x.EventID, x.Seq, stepsSince(th.Messages, x.EventID)
		return p, nil
	}
	first := rv[0]
	s.addMessages(t, &p, first.msgs, t.Positions[first.from:first.from+len(first.msgs)])
	return p, nil
}

// lastMustBeAnswerable checks that the messages to append end on a user
// message or tool results: something for the agent to answer.
func lastMustBeAnswerable(msgs []events.Message, idx []int, thread string) error {
	if last := msgs[len(msgs)-1]; last.Role == events.RoleAssistant {
		i := idx[len(idx)-1]
		e := invalid(thread, fmt.Sprintf("messages[%d].role", i),
			"the last message must be a user message (or tool results for pending tool calls): there is nothing for the agent to answer")
		e.Index = i
		return e
	}
	return nil
}

// planCreate is the first turn of a conversation: thread.created and the
// request's messages, appended atomically.
func (s *Service) planCreate(t *Turn) plan {
	md := map[string]string{"conv_key": t.Key.Key, "conv_tier": t.Key.Tier.String(), "conv_source": t.Key.Source}
	if t.Key.Stateless() {
		md["stateless"] = "true"
	}
	created := events.ThreadCreated{Owner: t.Key.User, Agent: t.Agent, SystemPrompt: t.System, Metadata: md,
		Title: titleOf(t.Messages)}
	p := plan{mode: modeCreate, evIndex: map[string]int{}}
	p.evs = append(p.evs, events.Event{ID: eventID(t, "created"), Payload: created, Producer: s.cfg.Producer})
	s.addMessages(t, &p, t.Messages, t.Positions)
	return p
}

// addMessages appends the events of msgs to the plan; the last user
// message becomes the one to answer.
func (s *Service) addMessages(t *Turn, p *plan, msgs []events.Message, idx []int) {
	lastUser := -1
	for i, m := range msgs {
		if m.Role == events.RoleUser {
			lastUser = i
		}
	}
	for i, m := range msgs {
		id := eventID(t, "message:"+strconv.Itoa(idx[i]))
		if i == lastUser && len(t.ClientTools) > 0 {
			if md, err := events.WithClientTools(m.Metadata, t.ClientTools); err == nil {
				m.Metadata = md
			}
		}
		p.evs = append(p.evs, events.Event{ID: id, Payload: m.Payload(), Producer: s.cfg.Producer})
		p.evIndex[id] = idx[i]
		if m.Role == events.RoleUser {
			p.replyTo = id
		}
	}
}

// eventID is a new event id, or the one t.EventID derives.
func eventID(t *Turn, purpose string) string {
	if t.EventID == nil {
		return events.NewID()
	}
	return t.EventID(purpose)
}

// diverged explains where a request's history left the thread's.
func diverged(t *Turn, thread string, th *client.Thread, hv, rv []viewItem, n int) *Error {
	var detail string
	e := newError(CodeHistoryDiverged, thread, "")
	switch {
	case n < len(rv) && n < len(hv):
		mi := t.Positions[rv[n].from]
		detail = fmt.Sprintf("messages[%d] (%s) differs from the thread's message at seq %d (%s)",
			mi, describe(rv[n]), hv[n].msgs[0].Seq, describe(hv[n]))
		e.Index, e.Seq = mi, hv[n].msgs[0].Seq
		e.Field = fmt.Sprintf("messages[%d]", mi)
	case n < len(hv):
		detail = fmt.Sprintf("the request ends before the thread does: the thread goes on with %s at seq %d", describe(hv[n]), hv[n].msgs[0].Seq)
		e.Seq = hv[n].msgs[0].Seq
		e.Field = "messages"
	default:
		detail = "the request's history differs from the thread's"
	}
	e.Detail = fmt.Sprintf("the conversation's thread %s (version %d) does not continue with the request's messages: %s. "+
		"The thread is the record and is never rewritten: start a new conversation id (X-Conversation-Id), "+
		"or fork the thread at the last common message with POST /v1/threads/%s/fork {\"at_seq\": N} and continue the fork.",
		thread, th.Version, detail, thread)
	v := th.Version
	e.Version = &v
	return e
}

func describe(it viewItem) string {
	kind := "an answer"
	if it.user {
		kind = "a user message"
	} else if len(it.msgs) > 0 && it.msgs[0].Role == events.RoleSystem {
		kind = "a system message"
	}
	text := it.text
	if utf8.RuneCountInString(text) > 40 {
		text = string([]rune(text)[:40]) + "..."
	}
	return fmt.Sprintf("%s %q", kind, text)
}

// titleOf is a thread title from the first user message.
func titleOf(msgs []events.Message) string {
	for _, m := range msgs {
		if m.Role == events.RoleUser {
			s := strings.Join(strings.Fields(m.Content.String()), " ")
			if utf8.RuneCountInString(s) > 80 {
				s = string([]rune(s)[:79]) + "…"
			}
			return s
		}
	}
	return ""
}

// stepsSince counts the assistant messages after the user message with id.
func stepsSince(msgs []events.Message, userID string) int {
	n, seen := 0, false
	for _, m := range msgs {
		if m.EventID == userID {
			seen, n = true, 0
			continue
		}
		if seen && m.Role == events.RoleAssistant {
			n++
		}
	}
	return n
}

package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// chatRequest is the part of an OpenAI chat-completions request this API
// reads. Other fields (temperature, tools, ...) are accepted and ignored:
// the agent's model settings and tools are configured server-side.
type chatRequest struct {
	Model         string             `json:"model"`
	Messages      []json.RawMessage  `json:"messages"`
	Stream        bool               `json:"stream"`
	StreamOptions *chatStreamOptions `json:"stream_options"`
	User          string             `json:"user"`
	Metadata      map[string]string  `json:"metadata"`
	N             *int               `json:"n"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatTurn is a parsed chat request.
type chatTurn struct {
	tenant, model string
	stream        bool
	includeUsage  bool
	system        *string
	// msgs are the non-system messages; idx their positions in the request.
	msgs   []events.Message
	idx    []int
	key    client.ConvKey
	thread string
	idem   string
}

// turnPlan is what one attempt at a turn does.
type turnPlan struct {
	mode string // "create", "append", "delta", "replay", "wait"
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

// chatProblem is a 4xx answer to a chat request that names the conversation.
func chatProblem(status int, slug, title, detail, thread string) *Problem {
	return newProblem(status, slug, title, detail).thread(thread)
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) (err error) {
	start := time.Now()
	tenant := tenantOf(r.Context())
	info := ChatInfo{Tenant: tenant, Outcome: "rejected"}
	var key client.ConvKey
	defer func() {
		info.Took = time.Since(start)
		if rec, ok := w.(*recorder); ok {
			info.Status = rec.status()
		}
		if err != nil {
			if p := problemFor(err, errCtx{}); p != nil {
				info.Status = p.Status
				switch {
				case p.Code == "history-diverged":
					info.Outcome = "diverged"
				case p.Status == http.StatusGatewayTimeout:
					info.Outcome = "timeout"
				case p.Status >= 500 || info.Outcome != "rejected":
					info.Outcome = "error"
				}
			}
		}
		info.Tier, info.Stateless = key.Tier, key.Stateless()
		s.log.Info("chat completion", "tenant", tenant, "conv_key", key.Scoped(), "tier", int(key.Tier),
			"agent", info.Agent, "stateless", key.Stateless(), "thread", info.Thread, "stream", info.Stream,
			"outcome", info.Outcome, "status", info.Status, "took", info.Took)
		if s.cfg.Hooks.Chat != nil {
			s.cfg.Hooks.Chat(info)
		}
	}()

	t, p := s.parseChat(r, tenant)
	if p != nil {
		return p
	}
	key = t.key
	info.Agent, info.Thread, info.Stream = t.model, t.thread, t.stream

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.AnswerTimeout)
	defer cancel()
	stop := context.AfterFunc(s.base, cancel)
	defer stop()

	var (
		plan turnPlan
		wt   *client.Watcher
	)
	for attempt := 1; ; attempt++ {
		plan, err = s.planTurn(ctx, t)
		if err != nil {
			return err
		}
		// Watch before appending, so that no live delta of the answer is missed.
		wt, err = s.c.Watch(ctx, tenant, t.thread, client.WatchOptions{After: plan.watchAfter, Deltas: t.stream, Buffer: 1024})
		if err != nil {
			return err
		}
		if len(plan.evs) == 0 {
			break
		}
		res, aerr := s.c.Append(ctx, tenant, t.thread, plan.evs, client.ExpectVersion(plan.version))
		var conflict *client.ConflictError
		if errors.As(aerr, &conflict) && attempt < 8 {
			// Another request moved the thread on: re-plan against it.
			wt.Stop()
			continue
		}
		if aerr != nil {
			wt.Stop()
			return problemFor(aerr, errCtx{thread: t.thread, eventIndex: plan.evIndex,
				fieldPrefix: func(i int) string { return fmt.Sprintf("messages[%d].", i) }})
		}
		for _, st := range res.Events {
			if st.ID == plan.replyTo {
				plan.replySeq = st.Seq
			}
		}
		if res.Duplicate {
			// A retry (same Idempotency-Key) of an append already stored:
			// watch from the stored user message instead.
			wt.Stop()
			plan.watchAfter, plan.base = plan.replySeq, 0
			if wt, err = s.c.Watch(ctx, tenant, t.thread, client.WatchOptions{After: plan.watchAfter, Deltas: t.stream, Buffer: 1024}); err != nil {
				return err
			}
		}
		break
	}
	defer wt.Stop()
	info.Outcome = "answered"
	if plan.mode == "replay" || plan.mode == "wait" {
		info.Outcome = "replayed"
	}

	h := w.Header()
	h.Set("X-Convlog-Thread", t.thread)
	h.Set("X-Conversation-Id", t.key.Key)
	h.Set("X-Convlog-Conversation-Tier", t.key.Tier.String())
	h.Set("X-Convlog-Stateless", strconv.FormatBool(t.key.Stateless()))
	a := &answer{s: s, t: t, plan: plan, id: "chatcmpl-" + plan.replyTo, created: time.Now().Unix()}
	if t.stream {
		return a.stream(ctx, w, r, wt)
	}
	if err := a.collect(ctx, wt); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a.completion())
}

// parseChat reads and checks a chat request and resolves its conversation.
func (s *Server) parseChat(r *http.Request, tenant string) (*chatTurn, *Problem) {
	var req chatRequest
	if p := decodeJSON(r, &req, false, false); p != nil {
		return nil, p
	}
	if strings.TrimSpace(req.Model) == "" {
		return nil, invalid("model", "model is required: the name of an agent (see GET /v1/models)")
	}
	if !s.agents[req.Model] {
		return nil, newProblem(http.StatusNotFound, "model-not-found", "Model not found",
			fmt.Sprintf("no agent named %q is served here (see GET /v1/models)", req.Model)).field("model")
	}
	if req.N != nil && *req.N != 1 {
		return nil, invalid("n", "only n=1 is supported: an agent gives one answer per turn")
	}
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "messages must hold at least one message")
	}
	idem, p := idempotencyKey(r)
	if p != nil {
		return nil, p
	}
	t := &chatTurn{tenant: tenant, model: req.Model, stream: req.Stream, idem: idem}
	t.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	firstUser, hasUser := "", false
	for i, raw := range req.Messages {
		f := fmt.Sprintf("messages[%d]", i)
		var o events.OpenAIMessage
		if err := json.Unmarshal(raw, &o); err != nil {
			q := jsonProblem(err, f+".")
			if q.Status == http.StatusBadRequest {
				q = invalid(f, fmt.Sprintf("%s is not a chat message: %v", f, err))
			}
			return nil, q.index(i)
		}
		m, err := events.FromOpenAI(o)
		if err != nil {
			field := f + ".role"
			if o.Role == "tool" {
				field = f + ".tool_call_id"
			}
			return nil, invalid(field, fmt.Sprintf("%s: %v", f, err)).index(i)
		}
		if m.Role == events.RoleSystem {
			if i != 0 {
				return nil, invalid(f+".role", "a system (or developer) message is supported only as the first message: it becomes the thread's system prompt").index(i)
			}
			sp := m.Content.String()
			t.system = &sp
			continue
		}
		if m.Role == events.RoleUser && !hasUser {
			firstUser, hasUser = m.Content.String(), true
		}
		t.msgs = append(t.msgs, m)
		t.idx = append(t.idx, i)
	}
	if len(t.msgs) == 0 {
		return nil, invalid("messages", "messages hold only a system message: add a user message")
	}
	sys := ""
	if t.system != nil {
		sys = *t.system
	}
	key, err := client.ResolveConvKey(client.ConvRequest{Agent: req.Model, Header: r.Header,
		ConversationID: req.Metadata["conversation_id"], User: req.User, SystemPrompt: sys,
		FirstUserMessage: firstUser, HasUserMessage: hasUser},
		client.ConvKeyOptions{DisableHashFallback: s.cfg.DisableConvHashFallback})
	if err != nil {
		var ke *client.ConvKeyError
		if errors.As(err, &ke) {
			f := ke.Source
			if f == "metadata.conversation_id" || f == "user" || f == "model" {
				return nil, invalid(f, err.Error())
			}
			return nil, badRequest("bad-header", err.Error()).field(f)
		}
		return nil, invalid("model", err.Error())
	}
	t.key, t.thread = key, key.ThreadID()
	return t, nil
}

// planTurn reads the conversation's thread and decides what to append and
// which user message's answer to wait for (the divergence policy in doc.go).
func (s *Server) planTurn(ctx context.Context, t *chatTurn) (turnPlan, error) {
	th, err := s.c.Get(ctx, t.tenant, t.thread, client.Consistent(), client.IncludeDeleted())
	var nf *client.NotFoundError
	if errors.As(err, &nf) {
		if errors.Is(err, client.ErrThreadErased) {
			return turnPlan{}, chatProblem(http.StatusGone, "conversation-erased", "Conversation erased",
				fmt.Sprintf("the thread of this conversation (%s) was erased: start a new conversation id", t.thread), t.thread)
		}
		if p := lastMustBeAnswerable(t.msgs, t.idx, t.thread); p != nil {
			return turnPlan{}, p
		}
		return s.planCreate(t), nil
	}
	if err != nil {
		return turnPlan{}, err
	}
	switch {
	case th.Deleted:
		return turnPlan{}, chatProblem(http.StatusConflict, "conversation-deleted", "Conversation deleted",
			fmt.Sprintf("the thread of this conversation (%s) is deleted: undelete it with POST /v1/threads/%s/undelete or start a new conversation id", t.thread, t.thread), t.thread)
	case th.Replies == events.RepliesOff:
		return turnPlan{}, chatProblem(http.StatusConflict, "replies-off", "Thread takes no replies",
			fmt.Sprintf("thread %s has replies turned off: no agent answers it", t.thread), t.thread)
	case th.Agent != t.model:
		return turnPlan{}, chatProblem(http.StatusConflict, "agent-mismatch", "Thread answered by another agent",
			fmt.Sprintf("thread %s is answered by agent %q, not %q", t.thread, th.Agent, t.model), t.thread)
	}
	hv, rv := viewOf(th.Messages), viewOf(t.msgs)
	kind, n := match(hv, rv)
	plan := turnPlan{version: th.Version, watchAfter: th.Version, evIndex: map[string]int{}}
	var suffix []events.Message
	var suffixIdx []int
	switch kind {
	case matchDiverged:
		return turnPlan{}, s.divergedProblem(t, th, hv, rv, n)
	case matchReplay:
		x := hv[n].msgs[0]
		plan.mode, plan.replyTo, plan.replySeq, plan.watchAfter = "replay", x.EventID, x.Seq, x.Seq
		return plan, nil
	case matchDelta:
		plan.mode = "delta"
		suffix, suffixIdx = t.msgs, t.idx
	case matchAppend:
		plan.mode = "append"
		if n > 0 && !hv[n-1].user && len(th.Pending) > 0 {
			// The client ran the pending tools: take its results for them.
			pending := map[string]bool{}
			for _, pc := range th.Pending {
				pending[pc.ID] = true
			}
			it := rv[n-1]
			for j, m := range it.msgs {
				if m.Role == events.RoleTool && pending[m.ToolCallID] {
					suffix = append(suffix, m)
					suffixIdx = append(suffixIdx, t.idx[it.from+j])
					delete(pending, m.ToolCallID)
				}
			}
		}
		if n < len(rv) {
			from := rv[n].from
			suffix = append(suffix, t.msgs[from:]...)
			suffixIdx = append(suffixIdx, t.idx[from:]...)
		}
	}
	if len(suffix) == 0 {
		if th.WaitingForAgent() && th.LastUser != nil {
			// A retry of a turn not answered yet: wait for the answer.
			plan.mode, plan.replyTo, plan.replySeq, plan.watchAfter = "wait", th.LastUser.EventID, th.LastUser.Seq, th.LastUser.Seq
			return plan, nil
		}
		return turnPlan{}, invalid("messages", fmt.Sprintf("nothing new to answer: thread %s already holds every message of the request and its last one is answered; add a user message", t.thread)).thread(t.thread)
	}
	if p := lastMustBeAnswerable(suffix, suffixIdx, t.thread); p != nil {
		return turnPlan{}, p
	}
	if t.system != nil && (th.SystemPrompt == nil || *th.SystemPrompt != *t.system) {
		sp := *t.system
		plan.evs = append(plan.evs, events.Event{ID: s.chatEventID(t, "system"), Payload: events.ThreadUpdated{SystemPrompt: &sp}, Producer: s.cfg.Producer})
	}
	s.addMessages(t, &plan, suffix, suffixIdx)
	if plan.replyTo == "" {
		if th.LastUser == nil {
			return turnPlan{}, invalid("messages", "the thread has no user message for the agent to answer").thread(t.thread)
		}
		plan.replyTo, plan.replySeq = th.LastUser.EventID, th.LastUser.Seq
		plan.base = stepsSince(th.Messages, th.LastUser.EventID)
	}
	return plan, nil
}

// lastMustBeAnswerable checks that the messages to append end on a user
// message or tool results: something for the agent to answer.
func lastMustBeAnswerable(msgs []events.Message, idx []int, thread string) *Problem {
	if last := msgs[len(msgs)-1]; last.Role == events.RoleAssistant {
		i := idx[len(idx)-1]
		return invalid(fmt.Sprintf("messages[%d].role", i),
			"the last message must be a user message (or tool results for pending tool calls): there is nothing for the agent to answer").
			thread(thread).index(i)
	}
	return nil
}

// planCreate is the first turn of a conversation: thread.created and the
// request's messages, appended atomically.
func (s *Server) planCreate(t *chatTurn) turnPlan {
	md := map[string]string{"conv_key": t.key.Key, "conv_tier": t.key.Tier.String(), "conv_source": t.key.Source}
	if t.key.Stateless() {
		md["stateless"] = "true"
	}
	created := events.ThreadCreated{Owner: t.key.User, Agent: t.model, SystemPrompt: t.system, Metadata: md,
		Title: titleOf(t.msgs)}
	plan := turnPlan{mode: "create", evIndex: map[string]int{}}
	plan.evs = append(plan.evs, events.Event{ID: s.chatEventID(t, "created"), Payload: created, Producer: s.cfg.Producer})
	s.addMessages(t, &plan, t.msgs, t.idx)
	return plan
}

// addMessages appends the events of msgs to the plan; the last user
// message becomes the one to answer.
func (s *Server) addMessages(t *chatTurn, plan *turnPlan, msgs []events.Message, idx []int) {
	for i, m := range msgs {
		id := s.chatEventID(t, "message:"+strconv.Itoa(idx[i]))
		plan.evs = append(plan.evs, events.Event{ID: id, Payload: m.Payload(), Producer: s.cfg.Producer})
		plan.evIndex[id] = idx[i]
		if m.Role == events.RoleUser {
			plan.replyTo = id
		}
	}
}

// chatEventID is a new event id, or one derived from the Idempotency-Key.
func (s *Server) chatEventID(t *chatTurn, purpose string) string {
	if t.idem == "" {
		return events.NewID()
	}
	return idemID(t.tenant, t.thread, t.idem, "chat:"+purpose)
}

// divergedProblem explains where a request's history left the thread's.
func (s *Server) divergedProblem(t *chatTurn, th *client.Thread, hv, rv []viewItem, n int) *Problem {
	var detail string
	q := chatProblem(http.StatusConflict, "history-diverged", "Conversation history diverged", "", t.thread)
	switch {
	case n < len(rv) && n < len(hv):
		mi := t.idx[rv[n].from]
		detail = fmt.Sprintf("messages[%d] (%s) differs from the thread's message at seq %d (%s)",
			mi, describe(rv[n]), hv[n].msgs[0].Seq, describe(hv[n]))
		q.index(mi).seq(hv[n].msgs[0].Seq)
		q.Field = fmt.Sprintf("messages[%d]", mi)
	case n < len(hv):
		detail = fmt.Sprintf("the request ends before the thread does: the thread goes on with %s at seq %d", describe(hv[n]), hv[n].msgs[0].Seq)
		q.seq(hv[n].msgs[0].Seq)
		q.Field = "messages"
	default:
		detail = "the request's history differs from the thread's"
	}
	q.Detail = fmt.Sprintf("the conversation's thread %s (version %d) does not continue with the request's messages: %s. "+
		"The thread is the record and is never rewritten: start a new conversation id (X-Conversation-Id), "+
		"or fork the thread at the last common message with POST /v1/threads/%s/fork {\"at_seq\": N} and continue the fork.",
		t.thread, th.Version, detail, t.thread)
	v := th.Version
	q.CurrentVersion = &v
	return q
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

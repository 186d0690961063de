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

	"github.com/convlog/convlog/agentd/chat"
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
	// Tools are the client's own tools (run by the client), ToolChoice
	// "none" withholds them from the model; other tool_choice values and
	// parallel_tool_calls are accepted and not enforced.
	Tools      []chatTool      `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// chatTool is one OpenAI function tool of a request.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatTurn is a parsed chat request: the service's turn and what only
// the HTTP answer needs.
type chatTurn struct {
	chat.Turn
	thread       string
	stream       bool
	includeUsage bool
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
	key = t.Key
	info.Agent, info.Thread, info.Stream = t.Agent, t.thread, t.stream

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.AnswerTimeout)
	defer cancel()
	stop := context.AfterFunc(s.base, cancel)
	defer stop()

	ans, err := s.chat.Start(ctx, &t.Turn)
	if err != nil {
		var ae *chat.AppendError
		if errors.As(err, &ae) {
			return problemFor(ae.Err, errCtx{thread: t.thread, eventIndex: ae.EventIndex,
				fieldPrefix: func(i int) string { return fmt.Sprintf("messages[%d].", i) }})
		}
		return s.chatErr(err, t)
	}
	defer ans.Stop()
	info.Outcome = "answered"
	if ans.Replayed() {
		info.Outcome = "replayed"
	}

	h := w.Header()
	h.Set("X-Convlog-Thread", t.thread)
	h.Set("X-Conversation-Id", t.Key.Key)
	h.Set("X-Convlog-Conversation-Tier", t.Key.Tier.String())
	h.Set("X-Convlog-Stateless", strconv.FormatBool(t.Key.Stateless()))
	a := &answer{s: s, t: t, ans: ans, id: "chatcmpl-" + ans.ReplyTo(), created: time.Now().Unix()}
	if t.stream {
		return a.stream(ctx, w)
	}
	if err := ans.Wait(ctx, nil, nil); err != nil {
		return s.chatErr(a.ctxErr(ctx, err), t)
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
	t := &chatTurn{Turn: chat.Turn{Tenant: tenant, Agent: req.Model, Deltas: req.Stream}, stream: req.Stream}
	if t.ClientTools, p = chatTools(req.Tools); p != nil {
		return nil, p
	}
	if strings.TrimSpace(string(req.ToolChoice)) == `"none"` {
		t.ClientTools = nil
	}
	t.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	firstUser, hasUser, p := t.addMessages(req.Messages)
	if p != nil {
		return nil, p
	}
	sys := ""
	if t.System != nil {
		sys = *t.System
	}
	key, err := client.ResolveConvKey(client.ConvRequest{Agent: req.Model, Header: r.Header,
		ConversationID: req.Metadata["conversation_id"], User: req.User, SystemPrompt: sys,
		FirstUserMessage: firstUser, HasUserMessage: hasUser},
		client.ConvKeyOptions{DisableHashFallback: s.cfg.DisableConvHashFallback})
	if err != nil {
		return nil, convKeyProblem(err)
	}
	t.Key, t.thread = key, key.ThreadID()
	if idem != "" {
		t.EventID = func(purpose string) string { return idemID(tenant, t.thread, idem, "chat:"+purpose) }
	}
	return t, nil
}

// chatTools checks the client's tools of a chat request (functions with
// distinct names of 1 to 64 characters) and returns them as events'
// client tools.
func chatTools(tools []chatTool) ([]events.ClientTool, *Problem) {
	var out []events.ClientTool
	seenTool := map[string]bool{}
	for i, tl := range tools {
		f := fmt.Sprintf("tools[%d]", i)
		switch {
		case tl.Type != "function":
			return nil, invalid(f+".type", fmt.Sprintf("%s.type must be \"function\", got %q", f, tl.Type))
		case tl.Function.Name == "" || len(tl.Function.Name) > 64:
			return nil, invalid(f+".function.name", f+".function.name must be 1 to 64 characters")
		case seenTool[tl.Function.Name]:
			return nil, invalid(f+".function.name", fmt.Sprintf("tool %q is listed twice", tl.Function.Name))
		}
		seenTool[tl.Function.Name] = true
		out = append(out, events.ClientTool{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: tl.Function.Parameters})
	}
	return out, nil
}

// addMessages converts a chat request's messages into the turn's: a
// system (or developer) message, allowed first only, becomes its system
// prompt; the others its messages with their positions in the request.
// It returns the first user message's text, and whether there is one.
func (t *chatTurn) addMessages(msgs []json.RawMessage) (firstUser string, hasUser bool, _ *Problem) {
	for i, raw := range msgs {
		f := fmt.Sprintf("messages[%d]", i)
		var o events.OpenAIMessage
		if err := json.Unmarshal(raw, &o); err != nil {
			q := jsonProblem(err, f+".")
			if q.Status == http.StatusBadRequest {
				q = invalid(f, fmt.Sprintf("%s is not a chat message: %v", f, err))
			}
			return "", false, q.index(i)
		}
		m, err := events.FromOpenAI(o)
		if err != nil {
			field := f + ".role"
			if o.Role == "tool" {
				field = f + ".tool_call_id"
			}
			return "", false, invalid(field, fmt.Sprintf("%s: %v", f, err)).index(i)
		}
		if m.Role == events.RoleSystem {
			if i != 0 {
				return "", false, invalid(f+".role", "a system (or developer) message is supported only as the first message: it becomes the thread's system prompt").index(i)
			}
			sp := m.Content.String()
			t.System = &sp
			continue
		}
		if m.Role == events.RoleUser && !hasUser {
			firstUser, hasUser = m.Content.String(), true
		}
		t.Messages = append(t.Messages, m)
		t.Positions = append(t.Positions, i)
	}
	if len(t.Messages) == 0 {
		return "", false, invalid("messages", "messages hold only a system message: add a user message")
	}
	return firstUser, hasUser, nil
}

// convKeyProblem is the problem of a conversation key that could not be
// resolved: a 422 naming the request field, or a 400 naming the header.
func convKeyProblem(err error) *Problem {
	var ke *client.ConvKeyError
	if errors.As(err, &ke) {
		f := ke.Source
		if f == "metadata.conversation_id" || f == "user" || f == "model" {
			return invalid(f, err.Error())
		}
		return badRequest("bad-header", err.Error()).field(f)
	}
	return invalid("model", err.Error())
}

// chatErr maps the chat service's refusals to problems.
func (s *Server) chatErr(err error, t *chatTurn) error {
	var ce *chat.Error
	if !errors.As(err, &ce) {
		return err
	}
	status, title := http.StatusConflict, ""
	switch ce.Code {
	case chat.CodeInvalid:
		status, title = http.StatusUnprocessableEntity, "Invalid request"
	case chat.CodeErased:
		status, title = http.StatusGone, "Conversation erased"
	case chat.CodeDeleted:
		title = "Conversation deleted"
	case chat.CodeRepliesOff:
		title = "Thread takes no replies"
	case chat.CodeAgentMismatch:
		title = "Thread answered by another agent"
	case chat.CodeHistoryDiverged:
		title = "Conversation history diverged"
	case chat.CodeSuperseded:
		title = "Turn superseded"
	case chat.CodeInterrupted:
		title = "Turn interrupted"
	}
	p := newProblem(status, string(ce.Code), title, ce.Detail).thread(ce.Thread)
	p.Field = ce.Field
	if ce.Index >= 0 {
		p.index(ce.Index)
	}
	if ce.Seq != 0 {
		p.seq(ce.Seq)
	}
	p.CurrentVersion = ce.Version
	return p
}

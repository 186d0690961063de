package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/packages/respjson"

	"github.com/convlog/convlog/events"
)

// Defaults of [OpenAIConfig].
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1/"
	DefaultOpenAIModel      = "gpt-4o-mini"
	DefaultOpenAIMaxRetries = 2
	DefaultOpenAITimeout    = 5 * time.Minute
)

// OpenAIConfig configures [OpenAI]. The zero value talks to api.openai.com
// with [DefaultOpenAIModel] and no key (which OpenAI refuses; local
// servers accept it). The provider does not read the environment: agentd
// fills APIKey from a file or env var.
type OpenAIConfig struct {
	// BaseURL is the API root, e.g. "http://localhost:11434/v1" (Ollama),
	// "http://localhost:8000/v1" (vLLM), "http://localhost:1234/v1"
	// (LM Studio). Default [DefaultOpenAIBaseURL].
	BaseURL string
	// APIKey is sent as a bearer token; "" sends no Authorization header.
	APIKey string
	// Model is the model name when the request names none. Default
	// [DefaultOpenAIModel].
	Model string
	// MaxRetries is how often the SDK retries a request that failed before
	// streaming began (connection errors, 408, 409, 429, 5xx), with backoff
	// and honouring Retry-After. 0 means [DefaultOpenAIMaxRetries]; negative
	// means no retries.
	MaxRetries int
	// Timeout bounds one Generate when the caller's ctx has no deadline.
	// Default [DefaultOpenAITimeout]; negative means none.
	Timeout time.Duration
	// MaxTokens caps the generated tokens (max_completion_tokens); 0 leaves
	// it to the server.
	MaxTokens int64
	// Temperature is the sampling temperature; nil leaves it to the server.
	Temperature *float64
	// Headers are extra HTTP headers sent with every request.
	Headers map[string]string
	// DisableStreamUsage stops asking for usage in the stream
	// (stream_options.include_usage), for servers that reject the option.
	DisableStreamUsage bool
	// HTTPClient sends the requests; nil uses http.DefaultClient.
	HTTPClient *http.Client
	// Logger receives one debug record per Generate; nil discards.
	Logger *slog.Logger
}

// DefaultOpenAIConfig returns the configuration the zero value stands for.
func DefaultOpenAIConfig() OpenAIConfig {
	return OpenAIConfig{BaseURL: DefaultOpenAIBaseURL, Model: DefaultOpenAIModel,
		MaxRetries: DefaultOpenAIMaxRetries, Timeout: DefaultOpenAITimeout}
}

// Validate reports every problem with c at once.
func (c OpenAIConfig) Validate() error {
	var errs []error
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("model: openai: BaseURL %q: %w", c.BaseURL, err))
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			errs = append(errs, fmt.Errorf("model: openai: BaseURL %q must be an http:// or https:// URL with a host", c.BaseURL))
		}
	}
	if c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("model: openai: MaxTokens %d is negative", c.MaxTokens))
	}
	if c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2) {
		errs = append(errs, fmt.Errorf("model: openai: Temperature %v is outside 0..2", *c.Temperature))
	}
	if strings.ContainsAny(c.APIKey, "\r\n") {
		errs = append(errs, errors.New("model: openai: APIKey contains a line break (read from a file? trim it)"))
	}
	return errors.Join(errs...)
}

// OpenAI is a provider for OpenAI-compatible chat-completions servers,
// using the official openai-go SDK with streaming.
//
// Requests: the system prompt first, then the history (see the conversion
// notes below), the offered tools as functions, stream true and
// stream_options.include_usage unless disabled. Conversion: user content
// goes as a string or as parts (text, image_url, file); assistant turns go
// with their tool calls (null content is omitted); tool results go with
// their tool_call_id; reasoning, agent, model, usage and a tool result's
// error flag are not sent.
//
// Streaming: content, refusal (as content) and reasoning
// ("reasoning_content" or "reasoning", as vLLM, DeepSeek and Ollama send
// it) become deltas as they arrive; tool-call fragments are merged by
// index. A server that leaves out the index or reuses it (older Ollama)
// is handled: a fragment with a new id starts a new call. A call without an
// id gets "call_<index>"; empty arguments become "{}" (sent as one last
// fragment, so folding the deltas gives the response exactly). Only the
// first choice is used.
//
// Errors (besides ctx.Err()): *APIError for everything the server or the
// network caused, with Retryable as documented there. In particular: a
// stream that ends without a finish_reason (cut short) and one with no
// choice at all are retryable; a tool call whose arguments are not valid
// JSON (a truncated or sloppy sample) is retryable; a tool call without a
// name or two calls with one id are not. A request that cannot be built
// (a tool schema that is not a JSON object, an unknown history role) is a
// plain error, not retryable.
//
// OpenAI is safe for concurrent use.
type OpenAI struct {
	cfg OpenAIConfig
	svc openai.ChatCompletionService
	log *slog.Logger
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI returns a provider for cfg. It returns the errors of
// [OpenAIConfig.Validate]; it does not contact the server.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultOpenAIBaseURL
	}
	if cfg.Model == "" {
		cfg.Model = DefaultOpenAIModel
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultOpenAIMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultOpenAITimeout
	}
	opts := []option.RequestOption{option.WithBaseURL(cfg.BaseURL), option.WithMaxRetries(cfg.MaxRetries)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &OpenAI{cfg: cfg, svc: openai.NewChatCompletionService(opts...), log: log}, nil
}

// Generate implements [Provider]; errors are described on [OpenAI].
func (p *OpenAI) Generate(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	start := time.Now()
	modelName := p.cfg.Model
	if req.Model != "" {
		modelName = req.Model
	}
	params, err := p.params(req, modelName)
	if err != nil {
		return Response{}, fmt.Errorf("model: openai: thread %s: cannot build the request: %w", req.Thread, err)
	}
	parent := ctx
	if _, ok := ctx.Deadline(); !ok && p.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.Timeout)
		defer cancel()
	}

	st := &chunkState{ctx: parent, onDelta: onDelta, index: make(map[int64]int)}
	stream := p.svc.NewStreaming(ctx, params)
	defer stream.Close()
	for stream.Next() {
		if err := parent.Err(); err != nil {
			return Response{}, err
		}
		st.add(stream.Current())
	}
	if err := parent.Err(); err != nil {
		return Response{}, err
	}
	apiErr := func(status int, retryable bool, err error, format string, args ...any) error {
		return &APIError{Provider: "openai", Model: modelName, Thread: req.Thread, StatusCode: status, Retryable: retryable,
			Message: fmt.Sprintf(format, args...), Err: err}
	}
	if err := stream.Err(); err != nil {
		return Response{}, p.classify(ctx, modelName, req.Thread, err)
	}
	if !st.sawChoice {
		return Response{}, apiErr(0, true, nil, "the stream ended without a choice")
	}
	if st.finish == "" {
		return Response{}, apiErr(0, true, nil, "the stream ended before the model finished (no finish_reason)")
	}
	if err := st.finishCalls(); err != nil {
		var ce *callError
		errors.As(err, &ce)
		msg := ce.msg
		if st.finish == "length" {
			msg += " (the answer was cut at the token limit)"
		}
		return Response{}, apiErr(0, ce.retryable, nil, "%s", msg)
	}
	resp := st.acc.Response()
	resp.Model = modelName
	if st.model != "" {
		resp.Model = st.model
	}
	resp.Usage = st.usage
	resp.FinishReason = st.finish
	p.log.Debug("model generated", "tenant", req.Tenant, "thread", req.Thread, "agent", req.Agent,
		"model", resp.Model, "finish_reason", resp.FinishReason, "tool_calls", len(resp.ToolCalls),
		"took", time.Since(start))
	return resp, nil
}

func (p *OpenAI) params(req Request, modelName string) (openai.ChatCompletionNewParams, error) {
	msgs, err := openAIMessages(req.SystemPrompt, req.Messages)
	if err != nil {
		return openai.ChatCompletionNewParams{}, err
	}
	tools, err := openAITools(req.Tools)
	if err != nil {
		return openai.ChatCompletionNewParams{}, err
	}
	params := openai.ChatCompletionNewParams{Messages: msgs, Model: modelName, Tools: tools}
	if !p.cfg.DisableStreamUsage {
		params.StreamOptions.IncludeUsage = openai.Bool(true)
	}
	if p.cfg.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(p.cfg.MaxTokens)
	}
	if p.cfg.Temperature != nil {
		params.Temperature = openai.Float(*p.cfg.Temperature)
	}
	return params, nil
}

// classify turns a stream error into an *APIError.
func (p *OpenAI) classify(ctx context.Context, modelName, thread string, err error) error {
	ae := &APIError{Provider: "openai", Model: modelName, Thread: thread, Err: err, Message: err.Error()}
	var oe *openai.Error
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &oe):
		ae.StatusCode = oe.StatusCode
		if oe.Message != "" {
			ae.Message = oe.Message
		} else {
			ae.Message = http.StatusText(oe.StatusCode)
		}
		s := oe.StatusCode
		ae.Retryable = s == http.StatusRequestTimeout || s == http.StatusConflict ||
			s == http.StatusTooManyRequests || s >= 500
	case ctx.Err() != nil:
		ae.Message = fmt.Sprintf("no complete answer within %v", p.cfg.Timeout)
		ae.Retryable = true
	case errors.As(err, &se), errors.As(err, &te):
		ae.Message = "malformed stream chunk: " + err.Error()
	default:
		// Connection failures, streams cut mid-way and error events sent in
		// the stream ("received error while streaming").
		ae.Retryable = true
	}
	return ae
}

// chunkState folds stream chunks into deltas and the response.
type chunkState struct {
	ctx       context.Context // the caller's: no delta once it is done
	acc       Accumulator
	onDelta   func(Delta)
	sawChoice bool
	finish    string
	model     string
	usage     *events.Usage
	index     map[int64]int // server index -> our index
	ids       []string      // our index -> first id
}

func (s *chunkState) emit(d Delta) {
	s.acc.Add(d)
	if s.onDelta != nil && s.ctx.Err() == nil {
		s.onDelta(d)
	}
}

func (s *chunkState) add(c openai.ChatCompletionChunk) {
	if c.Model != "" {
		s.model = c.Model
	}
	if c.JSON.Usage.Valid() && (c.Usage.TotalTokens != 0 || c.Usage.PromptTokens != 0 || c.Usage.CompletionTokens != 0) {
		s.usage = &events.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens,
			TotalTokens: c.Usage.TotalTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		s.sawChoice = true
		d := ch.Delta
		if r := extraString(d.JSON.ExtraFields, "reasoning_content", "reasoning"); r != "" {
			s.emit(Delta{Reasoning: r})
		}
		if d.Content != "" {
			s.emit(Delta{Content: d.Content})
		}
		if d.Refusal != "" {
			s.emit(Delta{Content: d.Refusal})
		}
		for _, tc := range d.ToolCalls {
			i, first := s.callIndex(tc.Index, tc.ID)
			id := tc.ID
			if first && id == "" {
				id = fmt.Sprintf("call_%d", i)
				s.ids[i] = id
			}
			s.emit(Delta{ToolCall: &ToolCallDelta{Index: i, ID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		if ch.FinishReason != "" {
			s.finish = ch.FinishReason
		}
	}
}

// callIndex maps a server index to ours; a fragment whose id differs from
// the id already seen at its index starts a new call.
func (s *chunkState) callIndex(server int64, id string) (int, bool) {
	i, ok := s.index[server]
	if ok && (id == "" || s.ids[i] == "" || s.ids[i] == id) {
		return i, false
	}
	i = len(s.ids)
	s.ids = append(s.ids, id)
	s.index[server] = i
	return i, true
}

type callError struct {
	msg       string
	retryable bool
}

func (e *callError) Error() string { return e.msg }

// finishCalls completes and checks the tool calls: empty arguments become
// "{}" (emitted as a last fragment).
func (s *chunkState) finishCalls() error {
	seen := make(map[string]int)
	for i, c := range s.acc.ToolCalls() {
		if c.Name == "" {
			return &callError{msg: fmt.Sprintf("tool call %d (id %q) has no function name", i, c.ID)}
		}
		if j, dup := seen[c.ID]; dup {
			return &callError{msg: fmt.Sprintf("tool calls %d and %d share the id %q", j, i, c.ID)}
		}
		seen[c.ID] = i
		if strings.TrimSpace(c.Arguments) == "" {
			s.emit(Delta{ToolCall: &ToolCallDelta{Index: i, Arguments: "{}"}})
			continue
		}
		if !json.Valid([]byte(c.Arguments)) {
			return &callError{retryable: true,
				msg: fmt.Sprintf("tool call %d (%s) has arguments that are not valid JSON: %.80q", i, c.Name, c.Arguments)}
		}
	}
	return nil
}

// extraString reads the first of keys that holds a JSON string. The SDK
// marks unknown fields invalid but keeps their raw JSON, so Raw is used.
func extraString(fields map[string]respjson.Field, keys ...string) string {
	for _, k := range keys {
		f, ok := fields[k]
		if !ok || f.Raw() == "" {
			continue
		}
		var s string
		if err := json.Unmarshal([]byte(f.Raw()), &s); err == nil && s != "" {
			return s
		}
	}
	return ""
}

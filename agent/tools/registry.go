package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/convlog/convlog/events"
)

// Defaults of [Config].
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxResultBytes = 64 << 10
)

// Config configures a [Registry]. The zero value works.
type Config struct {
	// Timeout bounds one tool call unless the tool sets its own. Default
	// [DefaultTimeout].
	Timeout time.Duration
	// MaxResultBytes caps a result's content; longer output is cut at a
	// UTF-8 boundary and a note says how much was kept. Default
	// [DefaultMaxResultBytes] (the whole turn must fit in one event).
	MaxResultBytes int
	// Logger receives the stack of a panicking tool (level error, keys
	// "tool", "thread", "stack"); nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the configuration the zero value stands for.
func DefaultConfig() Config {
	return Config{Timeout: DefaultTimeout, MaxResultBytes: DefaultMaxResultBytes}
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("tools: Timeout %v is negative", c.Timeout))
	}
	if c.MaxResultBytes < 0 {
		errs = append(errs, fmt.Errorf("tools: MaxResultBytes %d is negative", c.MaxResultBytes))
	}
	return errors.Join(errs...)
}

// Registry holds tools and runs calls to them. It is safe for concurrent
// use, also while tools are being registered.
type Registry struct {
	cfg   Config
	log   *slog.Logger
	mu    sync.RWMutex
	tools map[string]*entry
}

type entry struct {
	tool   Tool
	schema *jsonschema.Schema
}

var _ Runner = (*Registry)(nil)

// NewRegistry returns an empty registry. It returns the errors of
// [Config.Validate].
func NewRegistry(cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResultBytes == 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{cfg: cfg, log: log, tools: make(map[string]*entry)}, nil
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Register adds tools, all or none. It returns every problem at once:
// [ErrInvalidTool] (wrapped, naming the tool and the field) and
// [ErrDuplicateTool] (wrapped).
func (r *Registry) Register(tools ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	add := make(map[string]*entry, len(tools))
	for i, t := range tools {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%w %d (%q): %s", ErrInvalidTool, i, t.Name, fmt.Sprintf(format, args...)))
		}
		if !nameRe.MatchString(t.Name) {
			bad("the name must be 1..64 of A-Z, a-z, 0-9, '_' and '-'")
		}
		if t.Handler == nil {
			bad("it has no handler")
		}
		if t.Timeout < 0 {
			bad("timeout %v is negative", t.Timeout)
		}
		if len(t.Parameters) == 0 {
			t.Parameters = json.RawMessage(emptyObjectSchema)
		}
		s, err := compileSchema(t.Parameters)
		if err != nil {
			bad("%v", err)
		}
		if _, dup := r.tools[t.Name]; dup {
			errs = append(errs, fmt.Errorf("%w: %q is already registered", ErrDuplicateTool, t.Name))
		} else if _, dup := add[t.Name]; dup {
			errs = append(errs, fmt.Errorf("%w: %q is given twice", ErrDuplicateTool, t.Name))
		}
		add[t.Name] = &entry{tool: t, schema: s}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for n, e := range add {
		r.tools[n] = e
	}
	return nil
}

// Names returns the registered tool names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Specs describes the registered tools to a model, sorted by name.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, 0, len(r.tools))
	for _, e := range r.tools {
		out = append(out, Spec{Name: e.tool.Name, Description: e.tool.Description, Parameters: e.tool.Parameters})
	}
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Run runs call and returns its result (see [Runner]). The result's
// content on failure:
//
//   - unknown tool "x" (available: a, b)
//   - invalid arguments for tool "x": <every schema problem, with its location>
//   - tool "x" failed: <handler error>
//   - tool "x" panicked: <value> (the stack goes to the logger)
//   - tool "x" timed out after <timeout>
//   - tool "x" was cancelled: <ctx error>
//
// Empty arguments are treated as "{}". Output that is not valid UTF-8 has
// the bad bytes replaced by U+FFFD (events carry UTF-8 only). A handler
// that ignores ctx keeps
// running after its timeout; its result is discarded.
func (r *Registry) Run(ctx context.Context, call events.ToolCall, env Env) events.ToolResult {
	res := events.ToolResult{ToolCallID: call.ID, Name: call.Name}
	fail := func(format string, args ...any) events.ToolResult {
		res.IsError = true
		res.Content = events.Text(r.cut(fmt.Sprintf(format, args...)))
		return res
	}
	r.mu.RLock()
	e := r.tools[call.Name]
	r.mu.RUnlock()
	if e == nil {
		return fail("unknown tool %q (available: %s)", call.Name, strings.Join(r.Names(), ", "))
	}
	if err := ctx.Err(); err != nil {
		return fail("tool %q was cancelled: %v", call.Name, err)
	}
	args := json.RawMessage(strings.TrimSpace(call.Arguments))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if err := validateArgs(e.schema, args); err != nil {
		return fail("invalid arguments for tool %q: %v", call.Name, err)
	}

	timeout := e.tool.Timeout
	if timeout == 0 {
		timeout = r.cfg.Timeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type outcome struct {
		out      string
		err      error
		panicked any
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				r.log.Error("tool panicked", "tool", call.Name, "tenant", env.Tenant, "thread", env.Thread,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				done <- outcome{panicked: p}
			}
		}()
		out, err := e.tool.Handler(tctx, args, env)
		done <- outcome{out: out, err: err}
	}()
	var o outcome
	finished := false
	select {
	case o = <-done:
		finished = true
	case <-tctx.Done():
	}
	switch {
	case ctx.Err() != nil:
		return fail("tool %q was cancelled: %v", call.Name, ctx.Err())
	case !finished || tctx.Err() != nil && errors.Is(o.err, context.DeadlineExceeded):
		return fail("tool %q timed out after %v", call.Name, timeout)
	case o.panicked != nil:
		return fail("tool %q panicked: %v", call.Name, o.panicked)
	case o.err != nil:
		return fail("tool %q failed: %v", call.Name, o.err)
	}
	res.Content = events.Text(r.cut(strings.ToValidUTF8(o.out, "\uFFFD")))
	return res
}

// cut shortens s to MaxResultBytes at a UTF-8 boundary, with a note.
func (r *Registry) cut(s string) string {
	max := r.cfg.MaxResultBytes
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("\n[truncated: %d of %d bytes shown]", n, len(s))
}

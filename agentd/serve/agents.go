package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/convlog/convlog/agent/model"
	"github.com/convlog/convlog/agent/tools"
	"github.com/convlog/convlog/agentd/worker"
)

// AgentSpec is one agent of an agents file (Config.AgentsFile), a JSON
// array:
//
//	[{"name": "demo", "provider": "offline", "system_prompt": "...",
//	  "tools": ["clock", "calculator", "kv_get", "kv_set"], "max_steps": 8},
//	 {"name": "gpt", "provider": "openai", "model": "gpt-4o-mini",
//	  "base_url": "https://api.openai.com/v1", "api_key_env": "CONVLOG_OPENAI_API_KEY"}]
//
// provider is "offline" (default, no network), "openai" (any
// OpenAI-compatible chat completions API: OpenAI, vLLM, Ollama, LM Studio).
// tools default to all built-in tools. The API key is read from the
// environment variable api_key_env (default CONVLOG_OPENAI_API_KEY) or the
// file api_key_file, never from the agents file itself.
type AgentSpec struct {
	Name         string   `json:"name"`
	Provider     string   `json:"provider"`
	SystemPrompt string   `json:"system_prompt"`
	Model        string   `json:"model"`
	BaseURL      string   `json:"base_url"`
	APIKeyEnv    string   `json:"api_key_env"`
	APIKeyFile   string   `json:"api_key_file"`
	Tools        []string `json:"tools"`
	MaxSteps     int      `json:"max_steps"`
}

// defaultAgents is used without --agents-file: one offline agent "demo"
// with every built-in tool.
func defaultAgents() []AgentSpec {
	return []AgentSpec{{Name: "demo", Provider: "offline",
		SystemPrompt: "You are convlog's offline demo agent. You can tell the time, calculate, and remember facts."}}
}

// loadAgentSpecs reads the agents file path ("": the default agents) and
// reports every problem with it at once.
func loadAgentSpecs(path string) ([]AgentSpec, error) {
	if path == "" {
		return defaultAgents(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--agents-file: %w", err)
	}
	var specs []AgentSpec
	if err := json.Unmarshal(b, &specs); err != nil {
		return nil, fmt.Errorf("--agents-file %s: %w", path, err)
	}
	var errs []error
	seen := map[string]bool{}
	for i, s := range specs {
		if s.Name == "" {
			errs = append(errs, fmt.Errorf("--agents-file %s: agent %d has no name", path, i))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("--agents-file %s: agent %q twice", path, s.Name))
		}
		seen[s.Name] = true
		switch s.Provider {
		case "", "offline", "openai":
		default:
			errs = append(errs, fmt.Errorf("--agents-file %s: agent %q: provider %q is not offline or openai", path, s.Name, s.Provider))
		}
	}
	if len(specs) == 0 {
		errs = append(errs, fmt.Errorf("--agents-file %s: no agents", path))
	}
	return specs, errors.Join(errs...)
}

// agentNames are the names of the agents of the agents file path ("":
// the default agents).
func agentNames(path string) ([]string, error) {
	specs, err := loadAgentSpecs(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names, nil
}

// buildAgents makes the agents of the agents file path ("": the default
// agents), the offline model pausing tokenDelay between tokens.
func buildAgents(path string, tokenDelay time.Duration) (map[string]*worker.Agent, error) {
	specs, err := loadAgentSpecs(path)
	if err != nil {
		return nil, err
	}
	out := map[string]*worker.Agent{}
	for _, s := range specs {
		p, err := buildProvider(s, tokenDelay)
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", s.Name, err)
		}
		tools, err := buildTools(s.Tools)
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", s.Name, err)
		}
		out[s.Name] = &worker.Agent{Name: s.Name, SystemPrompt: s.SystemPrompt, Model: s.Model, Provider: p, Tools: tools, MaxSteps: s.MaxSteps}
	}
	return out, nil
}

func buildProvider(s AgentSpec, tokenDelay time.Duration) (model.Provider, error) {
	switch s.Provider {
	case "", "offline":
		return model.NewOffline(model.OfflineConfig{Model: s.Model, TokenDelay: tokenDelay})
	case "openai":
		return buildOpenAI(s)
	}
	return nil, fmt.Errorf("unknown provider %q", s.Provider)
}

func apiKey(s AgentSpec) (string, error) {
	if s.APIKeyFile != "" {
		b, err := os.ReadFile(s.APIKeyFile)
		if err != nil {
			return "", err
		}
		return string(trimNL(b)), nil
	}
	env := s.APIKeyEnv
	if env == "" {
		env = "CONVLOG_OPENAI_API_KEY"
	}
	return os.Getenv(env), nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
func buildOpenAI(s AgentSpec) (model.Provider, error) {
	key, err := apiKey(s)
	if err != nil {
		return nil, err
	}
	cfg := model.DefaultOpenAIConfig()
	cfg.APIKey, cfg.Model = key, s.Model
	if s.BaseURL != "" {
		cfg.BaseURL = s.BaseURL
	}
	return model.NewOpenAI(cfg)
}

// buildTools returns the built-in tools named (all of them when names is
// empty) as a worker tool set.
func buildTools(names []string) (worker.Tools, error) {
	reg, err := tools.NewRegistry(tools.Config{})
	if err != nil {
		return nil, err
	}
	all := tools.Builtins(nil)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, t := range all {
		if len(names) == 0 || want[t.Name] {
			if err := reg.Register(t); err != nil {
				return nil, err
			}
			delete(want, t.Name)
		}
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		return nil, fmt.Errorf("unknown tool(s) %v (built-in: clock, calculator, kv_get, kv_set)", unknown)
	}
	return worker.RegistryTools(reg), nil
}

package httpapi

import (
	"fmt"
	"net/http"
	"slices"
)

// model is an OpenAI model object; here, one agent.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) modelOf(name string) model {
	return model{ID: name, Object: "model", Created: s.started.Unix(), OwnedBy: "convlog"}
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	names := slices.Clone(s.cfg.Agents)
	slices.Sort(names)
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, n := range names {
		out.Data = append(out.Data, s.modelOf(n))
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("model")
	if !s.agents[name] {
		return newProblem(http.StatusNotFound, "model-not-found", "Model not found",
			fmt.Sprintf("no agent named %q is served here (see GET /v1/models)", name)).field("model")
	}
	return writeJSON(w, http.StatusOK, s.modelOf(name))
}

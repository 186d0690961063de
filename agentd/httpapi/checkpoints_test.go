package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/fold"
)

// checkpointsPage is GET /v1/threads/{id}/checkpoints.
type checkpointsPage struct {
	Version     uint64 `json:"version"`
	Count       uint64 `json:"count"`
	Checkpoints []struct {
		Event struct {
			Seq     uint64 `json:"seq"`
			Type    string `json:"type"`
			Payload struct {
				NS string `json:"ns"`
				ID string `json:"id"`
			} `json:"payload"`
		} `json:"event"`
		Writes []struct {
			Seq     uint64 `json:"seq"`
			Payload struct {
				Checkpoint string `json:"checkpoint"`
				Task       string `json:"task"`
			} `json:"payload"`
		} `json:"writes"`
	} `json:"checkpoints"`
}

func (p checkpointsPage) ids() []string {
	var out []string
	for _, c := range p.Checkpoints {
		out = append(out, c.Event.Payload.ID)
	}
	return out
}

// checkpoints reads GET /v1/threads/{id}/checkpoints with query (with its
// "?") as acme and requires a 200.
func (e *env) checkpoints(t *testing.T, id, query string) checkpointsPage {
	t.Helper()
	r := e.do("GET", "/v1/threads/"+id+"/checkpoints"+query, keyAcme, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var p checkpointsPage
	r.json(t, &p)
	return p
}

// A thread holds more checkpoints than the fold's index names: the
// newest are read at the sequences the index names, older ones from the
// log, each with its writes, newest id first, whatever the number.
func TestCheckpointsAreReadThroughTheIndexAndBeyondIt(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	id := e.createThread(map[string]any{"replies": "off"})
	n := fold.MaxCheckpointsIndexed + 30
	cpID := func(i int) string { return fmt.Sprintf("cp-%05d", i) }
	for start := 0; start < n; start += 50 {
		var evs []map[string]any
		for i := start; i < min(start+50, n); i++ {
			evs = append(evs, map[string]any{"type": "checkpoint.saved", "payload": map[string]any{
				"id": cpID(i), "parent": cpID(i - 1), "checkpoint": map[string]any{"type": "json", "json": map[string]any{"i": i}}}})
			evs = append(evs, map[string]any{"type": "checkpoint.writes", "payload": map[string]any{
				"checkpoint": cpID(i), "task": fmt.Sprintf("task-%d", i), "writes": []any{map[string]any{"idx": 0, "channel": "x", "value": map[string]any{"type": "json", "json": i}}}}})
		}
		r := e.do("POST", "/v1/threads/"+id+"/events", keyAcme, map[string]any{"events": evs})
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	}
	// A subgraph's checkpoint, and a late write for an old checkpoint.
	r := e.do("POST", "/v1/threads/"+id+"/events", keyAcme, map[string]any{"events": []map[string]any{
		{"type": "checkpoint.saved", "payload": map[string]any{"ns": "sub:1", "id": "cp-99999", "checkpoint": map[string]any{"type": "json", "json": nil}}},
		{"type": "checkpoint.writes", "payload": map[string]any{"checkpoint": cpID(3), "task": "late", "writes": []any{}}},
	}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	get := func(query string) checkpointsPage { return e.checkpoints(t, id, query) }

	latest := get("?ns=&limit=1")
	require.Equal(t, uint64(n+1), latest.Count)
	require.Equal(t, []string{cpID(n - 1)}, latest.ids(), "the newest checkpoint of the root namespace")
	require.Len(t, latest.Checkpoints[0].Writes, 1)
	require.Equal(t, fmt.Sprintf("task-%d", n-1), latest.Checkpoints[0].Writes[0].Payload.Task)

	require.Equal(t, []string{"cp-99999"}, get("?limit=1").ids(), "every namespace when ns is absent")
	require.Equal(t, []string{"cp-99999"}, get("?ns=sub:1").ids())

	old := get("?ns=&checkpoint_id=" + cpID(3))
	require.Equal(t, []string{cpID(3)}, old.ids(), "a checkpoint older than the index is read from the log")
	var tasks []string
	for _, w := range old.Checkpoints[0].Writes {
		tasks = append(tasks, w.Payload.Task)
	}
	require.Equal(t, []string{"task-3", "late"}, tasks, "with every write that names it, in stream order")

	var all []string
	before := ""
	for {
		p := get("?ns=&limit=100&before=" + before)
		if len(p.Checkpoints) == 0 {
			break
		}
		all = append(all, p.ids()...)
		before = all[len(all)-1]
	}
	require.Len(t, all, n, "every checkpoint, across the index and the log")
	for i, got := range all {
		require.Equal(t, cpID(n-1-i), got)
	}

	r = e.do("GET", "/v1/threads/"+id+"/checkpoints?nope=1", keyAcme, nil)
	require.Equal(t, http.StatusBadRequest, r.status)
	r = e.do("GET", "/v1/threads/missing/checkpoints", keyAcme, nil)
	require.Equal(t, http.StatusNotFound, r.status)
	id = e.createThread(map[string]any{"replies": "off"})
	require.Empty(t, get("").Checkpoints, "a thread with no checkpoint has an empty list")
}

// A subgraph's newest checkpoint that left the index's window is still
// indexed (fold.CheckpointIndex.Latest): it is read with its writes, and
// its older checkpoints follow from the log, newest id first.
func TestTheNewestCheckpointOfANamespaceOutsideTheWindowIsRead(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	id := e.createThread(map[string]any{"replies": "off"})
	saved := func(ns, cp string) map[string]any {
		return map[string]any{"type": "checkpoint.saved", "payload": map[string]any{"ns": ns, "id": cp, "checkpoint": map[string]any{"type": "json", "json": nil}}}
	}
	evs := []map[string]any{saved("sub:1", "s-1"), saved("sub:1", "s-2"),
		{"type": "checkpoint.writes", "payload": map[string]any{"ns": "sub:1", "checkpoint": "s-2", "task": "sub-task", "writes": []any{}}}}
	for i := range fold.MaxCheckpointsIndexed + 5 {
		evs = append(evs, saved("", fmt.Sprintf("cp-%05d", i)))
	}
	r := e.do("POST", "/v1/threads/"+id+"/events", keyAcme, map[string]any{"events": evs})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	get := func(query string) checkpointsPage { return e.checkpoints(t, id, query) }
	p := get("?ns=sub:1&limit=1")
	require.Equal(t, []string{"s-2"}, p.ids())
	require.Len(t, p.Checkpoints[0].Writes, 1)
	require.Equal(t, "sub-task", p.Checkpoints[0].Writes[0].Payload.Task)
	require.Equal(t, []string{"s-2", "s-1"}, get("?ns=sub:1").ids())
	require.Equal(t, []string{"s-1"}, get("?ns=sub:1&before=s-2").ids())
	require.Equal(t, []string{"s-2"}, get("?ns=sub:1&checkpoint_id=s-2").ids())
	require.Equal(t, []string{"s-1"}, get("?ns=sub:1&checkpoint_id=s-1").ids())
}

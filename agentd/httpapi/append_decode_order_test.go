package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendBodyProblemIsTheSameEveryTime checks that a payload with
// several schema violations at the same depth is refused with the same
// field and detail on every try: the one whose field path sorts first.
func TestAppendBodyProblemIsTheSameEveryTime(t *testing.T) {
	e := newEnv(t, withoutWorkers())
	th := e.createThread(map[string]any{"replies": "off"})
	path := "/v1/threads/" + th + "/events"
	body := `{"events": [{"type": "checkpoint.saved", "payload": {"parent": 7, "id": 5, "checkpoint": "x", "metadata": 1}}]}`
	seen := map[string]int{}
	for range 40 {
		r := e.do("POST", path, keyAcme, body)
		p := r.problem(t)
		seen[fmt.Sprintf("%d %v %v: %v", r.status, p["type"], p["field"], p["detail"])]++
	}
	require.Equal(t, map[string]int{
		"422 urn:convlog:problem:invalid-request events[0].payload.checkpoint: events[0].payload.checkpoint: got string, want object": 40,
	}, seen)
}

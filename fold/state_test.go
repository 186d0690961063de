package fold_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// The one "waiting for its agent" rule, which the worker and the chat
// endpoint share (before, the chat's copy ignored deleted, erased and
// replies-off threads).
func TestWaitingForAgent(t *testing.T) {
	user := events.Message{Role: events.RoleUser, Content: events.Text("q")}
	assistant := events.Message{Role: events.RoleAssistant, Content: events.Text("a")}
	tool := events.Message{Role: events.RoleTool, ToolCallID: "c", Content: events.Text("42")}
	live := func(msgs ...events.Message) *fold.State {
		s := fold.NewState("acme", "t")
		s.Exists, s.Replies, s.Messages = true, events.RepliesAuto, msgs
		return s
	}
	cases := []struct {
		name string
		s    *fold.State
		want bool
	}{
		{"a thread ending on a user message waits", live(user), true},
		{"a thread ending on tool results waits", live(user, tool), true},
		{"an answered thread does not wait", live(user, assistant), false},
		{"an empty thread does not wait", live(), false},
		{"a thread with a pending call does not wait", func() *fold.State {
			s := live(user)
			s.Pending = []fold.PendingCall{{ID: "c"}}
			return s
		}(), false},
		{"a deleted thread does not wait", func() *fold.State { s := live(user); s.Deleted = true; return s }(), false},
		{"an erased thread does not wait", func() *fold.State { s := live(user); s.Erased = true; return s }(), false},
		{"a thread with replies off does not wait", func() *fold.State { s := live(user); s.Replies = events.RepliesOff; return s }(), false},
		{"a thread that does not exist does not wait", func() *fold.State { s := live(user); s.Exists = false; return s }(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.s.WaitingForAgent())
		})
	}
}

package deepagents_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/client/deepagents"
	"github.com/convlog/convlog/client/deepagents/checkpointertest"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
)

func TestLogCheckpointerConformance(t *testing.T) {
	cp := deepagents.NewLogCheckpointer(clienttest.New(t).Client, deepagents.LogConfig{})
	checkpointertest.Run(t, func(*testing.T) deepagents.Checkpointer { return cp })
}

// stored lists the events of tenant/thread after seq after, as
// "type" or "type:detail".
func stored(t *testing.T, c *client.Client, thread string, after uint64) []string {
	t.Helper()
	var out []string
	for st, err := range c.Events(context.Background(), events.DefaultTenant, thread, after+1, 0) {
		require.NoError(t, err)
		s := string(st.Type)
		if cp, ok := st.Payload.(events.Compaction); ok {
			s += fmt.Sprintf(":up_to_%d", cp.UpToSeq)
		}
		out = append(out, s)
	}
	return out
}

var (
	user      = checkpointertest.User
	assistant = checkpointertest.Assistant
	tool      = checkpointertest.Tool
	call      = checkpointertest.Call
)

func concat(parts ...[]events.Message) []events.Message {
	var out []events.Message
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Save records the change from the stored history to the saved one with
// the events the package doc's rule names.
func TestSaveRecordsTheChangeAsEvents(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	cp := deepagents.NewLogCheckpointer(c, deepagents.LogConfig{})
	base := checkpointertest.Conversation("b", 4) // u a | u a(call) t a | u a | u a(call) t a
	summary := user("Summary so far.")

	cases := []struct {
		name string
		base []events.Message // default: base
		next []events.Message
		want []string
		// seqIndex is the index in base of the message whose sequence the
		// compaction cuts at (-1: none).
		cutAfter int
	}{
		{name: "an identical history appends nothing", next: base, want: nil, cutAfter: -1},
		{name: "an extension appends only the new messages", next: concat(base, checkpointertest.Conversation("n", 2)),
			want: []string{"message.user", "message.assistant", "message.user", "message.assistant", "tool.result", "message.assistant"}, cutAfter: -1},
		{name: "a summary and a suffix of the history is a compaction", next: concat([]events.Message{summary}, base[6:]),
			want: []string{"thread.compacted"}, cutAfter: 5},
		{name: "a summary, a suffix and new messages is a compaction followed by the new messages",
			next: concat([]events.Message{summary}, base[2:], checkpointertest.Conversation("n", 1)),
			want: []string{"thread.compacted", "message.user", "message.assistant"}, cutAfter: 1},
		{name: "a summary by the assistant is a compaction too", next: concat([]events.Message{assistant("Summary so far.")}, base[len(base)-4:]),
			want: []string{"thread.compacted"}, cutAfter: len(base) - 5},
		{name: "a suffix inside a restored block cannot be cut there, so it is a restore",
			base: checkpointertest.Rich(), next: concat([]events.Message{summary}, checkpointertest.Rich()[5:]),
			want: []string{"thread.restored"}, cutAfter: -1},
		{name: "a summary with a name is not a bare summary, so it is a restore",
			next: concat([]events.Message{{Role: events.RoleUser, Name: "x", Content: events.Text("s")}}, base[6:]), want: []string{"thread.restored"}, cutAfter: -1},
		{name: "a summary followed by the whole history is an extension of nothing, so it is a restore",
			next: concat([]events.Message{summary}, base), want: []string{"thread.restored"}, cutAfter: -1},
		{name: "a regenerated last answer is a restore",
			next: concat(base[:len(base)-1], []events.Message{assistant("better")}), want: []string{"thread.restored"}, cutAfter: -1},
		{name: "a system message among the new messages is a restore",
			next: concat(base, []events.Message{{Role: events.RoleSystem, Content: events.Text("new rules")}}), want: []string{"thread.restored"}, cutAfter: -1},
		{name: "an empty history is a reset", next: []events.Message{}, want: []string{"thread.reset"}, cutAfter: -1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			thread := fmt.Sprintf("rule-%d", i)
			if tc.base == nil {
				tc.base = base
			}
			require.NoError(t, cp.Save(ctx, thread, tc.base))
			before, err := c.Get(ctx, events.DefaultTenant, thread, client.Consistent())
			require.NoError(t, err)

			require.NoError(t, cp.Save(ctx, thread, tc.next))
			got := stored(t, c, thread, before.Version)
			want := tc.want
			if tc.cutAfter >= 0 {
				want = append([]string(nil), want...)
				want[0] = fmt.Sprintf("%s:up_to_%d", want[0], before.Messages[tc.cutAfter].Seq)
			}
			require.Equal(t, want, got)
			loaded, err := cp.Load(ctx, thread)
			require.NoError(t, err)
			require.Equal(t, tc.next, loaded)
			if len(got) > 1 {
				after, err := c.Get(ctx, events.DefaultTenant, thread, client.Consistent())
				require.NoError(t, err)
				require.Equal(t, before.Version+uint64(len(got)), after.Version, "one atomic batch: consecutive sequences")
			}
		})
	}
}

// A new thread is created with replies off and its first messages, in
// one atomic append; Clear is a reset that leaves the record in the log.
func TestSaveCreatesTheThreadAndClearResetsIt(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	cp := deepagents.NewLogCheckpointer(c, deepagents.LogConfig{Thread: events.ThreadCreated{Agent: "deep"}})
	h := checkpointertest.Conversation("c", 2)
	require.NoError(t, cp.Save(ctx, "fresh", h))
	require.Equal(t, []string{"thread.created", "message.user", "message.assistant", "message.user",
		"message.assistant", "tool.result", "message.assistant"}, stored(t, c, "fresh", 0))
	th, err := c.Get(ctx, events.DefaultTenant, "fresh", client.Consistent())
	require.NoError(t, err)
	require.Equal(t, events.RepliesOff, th.Replies)
	require.Equal(t, "deep", th.Agent)

	require.NoError(t, cp.Clear(ctx, "fresh"))
	require.NoError(t, cp.Clear(ctx, "fresh"))
	all := stored(t, c, "fresh", 0)
	require.Len(t, all, 8, "one reset; the second clear of an empty history records nothing")
	require.Equal(t, "thread.reset", all[7])
	ms, err := cp.Load(ctx, "fresh")
	require.NoError(t, err)
	require.Empty(t, ms)
}

// Plain Save follows the seed (the saved history wins) but never
// interleaves, and the superseded messages stay in the log; SaveVersion
// reports the conflict instead.
func TestSaveAfterAnotherWriter(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	cp := deepagents.NewLogCheckpointer(c, deepagents.LogConfig{})
	h := checkpointertest.Conversation("w", 1)
	require.NoError(t, cp.Save(ctx, "shared", h))
	_, v, err := cp.LoadVersion(ctx, "shared")
	require.NoError(t, err)

	// Another service appends a message the agent has not seen.
	_, err = c.Append(ctx, events.DefaultTenant, "shared", []events.Event{{Payload: events.UserMessage{Content: events.Text("from the web UI")}}}, client.AnyVersion())
	require.NoError(t, err)

	mine := concat(h, checkpointertest.Conversation("mine", 1))
	_, err = cp.SaveVersion(ctx, "shared", mine, v)
	var conflict *client.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, v, conflict.Expected)

	require.NoError(t, cp.Save(ctx, "shared", mine))
	loaded, err := cp.Load(ctx, "shared")
	require.NoError(t, err)
	require.Equal(t, mine, loaded)
	types := stored(t, c, "shared", 0)
	require.Equal(t, []string{"thread.created", "message.user", "message.assistant", "message.user", "thread.restored"}, types,
		"the other writer's message is superseded, not erased")
}

// More new messages than one atomic batch holds are appended in several
// batches and load back whole.
func TestSaveOfAVeryLongExtension(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	cp := deepagents.NewLogCheckpointer(c, deepagents.LogConfig{})
	h := checkpointertest.Conversation("long", 400) // 1,200 messages
	require.NoError(t, cp.Save(ctx, "long", h[:10]))
	require.NoError(t, cp.Save(ctx, "long", h))
	loaded, err := cp.Load(ctx, "long")
	require.NoError(t, err)
	require.Equal(t, h, loaded)
}

func TestSaveToADeletedOrErasedThreadFails(t *testing.T) {
	c := clienttest.New(t).Client
	ctx := context.Background()
	cp := deepagents.NewLogCheckpointer(c, deepagents.LogConfig{})
	h := checkpointertest.Conversation("d", 1)
	cases := []struct {
		name   string
		remove func(thread string) error
	}{
		{"a soft-deleted thread", func(thread string) error {
			_, err := c.Delete(ctx, events.DefaultTenant, thread, "test")
			return err
		}},
		{"an erased thread", func(thread string) error {
			_, err := c.Erase(ctx, events.DefaultTenant, thread, "test")
			return err
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			thread := fmt.Sprintf("gone-%d", i)
			require.NoError(t, cp.Save(ctx, thread, h))
			require.NoError(t, tc.remove(thread))
			ms, err := cp.Load(ctx, thread)
			require.NoError(t, err)
			require.Empty(t, ms, "it loads as a cache miss")
			err = cp.Save(ctx, thread, concat(h, h))
			require.ErrorIs(t, err, client.ErrThreadNotFound)
		})
	}
}

func TestValidateNamesTheProblem(t *testing.T) {
	cases := []struct {
		name string
		ms   []events.Message
		want string
	}{
		{"a field the role does not store", []events.Message{{Role: events.RoleUser, Content: events.Text("x"), Model: "m"}}, "message 0 (user): [model] not stored"},
		{"a tool result for no call", []events.Message{user("x"), tool("c", "r")}, `call "c", which is not pending`},
		{"a message while calls are pending", []events.Message{user("x"), assistant("", call("c", "t", `{}`)), user("y")}, "still pending"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := deepagents.Validate(tc.ms)
			require.ErrorIs(t, err, deepagents.ErrInvalidHistory)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.NoError(t, deepagents.Validate(nil))
}

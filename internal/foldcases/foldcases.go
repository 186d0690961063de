// Package foldcases is the fold's case table: threads of a few events,
// each with the verdict the fold gives every event (applied, or the
// rejection code), the history it projects and, where it matters, the
// state after. Package fold's tests fold every case in memory; package
// projector's tests publish every case to a real server and check that
// the runner's snapshots say the same. A change to a rule of the fold
// fails both.
package foldcases

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
)

// Step is one event of a case.
type Step struct {
	// P is the payload; Dyn builds it from the sequences of the steps
	// before it (for compactions); Raw is stored as is.
	P   events.Payload
	Dyn func(seqs []uint64) events.Payload
	Raw []byte
	// Env changes the envelope before it is encoded.
	Env func(*events.Event)
	// Want is the verdict: "" applied, else the rejection code.
	Want fold.Code
}

// Case is a thread of steps and what the fold makes of it.
type Case struct {
	Name string
	// Created is the first event; nil means a plain thread.created, unless
	// NoCreate.
	Created  *events.ThreadCreated
	NoCreate bool
	Steps    []Step
	// History is the projected history, one line per message (see [Line]).
	History []string
	// Check, when set, checks more of the state after the last step; seqs
	// are the sequences of [Case.All]'s steps.
	Check func(t *testing.T, s *fold.State, seqs []uint64)
}

// All is the case's steps with its thread.created first (none when
// NoCreate).
func (c Case) All() []Step {
	if c.NoCreate {
		return c.Steps
	}
	created := events.ThreadCreated{}
	if c.Created != nil {
		created = *c.Created
	}
	return append([]Step{OK(created)}, c.Steps...)
}

// Encode is the bytes stored on tenant/thread's subject for st: an event
// at time at, built from the sequences of the steps before it.
func (st Step) Encode(t testing.TB, tenant, thread string, at time.Time, seqs []uint64) []byte {
	t.Helper()
	if st.Raw != nil {
		return st.Raw
	}
	p := st.P
	if st.Dyn != nil {
		p = st.Dyn(seqs)
	}
	ev := events.New(tenant, thread, "test", p)
	ev.Time = at
	if st.Env != nil {
		st.Env(&ev)
	}
	data, err := events.Marshal(ev)
	require.NoError(t, err)
	return data
}

// Verify checks s, the state after folding the case's steps (of [Case.All])
// at seqs: the rejections it records are exactly the verdicts, its history
// is the case's, and the case's Check holds.
func (c Case) Verify(t *testing.T, s *fold.State, seqs []uint64) {
	t.Helper()
	steps := c.All()
	require.Len(t, seqs, len(steps))
	got := map[uint64]fold.Code{}
	for _, r := range s.Rejections {
		got[r.Seq] = r.Code
	}
	for k, st := range steps {
		require.Equal(t, st.Want, got[seqs[k]], "the verdict of step %d (seq %d)", k, seqs[k])
	}
	require.Equal(t, c.History, append([]string{}, Lines(s.Messages)...))
	if c.Check != nil {
		c.Check(t, s, seqs)
	}
}

// CodeOf is the rejection code of an error of the fold: "" for nil; t
// fails on an error that is not a rejection.
func CodeOf(t testing.TB, err error) fold.Code {
	t.Helper()
	if err == nil {
		return ""
	}
	var rej *fold.RejectionError
	require.ErrorAs(t, err, &rej)
	return rej.Code
}

// OK is a step the fold applies.
func OK(p events.Payload) Step { return Step{P: p} }

// Rejected is a step the fold rejects with c.
func Rejected(c fold.Code, p events.Payload) Step { return Step{P: p, Want: c} }

// User is a user message of text.
func User(text string) events.UserMessage { return events.UserMessage{Content: events.Text(text)} }

// Say is an assistant message of text.
func Say(text string) events.AssistantMessage {
	return events.AssistantMessage{Content: events.Text(text)}
}

// Calls is an assistant message that calls the tool "lookup" once per id.
func Calls(ids ...string) events.AssistantMessage {
	a := events.AssistantMessage{}
	for _, id := range ids {
		a.ToolCalls = append(a.ToolCalls, events.ToolCall{ID: id, Name: "lookup", Arguments: `{"q":"` + id + `"}`})
	}
	return a
}

// Result is the result text of the call id.
func Result(id, text string) events.ToolResult {
	return events.ToolResult{ToolCallID: id, Name: "lookup", Content: events.Text(text)}
}

// Msg is a history message of role and text (for restores and forks).
func Msg(role events.Role, text string) events.Message {
	return events.Message{Role: role, Content: events.Text(text)}
}

// CallMsg is the history message of [Calls].
func CallMsg(ids ...string) events.Message {
	a := Calls(ids...)
	return events.Message{Role: events.RoleAssistant, ToolCalls: a.ToolCalls}
}

// ToolMsg is the history message of [Result].
func ToolMsg(id, text string) events.Message {
	return events.Message{Role: events.RoleTool, ToolCallID: id, Content: events.Text(text)}
}

// CompactAfter is a compaction up to the sequence of step i of
// [Case.All] (0 is the thread.created event).
func CompactAfter(i int, summary string) func([]uint64) events.Payload {
	return func(seqs []uint64) events.Payload {
		return events.Compaction{UpToSeq: seqs[i], Summary: events.Text(summary)}
	}
}

// Line renders a message as "role:content", "assistant->id,id" for calls
// and "tool[id]:content"; a leading "*" marks synthetic messages.
func Line(m events.Message) string {
	s := string(m.Role)
	if m.Role == events.RoleTool {
		s += "[" + m.ToolCallID + "]"
	}
	if len(m.ToolCalls) > 0 {
		ids := make([]string, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			ids[i] = c.ID
		}
		s += "->" + strings.Join(ids, ",")
	}
	if !m.Content.IsNull() {
		s += ":" + m.Content.String()
	}
	if m.Synthetic {
		s = "*" + s
	}
	return s
}

// Lines is [Line] of every message.
func Lines(ms []events.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = Line(m)
	}
	return out
}

// PendingIDs are the ids of the calls pending in s.
func PendingIDs(s *fold.State) []string {
	var ids []string
	for _, p := range s.Pending {
		ids = append(ids, p.ID)
	}
	return ids
}

// Cases is the table, in groups by rule: each case names the rule it
// shows.
func Cases() []Case {
	return slices.Concat(callCases(), pendingPolicyCases(), historyCases(), forkCases(), lifecycleCases(), refusalCases(), updateCases())
}

// callCases are the tool-call matching rules: a call is pending until
// answered, results come in any order, each call is answered once.
func callCases() []Case {
	seven := []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7"}
	var sevenResults []Step
	for _, i := range []int{3, 0, 6, 1, 5, 2, 4} {
		sevenResults = append(sevenResults, OK(Result(seven[i], "r"+seven[i])))
	}
	return []Case{
		{
			Name:    "a user message and its answer are appended in order",
			Steps:   []Step{OK(User("hi")), OK(Say("hello"))},
			History: []string{"user:hi", "assistant:hello"},
			Check: func(t *testing.T, s *fold.State, seqs []uint64) {
				require.Equal(t, seqs[2], s.Version)
				require.NotNil(t, s.LastUser)
				require.Equal(t, seqs[1], s.LastUser.Seq)
				require.True(t, s.LastUserAnswered)
			},
		},
		{
			Name:    "a tool call is pending until its result answers it",
			Steps:   []Step{OK(User("q")), OK(Calls("a"))},
			History: []string{"user:q", "assistant->a"},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, []string{"a"}, PendingIDs(s))
			},
		},
		{
			Name:    "a result answers its pending call and clears it",
			Steps:   []Step{OK(User("q")), OK(Calls("a")), OK(Result("a", "42")), OK(Say("it is 42"))},
			History: []string{"user:q", "assistant->a", "tool[a]:42", "assistant:it is 42"},
		},
		{
			Name: "the taubench pattern reuses a call id once the first call was answered",
			Steps: []Step{OK(User("book")), OK(Calls("call_1")), OK(Result("call_1", "found")),
				OK(Calls("call_1")), OK(Result("call_1", "booked")), OK(Say("done"))},
			History: []string{"user:book", "assistant->call_1", "tool[call_1]:found", "assistant->call_1", "tool[call_1]:booked", "assistant:done"},
		},
		{
			Name:    "seven parallel calls are all matched when their results come in another order",
			Steps:   append([]Step{OK(User("go")), OK(Calls(seven...))}, append(sevenResults, OK(Say("all done")))...),
			History: []string{"user:go", "assistant->c1,c2,c3,c4,c5,c6,c7", "tool[c4]:rc4", "tool[c1]:rc1", "tool[c7]:rc7", "tool[c2]:rc2", "tool[c6]:rc6", "tool[c3]:rc3", "tool[c5]:rc5", "assistant:all done"},
		},
		{
			Name:    "a result before its call is rejected",
			Steps:   []Step{OK(User("q")), Rejected(fold.CodeNotPending, Result("a", "early")), OK(Calls("a")), OK(Result("a", "late"))},
			History: []string{"user:q", "assistant->a", "tool[a]:late"},
		},
		{
			Name:    "a second answer to the same call is rejected",
			Steps:   []Step{OK(User("q")), OK(Calls("a")), OK(Result("a", "one")), Rejected(fold.CodeNotPending, Result("a", "two"))},
			History: []string{"user:q", "assistant->a", "tool[a]:one"},
		},
		{
			Name:    "a result for a call that was never made is rejected",
			Steps:   []Step{OK(User("q")), OK(Calls("a")), Rejected(fold.CodeNotPending, Result("b", "?")), OK(Result("a", "!"))},
			History: []string{"user:q", "assistant->a", "tool[a]:!"},
		},
	}
}

// pendingPolicyCases are what a message does to pending calls under the reject and cancel policies.
func pendingPolicyCases() []Case {
	cancel := &events.ThreadCreated{PendingPolicy: events.PendingCancel}
	return []Case{
		{
			Name:    "a user message while calls are pending is rejected under the reject policy",
			Steps:   []Step{OK(User("q")), OK(Calls("a")), Rejected(fold.CodePendingCalls, User("hello?"))},
			History: []string{"user:q", "assistant->a"},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, []string{"a"}, PendingIDs(s))
			},
		},
		{
			Name:    "an assistant message while calls are pending is rejected under the reject policy",
			Steps:   []Step{OK(User("q")), OK(Calls("a")), Rejected(fold.CodePendingCalls, Say("never mind"))},
			History: []string{"user:q", "assistant->a"},
		},
		{
			Name:    "a user message while calls are pending closes them as cancelled under the cancel policy",
			Created: cancel,
			Steps:   []Step{OK(User("q")), OK(Calls("a", "b")), OK(Result("b", "B")), OK(User("stop"))},
			History: []string{"user:q", "assistant->a,b", "tool[b]:B", "*tool[a]:" + events.CancelledContent, "user:stop"},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Empty(t, s.Pending)
				require.True(t, s.Messages[3].IsError)
			},
		},
		{
			Name:    "a late result for a cancelled call is rejected",
			Created: cancel,
			Steps:   []Step{OK(User("q")), OK(Calls("a")), OK(Say("moving on")), Rejected(fold.CodeNotPending, Result("a", "late"))},
			History: []string{"user:q", "assistant->a", "*tool[a]:" + events.CancelledContent, "assistant:moving on"},
		},
	}
}

// historyCases are reset, restore and compaction of the history.
func historyCases() []Case {
	return []Case{
		{
			Name:    "a reset clears the history and later messages start a new one",
			Steps:   []Step{OK(User("one")), OK(Say("1")), OK(events.Reset{Reason: "new topic"}), OK(User("two"))},
			History: []string{"user:two"},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.EqualValues(t, 1, s.Generation)
			},
		},
		{
			Name:    "a reset drops pending tool calls",
			Steps:   []Step{OK(User("q")), OK(Calls("a")), OK(events.Reset{}), Rejected(fold.CodeNotPending, Result("a", "late")), OK(User("again"))},
			History: []string{"user:again"},
		},
		{
			Name: "a valid restore replaces the history",
			Steps: []Step{OK(User("old")), OK(Say("old answer")),
				OK(events.Restore{Messages: []events.Message{Msg(events.RoleUser, "new"), CallMsg("x"), ToolMsg("x", "X"), Msg(events.RoleAssistant, "new answer")}}),
				OK(User("next"))},
			History: []string{"user:new", "assistant->x", "tool[x]:X", "assistant:new answer", "user:next"},
		},
		{
			Name: "a restore that ends with a call leaves that call pending",
			Steps: []Step{OK(events.Restore{Messages: []events.Message{Msg(events.RoleUser, "u"), CallMsg("p")}}),
				OK(Result("p", "P"))},
			History: []string{"user:u", "assistant->p", "tool[p]:P"},
		},
		{
			Name: "a restore with a result that answers no call is rejected",
			Steps: []Step{OK(User("keep")),
				Rejected(fold.CodeInvalidHistory, events.Restore{Messages: []events.Message{Msg(events.RoleUser, "u"), ToolMsg("nope", "?")}})},
			History: []string{"user:keep"},
		},
		{
			Name: "a restore with a user message between a call and its result is rejected",
			Steps: []Step{OK(User("keep")),
				Rejected(fold.CodeInvalidHistory, events.Restore{Messages: []events.Message{CallMsg("x"), Msg(events.RoleUser, "u"), ToolMsg("x", "X")}})},
			History: []string{"user:keep"},
		},
		{
			Name: "a compaction replaces the messages up to a sequence by its summary",
			Steps: []Step{OK(User("a")), OK(Say("b")), OK(User("c")), OK(Say("d")),
				{Dyn: CompactAfter(2, "a and b happened")}, OK(User("e"))},
			History: []string{"*user:a and b happened", "user:c", "assistant:d", "user:e"},
			Check: func(t *testing.T, s *fold.State, seqs []uint64) {
				require.Equal(t, seqs[2], s.Messages[0].Seq, "the summary carries the last sequence it replaces")
			},
		},
		{
			Name: "a compaction that would separate a call from its result is rejected",
			Steps: []Step{OK(User("q")), OK(Calls("a")), OK(Result("a", "A")), OK(Say("ok")),
				{Dyn: CompactAfter(2, "cut inside a turn"), Want: fold.CodeInvalidHistory}},
			History: []string{"user:q", "assistant->a", "tool[a]:A", "assistant:ok"},
		},
		{
			Name: "a compaction that would cut a pending call is rejected",
			Steps: []Step{OK(User("q")), OK(Calls("a")),
				{Dyn: CompactAfter(2, "cut the call"), Want: fold.CodeInvalidHistory}},
			History: []string{"user:q", "assistant->a"},
		},
		{
			Name: "a compaction up to its own sequence or later is rejected",
			Steps: []Step{OK(User("q")),
				Rejected(fold.CodeInvalidHistory, events.Compaction{UpToSeq: 1 << 40, Summary: events.Text("future")})},
			History: []string{"user:q"},
		},
		{
			Name: "a second compaction cuts by sequence, including the first summary",
			Steps: []Step{OK(User("a")), OK(Say("b")), OK(User("c")), OK(Say("d")),
				{Dyn: CompactAfter(2, "S1")}, OK(User("e")),
				{Dyn: CompactAfter(4, "S2")}},
			History: []string{"*user:S2", "user:e"},
		},
	}
}

// forkCases are forks: a new thread with the source's history and state, or none.
func forkCases() []Case {
	return []Case{
		{
			Name:     "a fork starts a thread with the source's history and state",
			NoCreate: true,
			Steps: []Step{OK(events.Forked{SourceTenant: "src", SourceThread: "orig", SourceSeq: 77,
				Created:  events.ThreadCreated{Title: "fork", Agent: "helper"},
				Messages: []events.Message{Msg(events.RoleUser, "u"), CallMsg("f"), ToolMsg("f", "F"), Msg(events.RoleAssistant, "a")},
				State:    map[string]json.RawMessage{"plan": json.RawMessage(`["x"]`)}}),
				OK(User("continue"))},
			History: []string{"user:u", "assistant->f", "tool[f]:F", "assistant:a", "user:continue"},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, &fold.ForkRef{Tenant: "src", Thread: "orig", Seq: 77}, s.ForkedFrom)
				require.JSONEq(t, `["x"]`, string(s.KV["plan"]))
				require.Equal(t, "fork", s.Title)
			},
		},
		{
			Name:    "a fork onto a thread that exists is rejected",
			Steps:   []Step{Rejected(fold.CodeAlreadyExists, events.Forked{SourceTenant: "src", SourceThread: "orig", SourceSeq: 1, Messages: []events.Message{}})},
			History: []string{},
		},
		{
			Name:     "a fork with an invalid history is rejected and the thread does not exist",
			NoCreate: true,
			Steps: []Step{Rejected(fold.CodeInvalidHistory, events.Forked{SourceTenant: "src", SourceThread: "orig", SourceSeq: 1,
				Messages: []events.Message{ToolMsg("x", "orphan")}}),
				Rejected(fold.CodeNoThread, User("anyone?"))},
			History: []string{},
			Check:   func(t *testing.T, s *fold.State, _ []uint64) { require.False(t, s.Exists) },
		},
	}
}

// lifecycleCases are the key-value state, soft deletion and lifetimes.
func lifecycleCases() []Case {
	return []Case{
		{
			Name: "state set and delete change the key-value state",
			Steps: []Step{OK(events.StateSet{Key: "a", Value: json.RawMessage(`1`)}), OK(events.StateSet{Key: "b", Value: json.RawMessage(`{"x":true}`)}),
				OK(events.StateSet{Key: "a", Value: json.RawMessage(`2`)}), OK(events.StateDeleted{Key: "b"})},
			History: []string{},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Len(t, s.KV, 1)
				require.JSONEq(t, `2`, string(s.KV["a"]))
			},
		},
		{
			Name:    "a state set beyond the size limit is rejected",
			Steps:   []Step{Rejected(fold.CodeTooLarge, events.StateSet{Key: "big", Value: json.RawMessage(`"` + strings.Repeat("x", fold.MaxStateBytes) + `"`)})},
			History: []string{},
			Check:   func(t *testing.T, s *fold.State, _ []uint64) { require.Empty(t, s.KV) },
		},
		{
			Name: "a soft-deleted thread rejects appends until it is undeleted",
			Steps: []Step{OK(User("a")), OK(events.Deleted{Reason: "spam?"}), Rejected(fold.CodeDeleted, User("b")),
				OK(events.Undeleted{}), OK(User("c"))},
			History: []string{"user:a", "user:c"},
			Check:   func(t *testing.T, s *fold.State, _ []uint64) { require.False(t, s.Deleted) },
		},
		{
			// LangGraph's deleteThread, then the id used again: nothing of
			// the old lifetime is in the new one's state.
			Name: "a create on a soft-deleted thread starts a new lifetime",
			Steps: []Step{OK(User("old")), OK(Calls("c1")), OK(events.StateSet{Key: "k", Value: json.RawMessage(`1`)}),
				Rejected(fold.CodeAlreadyExists, events.ThreadCreated{Title: "too early"}),
				OK(events.Deleted{}), OK(events.ThreadCreated{Title: "again"}), OK(User("new")),
				Rejected(fold.CodeInvalid, events.Undeleted{})},
			History: []string{"user:new"},
			Check: func(t *testing.T, s *fold.State, seqs []uint64) {
				require.Equal(t, 1, s.Lifetime)
				require.Equal(t, seqs[6], s.LifetimeSeq)
				require.Equal(t, "again", s.Title)
				require.False(t, s.Deleted)
				require.Empty(t, s.KV)
				require.Empty(t, s.Pending)
				require.Equal(t, map[string]int(nil), s.AgentTurns)
				require.Equal(t, seqs[7], s.LastUser.Seq)
			},
		},
		{
			Name:     "an external id must map to the thread's id",
			NoCreate: true,
			Steps: []Step{Rejected(fold.CodeInvalid, events.ThreadCreated{ExternalID: "some/other thread"}),
				OK(events.ThreadCreated{})},
			History: []string{},
			Check:   func(t *testing.T, s *fold.State, _ []uint64) { require.Empty(t, s.ExternalID) },
		},
		{
			Name:    "undeleting a thread that is not deleted is rejected",
			Steps:   []Step{Rejected(fold.CodeInvalid, events.Undeleted{})},
			History: []string{},
		},
	}
}

// refusalCases are events the fold refuses whatever the thread holds:
// erasure markers, versions, types, envelopes, invalid payloads.
func refusalCases() []Case {
	return []Case{
		{
			// A real erasure purges the subject first, so its marker is the
			// first message (TestErasureMarkerOnAPurgedSubject); one after
			// stored events was published by hand and hides nothing.
			Name: "an erasure marker after events that are still stored is rejected",
			Steps: []Step{OK(User("secret")), Rejected(fold.CodeErasureNotFirst, events.Erased{RemovedEvents: 2, LastSeq: 2, Reason: "forged"}),
				OK(User("more"))},
			History: []string{"user:secret", "user:more"},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.False(t, s.Erased)
			},
		},
		{
			Name:    "an event of a newer schema version is rejected",
			Steps:   []Step{{P: User("from the future"), Env: func(e *events.Event) { e.SchemaVersion = events.SchemaVersion + 1 }, Want: fold.CodeNewerSchema}},
			History: []string{},
		},
		{
			Name:    "an event of an unknown type is rejected",
			Steps:   []Step{{P: events.Reset{}, Env: func(e *events.Event) { e.Type = "thread.teleported" }, Want: fold.CodeUnknownType}, OK(User("still here"))},
			History: []string{"user:still here"},
		},
		{
			Name:    "undecodable bytes published straight to the thread subject are rejected",
			Steps:   []Step{{Raw: []byte("this is not msgpack"), Want: fold.CodeUndecodable}, {Raw: []byte{}, Want: fold.CodeUndecodable}, OK(User("fine"))},
			History: []string{"user:fine"},
		},
		{
			Name:    "an event whose envelope names another tenant is rejected",
			Steps:   []Step{{P: User("sneaky"), Env: func(e *events.Event) { e.Tenant = "other" }, Want: fold.CodeWrongThread}},
			History: []string{},
		},
		{
			Name:    "an event whose envelope names another thread is rejected",
			Steps:   []Step{{P: User("lost"), Env: func(e *events.Event) { e.Thread = "elsewhere" }, Want: fold.CodeWrongThread}},
			History: []string{},
		},
		{
			Name:     "events before thread.created are rejected",
			NoCreate: true,
			Steps:    []Step{Rejected(fold.CodeNoThread, User("too early")), OK(events.ThreadCreated{}), OK(User("now"))},
			History:  []string{"user:now"},
		},
		{
			Name:    "a second thread.created is rejected",
			Steps:   []Step{Rejected(fold.CodeAlreadyExists, events.ThreadCreated{Title: "again"})},
			History: []string{},
		},
		{
			Name: "an invalid event is rejected with the field that is wrong",
			Steps: []Step{Rejected(fold.CodeInvalid, events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "a", Name: "f", Arguments: "{broken"}}}),
				OK(User("ok"))},
			History: []string{"user:ok"},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Contains(t, s.Rejections[0].Reason, "arguments")
			},
		},
	}
}

// updateCases are thread.updated and the attribution of assistant turns.
func updateCases() []Case {
	sp := "You are terse."
	title := "renamed"
	return []Case{
		{
			Name:    "thread.updated changes the title, system prompt and metadata",
			Created: &events.ThreadCreated{Title: "t", Metadata: map[string]string{"keep": "1", "drop": "2"}},
			Steps:   []Step{OK(events.ThreadUpdated{Title: &title, SystemPrompt: &sp, Metadata: map[string]string{"drop": "", "new": "3"}})},
			History: []string{},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, "renamed", s.Title)
				require.Equal(t, sp, *s.SystemPrompt)
				require.Equal(t, map[string]string{"keep": "1", "new": "3"}, s.Metadata)
			},
		},
		{
			Name: "assistant turns are attributed to the agent that produced them",
			Steps: []Step{OK(User("plan")), OK(events.AssistantMessage{Content: events.Text("p"), Agent: "planner"}),
				OK(User("do")), OK(events.AssistantMessage{Content: events.Text("d"), Agent: "worker"}),
				OK(User("more")), OK(events.AssistantMessage{Content: events.Text("d2"), Agent: "worker"})},
			History: []string{"user:plan", "assistant:p", "user:do", "assistant:d", "user:more", "assistant:d2"},
			Check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, map[string]int{"planner": 1, "worker": 2}, s.AgentTurns)
				require.Equal(t, "worker", s.Messages[5].Agent)
			},
		},
	}
}

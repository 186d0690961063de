package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/projector"
)

// step is one append of a fold case.
type step struct {
	// p is the payload; dyn builds it from the sequences of the steps
	// before it (for compactions); raw is published as is.
	p   events.Payload
	dyn func(seqs []uint64) events.Payload
	raw []byte
	// env changes the envelope before it is encoded.
	env func(*events.Event)
	// want is the verdict: "" applied, else the rejection code.
	want fold.Code
}

type foldCase struct {
	name string
	// created is the first event; nil means a plain thread.created, unless
	// noCreate.
	created  *events.ThreadCreated
	noCreate bool
	steps    []step
	// history is the projected history, one line per message (see line).
	history []string
	check   func(t *testing.T, s *fold.State, seqs []uint64)
}

func ok(p events.Payload) step                    { return step{p: p} }
func rejected(c fold.Code, p events.Payload) step { return step{p: p, want: c} }

func user(text string) events.UserMessage { return events.UserMessage{Content: events.Text(text)} }
func say(text string) events.AssistantMessage {
	return events.AssistantMessage{Content: events.Text(text)}
}
func calls(ids ...string) events.AssistantMessage {
	a := events.AssistantMessage{}
	for _, id := range ids {
		a.ToolCalls = append(a.ToolCalls, events.ToolCall{ID: id, Name: "lookup", Arguments: `{"q":"` + id + `"}`})
	}
	return a
}
func result(id, text string) events.ToolResult {
	return events.ToolResult{ToolCallID: id, Name: "lookup", Content: events.Text(text)}
}
func msg(role events.Role, text string) events.Message {
	return events.Message{Role: role, Content: events.Text(text)}
}
func callMsg(ids ...string) events.Message {
	a := calls(ids...)
	return events.Message{Role: events.RoleAssistant, ToolCalls: a.ToolCalls}
}
func toolMsg(id, text string) events.Message {
	return events.Message{Role: events.RoleTool, ToolCallID: id, Content: events.Text(text)}
}

// compactAfter is a compaction up to the sequence of step i (0 is the
// thread.created event).
func compactAfter(i int, summary string) func([]uint64) events.Payload {
	return func(seqs []uint64) events.Payload {
		return events.Compaction{UpToSeq: seqs[i], Summary: events.Text(summary)}
	}
}

// line renders a message as "role:content", "assistant->id,id" for calls
// and "tool[id]:content"; a leading "*" marks synthetic messages.
func line(m events.Message) string {
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

func lines(ms []events.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = line(m)
	}
	return out
}

func pendingIDs(s *fold.State) []string {
	var ids []string
	for _, p := range s.Pending {
		ids = append(ids, p.ID)
	}
	return ids
}

func foldCases() []foldCase {
	cancel := &events.ThreadCreated{PendingPolicy: events.PendingCancel}
	sp := "You are terse."
	title := "renamed"
	seven := []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7"}
	var sevenResults []step
	for _, i := range []int{3, 0, 6, 1, 5, 2, 4} {
		sevenResults = append(sevenResults, ok(result(seven[i], "r"+seven[i])))
	}
	return []foldCase{
		{
			name:    "a user message and its answer are appended in order",
			steps:   []step{ok(user("hi")), ok(say("hello"))},
			history: []string{"user:hi", "assistant:hello"},
			check: func(t *testing.T, s *fold.State, seqs []uint64) {
				require.Equal(t, seqs[2], s.Version)
				require.NotNil(t, s.LastUser)
				require.Equal(t, seqs[1], s.LastUser.Seq)
				require.True(t, s.LastUserAnswered)
			},
		},
		{
			name:    "a tool call is pending until its result answers it",
			steps:   []step{ok(user("q")), ok(calls("a"))},
			history: []string{"user:q", "assistant->a"},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, []string{"a"}, pendingIDs(s))
			},
		},
		{
			name:    "a result answers its pending call and clears it",
			steps:   []step{ok(user("q")), ok(calls("a")), ok(result("a", "42")), ok(say("it is 42"))},
			history: []string{"user:q", "assistant->a", "tool[a]:42", "assistant:it is 42"},
		},
		{
			name: "the taubench pattern reuses a call id once the first call was answered",
			steps: []step{ok(user("book")), ok(calls("call_1")), ok(result("call_1", "found")),
				ok(calls("call_1")), ok(result("call_1", "booked")), ok(say("done"))},
			history: []string{"user:book", "assistant->call_1", "tool[call_1]:found", "assistant->call_1", "tool[call_1]:booked", "assistant:done"},
		},
		{
			name:    "seven parallel calls are all matched when their results come in another order",
			steps:   append([]step{ok(user("go")), ok(calls(seven...))}, append(sevenResults, ok(say("all done")))...),
			history: []string{"user:go", "assistant->c1,c2,c3,c4,c5,c6,c7", "tool[c4]:rc4", "tool[c1]:rc1", "tool[c7]:rc7", "tool[c2]:rc2", "tool[c6]:rc6", "tool[c3]:rc3", "tool[c5]:rc5", "assistant:all done"},
		},
		{
			name:    "a result before its call is rejected",
			steps:   []step{ok(user("q")), rejected(fold.CodeNotPending, result("a", "early")), ok(calls("a")), ok(result("a", "late"))},
			history: []string{"user:q", "assistant->a", "tool[a]:late"},
		},
		{
			name:    "a second answer to the same call is rejected",
			steps:   []step{ok(user("q")), ok(calls("a")), ok(result("a", "one")), rejected(fold.CodeNotPending, result("a", "two"))},
			history: []string{"user:q", "assistant->a", "tool[a]:one"},
		},
		{
			name:    "a result for a call that was never made is rejected",
			steps:   []step{ok(user("q")), ok(calls("a")), rejected(fold.CodeNotPending, result("b", "?")), ok(result("a", "!"))},
			history: []string{"user:q", "assistant->a", "tool[a]:!"},
		},
		{
			name:    "a user message while calls are pending is rejected under the reject policy",
			steps:   []step{ok(user("q")), ok(calls("a")), rejected(fold.CodePendingCalls, user("hello?"))},
			history: []string{"user:q", "assistant->a"},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, []string{"a"}, pendingIDs(s))
			},
		},
		{
			name:    "an assistant message while calls are pending is rejected under the reject policy",
			steps:   []step{ok(user("q")), ok(calls("a")), rejected(fold.CodePendingCalls, say("never mind"))},
			history: []string{"user:q", "assistant->a"},
		},
		{
			name:    "a user message while calls are pending closes them as cancelled under the cancel policy",
			created: cancel,
			steps:   []step{ok(user("q")), ok(calls("a", "b")), ok(result("b", "B")), ok(user("stop"))},
			history: []string{"user:q", "assistant->a,b", "tool[b]:B", "*tool[a]:" + events.CancelledContent, "user:stop"},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Empty(t, s.Pending)
				require.True(t, s.Messages[3].IsError)
			},
		},
		{
			name:    "a late result for a cancelled call is rejected",
			created: cancel,
			steps:   []step{ok(user("q")), ok(calls("a")), ok(say("moving on")), rejected(fold.CodeNotPending, result("a", "late"))},
			history: []string{"user:q", "assistant->a", "*tool[a]:" + events.CancelledContent, "assistant:moving on"},
		},
		{
			name:    "a reset clears the history and later messages start a new one",
			steps:   []step{ok(user("one")), ok(say("1")), ok(events.Reset{Reason: "new topic"}), ok(user("two"))},
			history: []string{"user:two"},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.EqualValues(t, 1, s.Generation)
			},
		},
		{
			name:    "a reset drops pending tool calls",
			steps:   []step{ok(user("q")), ok(calls("a")), ok(events.Reset{}), rejected(fold.CodeNotPending, result("a", "late")), ok(user("again"))},
			history: []string{"user:again"},
		},
		{
			name: "a valid restore replaces the history",
			steps: []step{ok(user("old")), ok(say("old answer")),
				ok(events.Restore{Messages: []events.Message{msg(events.RoleUser, "new"), callMsg("x"), toolMsg("x", "X"), msg(events.RoleAssistant, "new answer")}}),
				ok(user("next"))},
			history: []string{"user:new", "assistant->x", "tool[x]:X", "assistant:new answer", "user:next"},
		},
		{
			name: "a restore that ends with a call leaves that call pending",
			steps: []step{ok(events.Restore{Messages: []events.Message{msg(events.RoleUser, "u"), callMsg("p")}}),
				ok(result("p", "P"))},
			history: []string{"user:u", "assistant->p", "tool[p]:P"},
		},
		{
			name: "a restore with a result that answers no call is rejected",
			steps: []step{ok(user("keep")),
				rejected(fold.CodeInvalidHistory, events.Restore{Messages: []events.Message{msg(events.RoleUser, "u"), toolMsg("nope", "?")}})},
			history: []string{"user:keep"},
		},
		{
			name: "a restore with a user message between a call and its result is rejected",
			steps: []step{ok(user("keep")),
				rejected(fold.CodeInvalidHistory, events.Restore{Messages: []events.Message{callMsg("x"), msg(events.RoleUser, "u"), toolMsg("x", "X")}})},
			history: []string{"user:keep"},
		},
		{
			name: "a compaction replaces the messages up to a sequence by its summary",
			steps: []step{ok(user("a")), ok(say("b")), ok(user("c")), ok(say("d")),
				{dyn: compactAfter(2, "a and b happened")}, ok(user("e"))},
			history: []string{"*user:a and b happened", "user:c", "assistant:d", "user:e"},
			check: func(t *testing.T, s *fold.State, seqs []uint64) {
				require.Equal(t, seqs[2], s.Messages[0].Seq, "the summary carries the last sequence it replaces")
			},
		},
		{
			name: "a compaction that would separate a call from its result is rejected",
			steps: []step{ok(user("q")), ok(calls("a")), ok(result("a", "A")), ok(say("ok")),
				{dyn: compactAfter(2, "cut inside a turn"), want: fold.CodeInvalidHistory}},
			history: []string{"user:q", "assistant->a", "tool[a]:A", "assistant:ok"},
		},
		{
			name: "a compaction that would cut a pending call is rejected",
			steps: []step{ok(user("q")), ok(calls("a")),
				{dyn: compactAfter(2, "cut the call"), want: fold.CodeInvalidHistory}},
			history: []string{"user:q", "assistant->a"},
		},
		{
			name: "a compaction up to its own sequence or later is rejected",
			steps: []step{ok(user("q")),
				rejected(fold.CodeInvalidHistory, events.Compaction{UpToSeq: 1 << 40, Summary: events.Text("future")})},
			history: []string{"user:q"},
		},
		{
			name: "a second compaction cuts by sequence, including the first summary",
			steps: []step{ok(user("a")), ok(say("b")), ok(user("c")), ok(say("d")),
				{dyn: compactAfter(2, "S1")}, ok(user("e")),
				{dyn: compactAfter(4, "S2")}},
			history: []string{"*user:S2", "user:e"},
		},
		{
			name:     "a fork starts a thread with the source's history and state",
			noCreate: true,
			steps: []step{ok(events.Forked{SourceTenant: "src", SourceThread: "orig", SourceSeq: 77,
				Created:  events.ThreadCreated{Title: "fork", Agent: "helper"},
				Messages: []events.Message{msg(events.RoleUser, "u"), callMsg("f"), toolMsg("f", "F"), msg(events.RoleAssistant, "a")},
				State:    map[string]json.RawMessage{"plan": json.RawMessage(`["x"]`)}}),
				ok(user("continue"))},
			history: []string{"user:u", "assistant->f", "tool[f]:F", "assistant:a", "user:continue"},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, &fold.ForkRef{Tenant: "src", Thread: "orig", Seq: 77}, s.ForkedFrom)
				require.JSONEq(t, `["x"]`, string(s.KV["plan"]))
				require.Equal(t, "fork", s.Title)
			},
		},
		{
			name:    "a fork onto a thread that exists is rejected",
			steps:   []step{rejected(fold.CodeAlreadyExists, events.Forked{SourceTenant: "src", SourceThread: "orig", SourceSeq: 1, Messages: []events.Message{}})},
			history: []string{},
		},
		{
			name:     "a fork with an invalid history is rejected and the thread does not exist",
			noCreate: true,
			steps: []step{rejected(fold.CodeInvalidHistory, events.Forked{SourceTenant: "src", SourceThread: "orig", SourceSeq: 1,
				Messages: []events.Message{toolMsg("x", "orphan")}}),
				rejected(fold.CodeNoThread, user("anyone?"))},
			history: []string{},
			check:   func(t *testing.T, s *fold.State, _ []uint64) { require.False(t, s.Exists) },
		},
		{
			name: "state set and delete change the key-value state",
			steps: []step{ok(events.StateSet{Key: "a", Value: json.RawMessage(`1`)}), ok(events.StateSet{Key: "b", Value: json.RawMessage(`{"x":true}`)}),
				ok(events.StateSet{Key: "a", Value: json.RawMessage(`2`)}), ok(events.StateDeleted{Key: "b"})},
			history: []string{},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Len(t, s.KV, 1)
				require.JSONEq(t, `2`, string(s.KV["a"]))
			},
		},
		{
			name:    "a state set beyond the size limit is rejected",
			steps:   []step{rejected(fold.CodeTooLarge, events.StateSet{Key: "big", Value: json.RawMessage(`"` + strings.Repeat("x", fold.MaxStateBytes) + `"`)})},
			history: []string{},
			check:   func(t *testing.T, s *fold.State, _ []uint64) { require.Empty(t, s.KV) },
		},
		{
			name: "a soft-deleted thread rejects appends until it is undeleted",
			steps: []step{ok(user("a")), ok(events.Deleted{Reason: "spam?"}), rejected(fold.CodeDeleted, user("b")),
				ok(events.Undeleted{}), ok(user("c"))},
			history: []string{"user:a", "user:c"},
			check:   func(t *testing.T, s *fold.State, _ []uint64) { require.False(t, s.Deleted) },
		},
		{
			// LangGraph's deleteThread, then the id used again: nothing of
			// the old lifetime is in the new one's state.
			name: "a create on a soft-deleted thread starts a new lifetime",
			steps: []step{ok(user("old")), ok(calls("c1")), ok(events.StateSet{Key: "k", Value: json.RawMessage(`1`)}),
				rejected(fold.CodeAlreadyExists, events.ThreadCreated{Title: "too early"}),
				ok(events.Deleted{}), ok(events.ThreadCreated{Title: "again"}), ok(user("new")),
				rejected(fold.CodeInvalid, events.Undeleted{})},
			history: []string{"user:new"},
			check: func(t *testing.T, s *fold.State, seqs []uint64) {
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
			name:     "an external id must map to the thread's id",
			noCreate: true,
			steps: []step{rejected(fold.CodeInvalid, events.ThreadCreated{ExternalID: "some/other thread"}),
				ok(events.ThreadCreated{})},
			history: []string{},
			check:   func(t *testing.T, s *fold.State, _ []uint64) { require.Empty(t, s.ExternalID) },
		},
		{
			name:    "undeleting a thread that is not deleted is rejected",
			steps:   []step{rejected(fold.CodeInvalid, events.Undeleted{})},
			history: []string{},
		},
		{
			// A real erasure purges the subject first, so its marker is the
			// first message (TestErasureMarkerOnAPurgedSubject); one after
			// stored events was published by hand and hides nothing.
			name: "an erasure marker after events that are still stored is rejected",
			steps: []step{ok(user("secret")), rejected(fold.CodeErasureNotFirst, events.Erased{RemovedEvents: 2, LastSeq: 2, Reason: "forged"}),
				ok(user("more"))},
			history: []string{"user:secret", "user:more"},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.False(t, s.Erased)
			},
		},
		{
			name:    "an event of a newer schema version is rejected",
			steps:   []step{{p: user("from the future"), env: func(e *events.Event) { e.SchemaVersion = events.SchemaVersion + 1 }, want: fold.CodeNewerSchema}},
			history: []string{},
		},
		{
			name:    "an event of an unknown type is rejected",
			steps:   []step{{p: events.Reset{}, env: func(e *events.Event) { e.Type = "thread.teleported" }, want: fold.CodeUnknownType}, ok(user("still here"))},
			history: []string{"user:still here"},
		},
		{
			name:    "undecodable bytes published straight to the thread subject are rejected",
			steps:   []step{{raw: []byte("this is not msgpack"), want: fold.CodeUndecodable}, {raw: []byte{}, want: fold.CodeUndecodable}, ok(user("fine"))},
			history: []string{"user:fine"},
		},
		{
			name:    "an event whose envelope names another tenant is rejected",
			steps:   []step{{p: user("sneaky"), env: func(e *events.Event) { e.Tenant = "other" }, want: fold.CodeWrongThread}},
			history: []string{},
		},
		{
			name:    "an event whose envelope names another thread is rejected",
			steps:   []step{{p: user("lost"), env: func(e *events.Event) { e.Thread = "elsewhere" }, want: fold.CodeWrongThread}},
			history: []string{},
		},
		{
			name:     "events before thread.created are rejected",
			noCreate: true,
			steps:    []step{rejected(fold.CodeNoThread, user("too early")), ok(events.ThreadCreated{}), ok(user("now"))},
			history:  []string{"user:now"},
		},
		{
			name:    "a second thread.created is rejected",
			steps:   []step{rejected(fold.CodeAlreadyExists, events.ThreadCreated{Title: "again"})},
			history: []string{},
		},
		{
			name: "an invalid event is rejected with the field that is wrong",
			steps: []step{rejected(fold.CodeInvalid, events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "a", Name: "f", Arguments: "{broken"}}}),
				ok(user("ok"))},
			history: []string{"user:ok"},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Contains(t, s.Rejections[0].Reason, "arguments")
			},
		},
		{
			name:    "thread.updated changes the title, system prompt and metadata",
			created: &events.ThreadCreated{Title: "t", Metadata: map[string]string{"keep": "1", "drop": "2"}},
			steps:   []step{ok(events.ThreadUpdated{Title: &title, SystemPrompt: &sp, Metadata: map[string]string{"drop": "", "new": "3"}})},
			history: []string{},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, "renamed", s.Title)
				require.Equal(t, sp, *s.SystemPrompt)
				require.Equal(t, map[string]string{"keep": "1", "new": "3"}, s.Metadata)
			},
		},
		{
			name: "assistant turns are attributed to the agent that produced them",
			steps: []step{ok(user("plan")), ok(events.AssistantMessage{Content: events.Text("p"), Agent: "planner"}),
				ok(user("do")), ok(events.AssistantMessage{Content: events.Text("d"), Agent: "worker"}),
				ok(user("more")), ok(events.AssistantMessage{Content: events.Text("d2"), Agent: "worker"})},
			history: []string{"user:plan", "assistant:p", "user:do", "assistant:d", "user:more", "assistant:d2"},
			check: func(t *testing.T, s *fold.State, _ []uint64) {
				require.Equal(t, map[string]int{"planner": 1, "worker": 2}, s.AgentTurns)
				require.Equal(t, "worker", s.Messages[5].Agent)
			},
		},
	}
}

// TestFold runs every case twice: through the runner on a real server
// (each case its own thread, every event published to the thread subject,
// undecodable bytes included; odd cases with optimistic concurrency, even
// ones without) and through the pure fold in memory; both must give the
// same state, the per-event verdicts and the history listed.
func TestFold(t *testing.T) {
	cases := foldCases()
	require.GreaterOrEqual(t, len(cases), 30)
	e := newEnv(t)
	e.start(t, projector.Config{})
	c := &clock{t: time.Unix(1700000000, 0)}

	type published struct {
		seqs  []uint64
		mem   *fold.State
		codes []fold.Code
	}
	pubs := make([]published, len(cases))
	for i, tc := range cases {
		thread := fmt.Sprintf("case-%02d", i)
		subject := "conv.fold." + thread
		steps := tc.steps
		if !tc.noCreate {
			created := events.ThreadCreated{}
			if tc.created != nil {
				created = *tc.created
			}
			steps = append([]step{ok(created)}, steps...)
		}
		mem := fold.NewState("fold", thread)
		var seqs []uint64
		for _, st := range steps {
			data := st.raw
			if data == nil {
				p := st.p
				if st.dyn != nil {
					p = st.dyn(seqs)
				}
				ev := c.ev("fold", thread, p)
				if st.env != nil {
					st.env(&ev)
				}
				var err error
				data, err = events.Marshal(ev)
				require.NoError(t, err)
			}
			var opts []jetstream.PublishOpt
			if i%2 == 1 {
				// Odd cases append as client/ does, with the expected
				// version, so the runner folds their triggers directly.
				prev := uint64(0)
				if len(seqs) > 0 {
					prev = seqs[len(seqs)-1]
				}
				opts = append(opts, jetstream.WithExpectLastSequencePerSubject(prev))
			}
			seq := e.publishRaw(t, subject, data, nil, opts...)
			seqs = append(seqs, seq)
			err := fold.ApplyBytes(mem, seq, c.t, data)
			var rej *fold.RejectionError
			code := fold.Code("")
			if errors.As(err, &rej) {
				code = rej.Code
			} else {
				require.NoError(t, err, "%s: step %d", tc.name, len(seqs)-1)
			}
			pubs[i].codes = append(pubs[i].codes, code)
			if tc.noCreate || len(seqs) > 1 {
				k := len(seqs) - 1
				if !tc.noCreate {
					k--
				}
				require.Equal(t, tc.steps[k].want, code, "%s: step %d", tc.name, k)
			}
		}
		pubs[i].seqs, pubs[i].mem = seqs, mem
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			thread := fmt.Sprintf("case-%02d", i)
			p := pubs[i]
			e.waitVersion(t, "fold", thread, p.seqs[len(p.seqs)-1])
			snap, err := e.snaps.Load(context.Background(), "fold", thread)
			require.NoError(t, err)
			got := snap.State
			requireSameState(t, p.mem, got)
			// The snapshot records exactly the rejections the fold gave.
			byseq := map[uint64]fold.Code{}
			for _, r := range got.Rejections {
				byseq[r.Seq] = r.Code
			}
			for k, seq := range p.seqs {
				assert.Equal(t, p.codes[k], byseq[seq], "event %d (seq %d)", k, seq)
			}
			require.Equal(t, tc.history, append([]string{}, lines(got.Messages)...))
			if tc.check != nil {
				tc.check(t, got, p.seqs)
			}
		})
	}
}

// The erasure marker of a real erase: over the events folded before it
// (which the purge removed) it applies through ApplyErasure, empties the
// thread, and everything after it is rejected; on a fresh state (the log
// folded from its start, where the marker is the first message) Apply
// takes it too.
func TestErasureMarkerOnAPurgedSubject(t *testing.T) {
	at := time.Unix(1700000000, 0)
	ev := func(seq uint64, p events.Payload) events.Stored {
		e := events.New("acme", "t", "test", p)
		e.Time = at
		return events.Stored{Event: e, Seq: seq, StoredAt: at}
	}
	marker := ev(4, events.Erased{RemovedEvents: 3, LastSeq: 3, Reason: "GDPR"})

	s := fold.NewState("acme", "t")
	require.NoError(t, fold.Apply(s, ev(1, events.ThreadCreated{})))
	require.NoError(t, fold.Apply(s, ev(2, events.UserMessage{Content: events.Text("secret")})))
	require.NoError(t, fold.Apply(s, ev(3, events.StateSet{Key: "k", Value: []byte(`1`)})))
	require.NoError(t, fold.ApplyErasure(s, marker))
	require.True(t, s.Erased)
	require.Empty(t, s.KV)
	require.Empty(t, s.Messages)
	require.Equal(t, uint64(4), s.Version)
	require.ErrorIs(t, fold.Apply(s, ev(5, events.UserMessage{Content: events.Text("more")})), fold.ErrRejected)
	require.Equal(t, fold.CodeErased, s.Rejections[len(s.Rejections)-1].Code)

	fresh := fold.NewState("acme", "t")
	require.NoError(t, fold.Apply(fresh, marker))
	require.True(t, fresh.Erased)
}

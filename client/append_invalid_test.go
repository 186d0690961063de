package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/fold"
	"github.com/convlog/convlog/internal/provision"
)

// TestInvalidAppendIsRefusedWithATypedErrorAndLeavesTheThreadUnchanged:
// every append the projector would reject, or that cannot be stored, fails
// synchronously with a typed error before anything is published
// (docs/design.md invariants 3, 5, 6).
func TestInvalidAppendIsRefusedWithATypedErrorAndLeavesTheThreadUnchanged(t *testing.T) {
	env := newAppendEnv(t, provision.Config{})
	ctx := context.Background()
	tenant := events.DefaultTenant

	// A thread at a known point: one answered call, one call pending.
	thread, v := env.createThread(t, client.CreateOptions{})
	res, err := env.c.Append(ctx, tenant, thread, toolTurn("call_done"), client.ExpectVersion(v))
	require.NoError(t, err)
	res, err = env.c.Append(ctx, tenant, thread, []events.Event{callsEvent("call_open")}, client.ExpectVersion(res.Version))
	require.NoError(t, err)
	version := res.Version

	// A soft-deleted thread.
	deleted, dv := env.createThread(t, client.CreateOptions{})
	del, err := env.c.Append(ctx, tenant, deleted, []events.Event{{Payload: events.Deleted{Reason: "test"}}}, client.ExpectVersion(dv))
	require.NoError(t, err)

	// A subject with an event but no thread.created (written by another tool).
	orphan := events.NewID()
	env.publishAsClient(t, completeEvents(tenant, orphan, []events.Event{{Payload: events.ThreadUpdated{Metadata: map[string]string{"k": "v"}}}}), 0)

	rejected := func(code fold.Code) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var rej *fold.RejectionError
			require.ErrorAs(t, err, &rej)
			require.ErrorIs(t, err, fold.ErrRejected)
			require.Equal(t, code, rej.Code, "rejection code; error: %v", err)
		}
	}
	invalid := func(field string) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var ve *events.ValidationError
			require.ErrorAs(t, err, &ve)
			require.ErrorIs(t, err, events.ErrInvalid)
			require.Contains(t, ve.Field, field, "error: %v", err)
		}
	}
	badID := func(kind string) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var ie *events.IDError
			require.ErrorAs(t, err, &ie)
			require.ErrorIs(t, err, events.ErrInvalidID)
			require.Equal(t, kind, ie.Kind)
		}
	}
	big := strings.Repeat("x", int(env.nc.MaxPayload()))

	cases := []struct {
		name   string
		thread string
		tenant string
		evs    []events.Event
		opts   []client.AppendOption
		check  func(*testing.T, error)
	}{
		{name: "a result for a call id never made is rejected as not pending",
			evs: []events.Event{resultEvent("call_unknown")}, check: rejected(fold.CodeNotPending)},
		{name: "a second answer to an answered call is rejected as not pending",
			evs: []events.Event{resultEvent("call_done")}, check: rejected(fold.CodeNotPending)},
		{name: "a turn answering its own call twice is rejected whole",
			evs:   []events.Event{resultEvent("call_open"), callsEvent("call_x"), resultEvent("call_x"), resultEvent("call_x")},
			check: rejected(fold.CodeNotPending)},
		{name: "a user message while a call is pending is rejected by the reject policy",
			evs: []events.Event{userEvent("hello?")}, check: rejected(fold.CodePendingCalls)},
		{name: "a second thread.created is rejected as already existing",
			evs: []events.Event{{Payload: events.ThreadCreated{Agent: "again"}}}, check: rejected(fold.CodeAlreadyExists)},
		{name: "an event for a soft-deleted thread is rejected as deleted",
			thread: deleted, opts: []client.AppendOption{client.ExpectVersion(del.Version)},
			evs: []events.Event{userEvent("anyone?")}, check: rejected(fold.CodeDeleted)},
		{name: "an event before thread.created is rejected as no thread",
			thread: orphan, opts: []client.AppendOption{client.AnyVersion()},
			evs: []events.Event{userEvent("hi")}, check: rejected(fold.CodeNoThread)},
		{name: "a thread id with a dot is a bad id",
			thread: "a.b", evs: []events.Event{userEvent("hi")}, check: badID("thread id")},
		{name: "a tenant with a wildcard is a bad id",
			tenant: "acme*", evs: []events.Event{userEvent("hi")}, check: badID("tenant")},
		{name: "an event whose tenant differs from the append's is invalid",
			evs:   []events.Event{{Tenant: "other", Payload: events.UserMessage{Content: events.Text("hi")}}},
			check: invalid("tenant/thread")},
		{name: "an event larger than the server's max payload is too large",
			evs: []events.Event{resultEvent("call_open")}, check: func(t *testing.T, err error) {
				var tl *client.TooLargeError
				require.ErrorAs(t, err, &tl)
				require.ErrorIs(t, err, client.ErrTooLarge)
				require.Greater(t, tl.Size, tl.Limit)
				require.LessOrEqual(t, tl.Limit, int(env.nc.MaxPayload()))
				require.Contains(t, err.Error(), "limit")
			}},
		{name: "an event with neither type nor payload is invalid",
			evs: []events.Event{{}}, check: invalid("type")},
		{name: "an event with a type but no payload is invalid",
			evs: []events.Event{{Type: events.TypeUserMessage}}, check: invalid("payload")},
		{name: "an event whose type does not match its payload is invalid",
			evs: []events.Event{{Type: events.TypeToolResult, Payload: events.UserMessage{Content: events.Text("hi")}}}, check: invalid("type")},
		{name: "tool call arguments that are not JSON are invalid",
			evs:   []events.Event{resultEvent("call_open"), {Payload: events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "c", Name: "f", Arguments: "{oops"}}}}},
			check: invalid("payload.tool_calls[0].arguments")},
		{name: "one message calling the same id twice is invalid",
			evs: []events.Event{resultEvent("call_open"), callsEvent("dup", "dup")}, check: invalid("payload.tool_calls[1].id")},
		{name: "an event id that is not a UUID is invalid",
			evs: []events.Event{{ID: "not-a-uuid", Payload: events.ToolResult{ToolCallID: "call_open", Content: events.Text("x")}}}, check: invalid("id")},
		{name: "two events of one append with the same id are invalid",
			evs: func() []events.Event {
				id := events.NewID()
				return []events.Event{{ID: id, Payload: events.ToolResult{ToolCallID: "call_open", Content: events.Text("x")}}, {ID: id, Payload: events.UserMessage{Content: events.Text("y")}}}
			}(), check: invalid("id")},
		{name: "more events than one atomic batch holds is an invalid append",
			evs: make([]events.Event, client.MaxTurnEvents+1), check: func(t *testing.T, err error) {
				require.ErrorIs(t, err, client.ErrInvalidAppend)
			}},
		{name: "an append of no events is an invalid append",
			evs: nil, check: func(t *testing.T, err error) { require.ErrorIs(t, err, client.ErrInvalidAppend) }},
		{name: "an append without a version option is an invalid append",
			opts: []client.AppendOption{}, evs: []events.Event{resultEvent("call_open")},
			check: func(t *testing.T, err error) { require.ErrorIs(t, err, client.ErrInvalidAppend) }},
		{name: "a stale expected version is a conflict naming both versions",
			opts: []client.AppendOption{client.ExpectVersion(version - 1)}, evs: []events.Event{resultEvent("call_open")},
			check: func(t *testing.T, err error) {
				var ce *client.ConflictError
				require.ErrorAs(t, err, &ce)
				require.ErrorIs(t, err, client.ErrConflict)
				require.Equal(t, version-1, ce.Expected)
				require.Equal(t, version, ce.Actual)
			}},
		{name: "a version the thread never had is a conflict naming the real one",
			opts: []client.AppendOption{client.ExpectVersion(version + 1000)}, evs: []events.Event{resultEvent("call_open")},
			check: func(t *testing.T, err error) {
				var ce *client.ConflictError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, version+1000, ce.Expected)
				require.Equal(t, version, ce.Actual)
			}},
		{name: "expecting an empty thread when it exists is a conflict",
			opts: []client.AppendOption{client.ExpectVersion(0)}, evs: []events.Event{{Payload: events.ThreadCreated{}}},
			check: func(t *testing.T, err error) { require.ErrorIs(t, err, client.ErrConflict) }},
	}
	// The oversized case needs its payload set here (the table would copy big into every name).
	for i := range cases {
		if strings.HasPrefix(cases[i].name, "an event larger") {
			cases[i].evs = []events.Event{{Payload: events.ToolResult{ToolCallID: "call_open", Content: events.Text(big)}}}
		}
	}
	require.GreaterOrEqual(t, len(cases), 15)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn, th := tenant, thread
			if tc.tenant != "" {
				tn = tc.tenant
			}
			if tc.thread != "" {
				th = tc.thread
			}
			opts := tc.opts
			if opts == nil {
				opts = []client.AppendOption{client.ExpectVersion(version)}
			}
			var before []storedMsg
			if events.ValidateTenant(tn) == nil && events.ValidateThreadID(th) == nil {
				before = env.stored(t, tn, th)
			}

			_, err := env.c.Append(ctx, tn, th, tc.evs, opts...)

			require.Error(t, err)
			tc.check(t, err)
			if before != nil {
				require.Equal(t, before, env.stored(t, tn, th), "the thread is unchanged")
			}
			require.False(t, errors.Is(err, client.ErrClosed))
		})
	}

	// Nothing was published on the main thread: same version, same messages,
	// and it still accepts the valid answer at the version it had.
	th, err := env.c.Get(ctx, tenant, thread, client.Consistent())
	require.NoError(t, err)
	require.Equal(t, version, th.Version)
	require.Equal(t, 3, th.MessageCount())
	require.Zero(t, th.RejectedCount)
	ok, err := env.c.Append(ctx, tenant, thread, []events.Event{resultEvent("call_open")}, client.ExpectVersion(version))
	require.NoError(t, err)
	require.Greater(t, ok.Version, version)
	require.Len(t, env.stored(t, tenant, thread), 5)
}

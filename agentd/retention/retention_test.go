package retention_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/retention"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/projector"
)

// A policy of "idle > 1 s" erases exactly the idle threads of its tenant,
// once, across an enforcer stopped in the middle of a scan and a new one;
// a dry run before changes nothing; a thread written to since, a thread
// whose metadata says "off", and another tenant's idle thread stay.
func TestIdleThreadsAreErasedOnceAcrossARestart(t *testing.T) {
	ns, c := withProjector(t)
	ctx := context.Background()

	create := func(tenant, id string, md map[string]string) {
		_, _, _, err := c.CreateThread(ctx, client.CreateOptions{Tenant: tenant, ThreadID: id, ThreadCreated: events.ThreadCreated{Metadata: md}})
		require.NoError(t, err)
		_, err = c.Append(ctx, tenant, id, []events.Event{{Payload: events.UserMessage{Content: events.Text("secret PII of " + id)}}}, client.AnyVersion())
		require.NoError(t, err)
	}
	idle := []string{"idle-a", "idle-b", "idle-c", "idle-d"}
	for _, id := range idle {
		create("acme", id, nil)
	}
	create("acme", "kept-by-override", map[string]string{retention.MetadataKey: "off"})
	create("acme", "revived", nil)
	create("globex", "idle-other-tenant", nil)
	// The policy measures time passing: let the threads above become
	// idle for more than the policy's second.
	time.Sleep(1200 * time.Millisecond)
	create("acme", "fresh", nil)
	_, err := c.Append(ctx, "acme", "revived", []events.Event{{Payload: events.UserMessage{Content: events.Text("still here")}}}, client.AnyVersion())
	require.NoError(t, err)
	// The index must have the threads (List reads it).
	require.Eventually(t, func() bool {
		p, err := c.List(ctx, "acme", client.ListOptions{Limit: 100})
		return err == nil && len(p.Threads) == 7
	}, 10*time.Second, 10*time.Millisecond)

	policy := map[string]retention.Policy{"acme": {EraseIdle: time.Second}}
	dry, err := retention.New(c, retention.Config{Tenants: policy, DryRun: true})
	require.NoError(t, err)
	planned, err := dry.Scan(ctx)
	require.NoError(t, err)
	require.Equal(t, idle, threadsOf(planned), "the dry run plans exactly the idle threads")
	for _, id := range idle {
		_, err := c.Get(ctx, "acme", id, client.Consistent())
		require.NoError(t, err, "a dry run erases nothing: %s", id)
	}

	// An enforcer stopped after its first action (as if agentd stopped
	// mid-scan), then a new one.
	var mu sync.Mutex
	var acted []retention.Action
	rctx, stop := context.WithCancel(ctx)
	first, err := retention.New(c, retention.Config{Tenants: policy, Interval: time.Hour, OnAction: func(a retention.Action) {
		mu.Lock()
		acted = append(acted, a)
		mu.Unlock()
		stop()
	}})
	require.NoError(t, err)
	require.NoError(t, first.Run(rctx))
	mu.Lock()
	require.NotEmpty(t, acted)
	require.Less(t, len(acted), len(idle), "the first enforcer stopped in the middle")
	mu.Unlock()
	second, err := retention.New(c, retention.Config{Tenants: policy})
	require.NoError(t, err)
	rest, err := second.Scan(ctx)
	require.NoError(t, err)
	all := append(acted, rest...)
	require.ElementsMatch(t, idle, threadsOf(all), "every idle thread erased exactly once")
	again, err := second.Scan(ctx)
	require.NoError(t, err)
	require.Empty(t, again, "a later scan has nothing left to do")

	st, err := ns.JS.Stream(ctx, "CONVLOG")
	require.NoError(t, err)
	for _, id := range idle {
		_, err := c.Get(ctx, "acme", id, client.Consistent())
		require.True(t, errors.Is(err, client.ErrThreadNotFound), "%s: %v", id, err)
		// The action is in the log: the only event left is the marker,
		// naming the policy.
		m, err := st.GetLastMsgForSubject(ctx, "conv.acme."+id)
		require.NoError(t, err)
		require.Equal(t, string(events.TypeErased), m.Header.Get(events.HeaderType))
		first, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject("conv.acme."+id))
		require.NoError(t, err)
		require.Equal(t, m.Sequence, first.Sequence, "one marker: erased once")
		ev, err := events.Unmarshal(m.Data)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(ev.Payload.(events.Erased).Reason, "retention: no event for "), ev.Payload)
	}
	for _, k := range [][2]string{{"acme", "kept-by-override"}, {"acme", "revived"}, {"acme", "fresh"}, {"globex", "idle-other-tenant"}} {
		th, err := c.Get(ctx, k[0], k[1], client.Consistent())
		require.NoError(t, err, "%v stays", k)
		require.NotEmpty(t, th.Messages)
	}
}

// withProjector starts a server, a provisioned client and a projector
// (until the test ends).
func withProjector(t *testing.T) (*natstest.Server, *client.Client) {
	t.Helper()
	e := clienttest.New(t, clienttest.WithProjector(projector.Config{}))
	return e.Server, e.Client
}

func threadsOf(as []retention.Action) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Thread)
	}
	return out
}

func TestRetentionFilesAreChecked(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := dir + "/r.json"
		require.NoError(t, writeFile(p, s))
		return p
	}
	cfg, err := retention.LoadFile(write(`{"interval":"2s","tenants":{"acme":{"erase_idle":"720h"}}}`))
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, cfg.Interval)
	require.Equal(t, 720*time.Hour, cfg.Tenants["acme"].EraseIdle)
	_, err = retention.LoadFile(write(`{"tenants":{"acme":{"erase_idle":"soon"}}}`))
	require.ErrorContains(t, err, `tenants.acme.erase_idle "soon" is not a positive duration`)
	_, err = retention.LoadFile(write(`{"tenant":{}}`))
	require.ErrorContains(t, err, `unknown field "tenant"`)
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }

// A policy of "keep 1 s of events" (test scale) compacts a thread's older
// messages into a summary and redacts their content, never between a tool
// call and its result, keeps the newer messages, the thread and its
// state; an enforcer stopped between the summary and the redaction is
// finished by the next scan; a later scan does nothing; a dry run plans
// the cut and changes nothing.
func TestKeepEventsCompactsAndRedactsTheOlderMessagesOnce(t *testing.T) {
	_, c := withProjector(t)
	ctx := context.Background()

	_, _, v, err := c.CreateThread(ctx, client.CreateOptions{Tenant: "acme", ThreadID: "long", ThreadCreated: events.ThreadCreated{Title: "kept title", Replies: events.RepliesOff}})
	require.NoError(t, err)
	app := func(evs ...events.Event) {
		res, err := c.Append(ctx, "acme", "long", evs, client.ExpectVersion(v))
		require.NoError(t, err)
		v = res.Version
	}
	for i := range 3 {
		app(events.Event{Payload: events.UserMessage{Content: events.Text(fmt.Sprintf("old secret %d", i))}})
	}
	app(events.Event{Payload: events.StateSet{Key: "cart", Value: []byte(`{"n":1}`)}})
	app(events.Event{Payload: events.AssistantMessage{ToolCalls: []events.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"old secret args"}`}}}},
		events.Event{Payload: events.ToolResult{ToolCallID: "c1", Content: events.Text("old secret result")}})
	time.Sleep(1200 * time.Millisecond)
	app(events.Event{Payload: events.UserMessage{Content: events.Text("new 0")}})
	app(events.Event{Payload: events.UserMessage{Content: events.Text("new 1")}})
	policy := map[string]retention.Policy{"acme": {KeepEvents: time.Second}}
	// Every scan decides at this instant (a redaction takes seconds, after
	// which the new messages would be old too at this test's scale).
	at := time.Now()
	now := func() time.Time { return at }

	dry, err := retention.New(c, retention.Config{Tenants: policy, DryRun: true, Now: now})
	require.NoError(t, err)
	planned, err := dry.Scan(ctx)
	require.NoError(t, err)
	require.Len(t, planned, 1)
	require.Equal(t, "keep", planned[0].Kind)
	th, err := c.Get(ctx, "acme", "long", client.Consistent())
	require.NoError(t, err)
	require.Len(t, th.Messages, 7, "a dry run changes nothing")
	require.Equal(t, th.Messages[4].Seq, planned[0].UpToSeq, "the cut is after the tool result, the last old message")

	// Stopped between the summary and the redaction.
	sctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	first, err := retention.New(c, retention.Config{Tenants: policy, Now: now})
	require.NoError(t, err)
	_, err = first.Scan(sctx)
	cancel()
	require.Error(t, err, "stopped in the middle of the key rotation")
	th, err = c.Get(ctx, "acme", "long", client.Consistent())
	require.NoError(t, err)
	require.Len(t, th.Messages, 3, "the summary is there")
	require.Empty(t, th.Redactions, "the redaction is not")

	second, err := retention.New(c, retention.Config{Tenants: policy, Now: now})
	require.NoError(t, err)
	acts, err := second.Scan(ctx)
	require.NoError(t, err)
	require.Len(t, acts, 1)
	require.Equal(t, planned[0].UpToSeq, acts[0].UpToSeq)
	require.Equal(t, 5, acts[0].Redacted, "three user messages, the call, the result (not the state, not the creation)")
	again, err := second.Scan(ctx)
	require.NoError(t, err)
	require.Empty(t, again, "done once")

	th, err = c.Get(ctx, "acme", "long", client.Consistent())
	require.NoError(t, err)
	require.Equal(t, "kept title", th.Title)
	require.JSONEq(t, `{"n":1}`, string(th.KV["cart"]))
	require.Len(t, th.Messages, 3)
	require.Contains(t, th.Messages[0].Content.String(), "5 earlier messages were removed by the retention policy")
	require.Equal(t, "new 0", th.Messages[1].Content.String())
	require.Len(t, th.Redactions, 1)
	require.Equal(t, planned[0].UpToSeq, th.Redactions[0].UpToSeq)
	var texts []string
	for ev, err := range c.Events(ctx, "acme", "long", 0, 0) {
		require.NoError(t, err)
		b, err := ev.Event.MarshalJSON()
		require.NoError(t, err)
		texts = append(texts, string(b))
	}
	all := strings.Join(texts, "\n")
	require.NotContains(t, all, "old secret", "the old content reads redacted in the log too")
	require.Contains(t, all, "new 1")
}

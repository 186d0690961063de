package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/clienttest"
	"github.com/convlog/convlog/internal/natstest"
	"github.com/convlog/convlog/internal/provision"
)

// appendEnv is a provisioned stream with a client on it, and what tests
// need to look at the stream behind the client's back.
type appendEnv struct {
	c    *client.Client
	nc   *nats.Conn
	js   jetstream.JetStream
	res  provision.Config
	logs *logCapture
}

// newAppendEnv starts one embedded server (R1) and a client on it.
func newAppendEnv(t testing.TB, res provision.Config, opts ...func(*client.Config)) *appendEnv {
	t.Helper()
	s := natstest.Run(t)
	return newEnvOn(t, s.NC, res, opts...)
}

// newEnvOn provisions res through nc and returns a client with a log
// capture.
func newEnvOn(t testing.TB, nc *nats.Conn, res provision.Config, opts ...func(*client.Config)) *appendEnv {
	t.Helper()
	res = res.WithDefaults()
	logs := &logCapture{}
	cfg := client.Config{Provision: true, Resources: res, Logger: slog.New(logs)}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := client.New(context.Background(), nc, cfg)
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return &appendEnv{c: c, nc: nc, js: js, res: res, logs: logs}
}

// newClient returns another client on the same resources (its own cache),
// on connection nc.
func (e *appendEnv) newClient(t testing.TB, nc *nats.Conn) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), nc, client.Config{Resources: e.res, Logger: slog.New(e.logs)})
	require.NoError(t, err)
	return c
}

func (e *appendEnv) subject(t testing.TB, tenant, thread string) string {
	t.Helper()
	s, err := e.c.Subjects().Thread(tenant, thread)
	require.NoError(t, err)
	return s
}

// createThread creates a thread and returns its id and version.
func (e *appendEnv) createThread(t testing.TB, opts client.CreateOptions) (string, uint64) {
	t.Helper()
	_, thread, v, err := e.c.CreateThread(context.Background(), opts)
	require.NoError(t, err)
	require.NotZero(t, v)
	return thread, v
}

// storedMsg is one message of a thread's subject as the stream leader has it.
type storedMsg struct {
	Seq  uint64
	ID   string
	Type events.Type
	Data []byte
}

// stored reads every message of the thread's subject with an ordered
// consumer (served by the stream leader, unlike direct gets). It polls
// through leader changes.
func (e *appendEnv) stored(t testing.TB, tenant, thread string) []storedMsg {
	t.Helper()
	subject := e.subject(t, tenant, thread)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); ; <-tick.C {
		out, err := e.readSubject(subject)
		if err == nil || time.Now().After(deadline) {
			require.NoError(t, err, "reading %s", subject)
			return out
		}
	}
}

func (e *appendEnv) readSubject(subject string) ([]storedMsg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.js.Stream(ctx, e.res.Stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, err
	}
	n := int(info.State.Subjects[subject])
	if n == 0 {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, err
	}
	var out []storedMsg
	for len(out) < n {
		batch, err := cons.Fetch(n-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			out = append(out, storedMsg{Seq: md.Sequence.Stream, ID: m.Headers().Get(jetstream.MsgIDHeader),
				Type: events.Type(m.Headers().Get(events.HeaderType)), Data: m.Data()})
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// count is the number of messages on the thread's subject (leader's answer).
func (e *appendEnv) count(t testing.TB, tenant, thread string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subject := e.subject(t, tenant, thread)
	st, err := e.js.Stream(ctx, e.res.Stream)
	require.NoError(t, err)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	return info.State.Subjects[subject]
}

// publishAsClient publishes complete events exactly as the client would
// (same bytes, same headers, OCC at expect), as a first attempt whose ack
// is then lost. It returns the sequences.
func (e *appendEnv) publishAsClient(t testing.TB, evs []events.Event, expect uint64) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs := make([]*nats.Msg, len(evs))
	for i, ev := range evs {
		msgs[i] = clienttest.Msg(t, e.subject(t, ev.Tenant, ev.Thread), ev)
	}
	msgs[0].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect, 10))
	msgs[0].Header.Set(jetstream.ExpectedStreamHeader, e.res.Stream)
	if len(msgs) == 1 {
		ack, err := e.js.PublishMsg(ctx, msgs[0])
		require.NoError(t, err)
		require.False(t, ack.Duplicate)
		return []uint64{ack.Sequence}
	}
	ack, err := jetstreamext.PublishMsgBatch(ctx, e.js, msgs)
	require.NoError(t, err)
	seqs := make([]uint64, len(msgs))
	for i := range seqs {
		seqs[i] = ack.Sequence - uint64(len(msgs)-1-i)
	}
	return seqs
}

// waitUntilForgotten polls until the stream's duplicate window no longer
// holds ids published before this call: it publishes a probe id now and
// republishes it until the server stops calling it a duplicate (the window
// forgets ids in age order).
func (e *appendEnv) waitUntilForgotten(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	probe := e.subject(t, "probe", "window")
	id := events.NewID()
	_, err := e.js.Publish(ctx, probe, []byte("probe"), jetstream.WithMsgID(id))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ack, err := e.js.Publish(ctx, probe, []byte("probe"), jetstream.WithMsgID(id))
		return err == nil && !ack.Duplicate
	}, 30*time.Second, 20*time.Millisecond, "the server did not forget a probe id")
}

// logCapture is a slog.Handler that keeps every record.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

// find returns the attributes of records with message msg whose attribute
// key has value want (any value when want is "").
func (h *logCapture) find(msg, key, want string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		if want == "" || attrs[key] == want {
			out = append(out, attrs)
		}
	}
	return out
}

func (h *logCapture) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = nil
}

// Event builders.

func userEvent(text string) events.Event {
	return events.Event{Payload: events.UserMessage{Content: events.Text(text)}}
}

func callsEvent(ids ...string) events.Event {
	calls := make([]events.ToolCall, len(ids))
	for i, id := range ids {
		calls[i] = events.ToolCall{ID: id, Name: "lookup", Arguments: fmt.Sprintf(`{"q":%q}`, id)}
	}
	return events.Event{Payload: events.AssistantMessage{ToolCalls: calls}}
}

func resultEvent(id string) events.Event {
	return events.Event{Payload: events.ToolResult{ToolCallID: id, Name: "lookup", Content: events.Text("result of " + id)}}
}

// toolTurn is an assistant message calling ids plus one result per call.
func toolTurn(ids ...string) []events.Event {
	evs := []events.Event{callsEvent(ids...)}
	for _, id := range ids {
		evs = append(evs, resultEvent(id))
	}
	return evs
}

// completeEvents fills the envelope of evs for tenant/thread the way Append does,
// so that a test can publish the same bytes itself.
func completeEvents(tenant, thread string, evs []events.Event) []events.Event {
	out := make([]events.Event, len(evs))
	for i, e := range evs {
		out[i] = events.New(tenant, thread, "convlog-client", e.Payload)
	}
	return out
}

func eventIDs(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func storedIDs(ms []storedMsg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func resultSeqs(res client.AppendResult) []uint64 {
	out := make([]uint64, len(res.Events))
	for i, e := range res.Events {
		out[i] = e.Seq
	}
	return out
}

// TestAppendedEventsCarryTheEventHeaders: every stored message carries the
// headers events.Headers names (consumers filter on them without decoding).
func TestAppendedEventsCarryTheEventHeaders(t *testing.T) {
	env := newAppendEnv(t, provision.Config{})
	ctx := context.Background()
	thread, v := env.createThread(t, client.CreateOptions{})
	res, err := env.c.Append(ctx, events.DefaultTenant, thread, toolTurn("call_h"), client.ExpectVersion(v))
	require.NoError(t, err)
	st, err := env.js.Stream(ctx, env.res.Stream)
	require.NoError(t, err)
	for _, e := range res.Events {
		m, err := st.GetMsg(ctx, e.Seq)
		require.NoError(t, err)
		for k, v := range events.Headers(e.Event) {
			require.Equal(t, v, m.Header.Get(k), "header %s", k)
		}
		require.Empty(t, m.Header.Get(jetstream.ExpectedLastMsgIDHeader))
	}
}

package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/threadkey"
)

// ServiceConfig configures [StartService].
type ServiceConfig struct {
	// Resources names the stream and buckets (defaults filled in);
	// Resources.Partitions is the deployment's K (0: read from its
	// record, provision.ReadPartitions).
	Resources provision.Config
	// Logger receives one line per failed request (nil: discard).
	Logger *slog.Logger
	// Concurrency bounds the requests handled at once by this process
	// (default 64); a request beyond it waits in the subscription's
	// pending queue (the NATS micro default limits).
	Concurrency int
	// Timeout bounds each request's NATS work (default 10 s).
	Timeout time.Duration
}

// Service is the tenant service of one process: a NATS micro service named
// "convlog-tenants" in queue group "convlog", so that every agentd of a
// deployment shares the requests. Create it with [StartService].
type Service struct {
	svc micro.Service
	sem chan struct{}
}

// StartService starts the tenant service on nc, which must have every
// permission (agentd's connection). It reads only the tenant its request
// subject names: the thread subject and KV keys it builds from that
// tenant and a validated thread id. Errors: the buckets cannot be looked
// up, or the service cannot subscribe.
func StartService(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg ServiceConfig) (*Service, error) {
	cfg.Resources = cfg.Resources.WithDefaults()
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	k := cfg.Resources.Partitions
	if k == 0 {
		var err error
		if k, err = provision.ReadPartitions(ctx, js, cfg.Resources); err != nil {
			return nil, fmt.Errorf("tenancy: %w", err)
		}
	}
	h := &handlers{cfg: cfg, js: js}
	for p := range k {
		rp := cfg.Resources.Partition(p)
		index, err := js.KeyValue(ctx, rp.IndexBucket)
		if err != nil {
			return nil, fmt.Errorf("tenancy: KV bucket %s: %w", rp.IndexBucket, err)
		}
		keys, err := js.KeyValue(ctx, rp.KeyBucket)
		if err != nil {
			return nil, fmt.Errorf("tenancy: KV bucket %s: %w", rp.KeyBucket, err)
		}
		h.parts = append(h.parts, partition{stream: rp.Stream, index: index, keys: keys, subjects: events.Subjects{Prefix: rp.SubjectPrefix}})
	}
	svc, err := micro.AddService(nc, micro.Config{Name: "convlog-tenants", Version: "1.0.0", QueueGroup: "convlog",
		Description: "convlog's reads for tenant-scoped NATS users (package tenancy)"})
	if err != nil {
		return nil, fmt.Errorf("tenancy: start service: %w", err)
	}
	s := &Service{svc: svc, sem: make(chan struct{}, cfg.Concurrency)}
	for op, fn := range map[string]func(context.Context, string, micro.Request) error{
		OpLogGet: h.logGet, OpLogLast: h.logLast, OpKeyCreate: h.keyCreate, OpIndexList: h.indexList,
	} {
		err := svc.AddEndpoint(strings.ReplaceAll(op, ".", "_"), s.handle(cfg, fn),
			micro.WithEndpointSubject(opSubject(cfg.Resources.TenantAPI, "*", op)))
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("tenancy: endpoint %s: %w", op, err)
		}
	}
	return s, nil
}

// Stop unsubscribes the service (requests in flight finish).
func (s *Service) Stop() error { return s.svc.Stop() }

// handle runs fn for each request in a goroutine of its own, at most
// cfg.Concurrency at once (beyond that the subscription's goroutine waits,
// and requests queue in its pending limits). An error fn returns is
// answered as 500 and logged. A request whose reply subject is neither
// under its tenant's inbox prefix nor a cross-account answer subject
// ([ReplyPrefix]) is logged and not answered: the service publishes with
// every permission, so it answers only where the caller's own account
// receives the answer.
func (s *Service) handle(cfg ServiceConfig, fn func(context.Context, string, micro.Request) error) micro.HandlerFunc {
	return func(req micro.Request) {
		s.sem <- struct{}{}
		go func() {
			defer func() { <-s.sem }()
			tenant, err := tenantOf(cfg.Resources.TenantAPI, req.Subject())
			if err == nil && !replyAllowed(tenant, req.Reply()) {
				// Answering would publish with the service's rights to a
				// subject the caller chose (another tenant's inbox, a KV
				// key, the JetStream API): refuse without an answer.
				cfg.Logger.Warn("tenant service request refused: its reply subject is not the caller's inbox",
					"tenant", tenant, "subject", req.Subject(), "reply", req.Reply(),
					"want", InboxPrefix(tenant)+".> or "+ReplyPrefix+"> (an import's answer)")
				return
			}
			if err != nil {
				if strings.HasPrefix(req.Reply(), ReplyPrefix) {
					_ = req.Error(codeBadRequest, err.Error(), nil)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
			defer cancel()
			if err := fn(ctx, tenant, req); err != nil {
				cfg.Logger.Warn("tenant service request failed", "subject", req.Subject(), "err", err)
				_ = req.Error(codeInternal, err.Error(), nil)
			}
		}()
	}
}

// handlers are the operations, each given the tenant of its subject. A
// bad request is answered with its 4xx error and returns nil.
type handlers struct {
	cfg   ServiceConfig
	js    jetstream.JetStream
	parts []partition
}

// partition is one partition's stream, subjects, index and key buckets.
type partition struct {
	stream   string
	subjects events.Subjects
	index    jetstream.KeyValue
	keys     jetstream.KeyValue
}

// decode reads req's JSON body into v. It answers 400 and returns false
// when the body is not that JSON.
func (h *handlers) decode(req micro.Request, v any) bool {
	if err := json.Unmarshal(req.Data(), v); err != nil {
		_ = req.Error(codeBadRequest, fmt.Sprintf("request body: %v", err), nil)
		return false
	}
	return true
}

// thread returns the partition and subject of tenant/thread
// (events.Partition), or answers 400.
func (h *handlers) thread(req micro.Request, tenant, thread string) (partition, string, bool) {
	part := h.parts[events.Partition(tenant, thread, len(h.parts))]
	subject, err := part.subjects.Thread(tenant, thread)
	if err != nil {
		_ = req.Error(codeBadRequest, err.Error(), nil)
		return part, "", false
	}
	return part, subject, true
}

// budget is the most data bytes one answer may carry.
func (h *handlers) budget(asked int) int {
	b := max(int(h.js.Conn().MaxPayload())-answerSlack, 1)
	if asked > 0 {
		b = min(b, asked)
	}
	return b
}

func (h *handlers) logGet(ctx context.Context, tenant string, req micro.Request) error {
	var r LogGetRequest
	if !h.decode(req, &r) {
		return nil
	}
	part, subject, ok := h.thread(req, tenant, r.Thread)
	if !ok {
		return nil
	}
	if r.Batch < 1 || r.Batch > MaxBatch {
		_ = req.Error(codeBadRequest, fmt.Sprintf("batch must be 1..%d, got %d", MaxBatch, r.Batch), nil)
		return nil
	}
	budget := h.budget(r.MaxBytes)
	msgs, pending, err := directget.Batch(ctx, h.js, part.stream, subject, max(r.From, 1), r.Batch, budget)
	if err != nil {
		return err
	}
	// The server stops after the message that reaches the budget: drop
	// from the end what does not fit in one answer (the caller asks
	// again from there).
	page := logPage{Msgs: make([]wireMsg, 0, len(msgs)), Pending: pending}
	size := 0
	for i, m := range msgs {
		size += len(m.Data) + 64
		if i > 0 && size > budget {
			page.Pending += uint64(len(msgs) - i)
			break
		}
		page.Msgs = append(page.Msgs, wireMsg{Seq: m.Sequence, Time: m.Time.UnixNano(), Header: m.Header, Data: m.Data})
	}
	b, err := msgpack.Marshal(&page)
	if err != nil {
		return err
	}
	if len(b) > int(h.js.Conn().MaxPayload()) {
		_ = req.Error(codeTooLarge, fmt.Sprintf("the event at sequence %d (%d bytes) is too large to forward in one answer of at most %d bytes",
			page.Msgs[0].Seq, len(page.Msgs[0].Data), h.js.Conn().MaxPayload()), nil)
		return nil
	}
	return req.Respond(b)
}

func (h *handlers) logLast(ctx context.Context, tenant string, req micro.Request) error {
	var r ThreadRequest
	if !h.decode(req, &r) {
		return nil
	}
	part, subject, ok := h.thread(req, tenant, r.Thread)
	if !ok {
		return nil
	}
	seq, err := directget.LeaderLastSeq(ctx, h.js, part.stream, subject)
	if err != nil {
		return err
	}
	return req.RespondJSON(LogLastResponse{Seq: seq})
}

func (h *handlers) keyCreate(ctx context.Context, tenant string, req micro.Request) error {
	var r KeyCreateRequest
	if !h.decode(req, &r) {
		return nil
	}
	part, _, ok := h.thread(req, tenant, r.Thread)
	if !ok {
		return nil
	}
	if err := threadkey.CheckNewRecord(r.Record); err != nil {
		_ = req.Error(codeBadRequest, err.Error(), nil)
		return nil
	}
	rev, err := part.keys.Create(ctx, threadkey.Key(tenant, r.Thread), r.Record)
	if errors.Is(err, jetstream.ErrKeyExists) {
		_ = req.Error(codeExists, fmt.Sprintf("thread %s/%s has a data key (or had one: an erased thread never gets another)", tenant, r.Thread), nil)
		return nil
	}
	if err != nil {
		return err
	}
	return req.RespondJSON(KeyCreateResponse{Revision: rev})
}

func (h *handlers) indexList(ctx context.Context, tenant string, req micro.Request) error {
	var r IndexListRequest
	if !h.decode(req, &r) {
		return nil
	}
	if r.Partition < 0 || r.Partition >= len(h.parts) {
		_ = req.Error(codeBadRequest, fmt.Sprintf("partition must be 0..%d, got %d", len(h.parts)-1, r.Partition), nil)
		return nil
	}
	// One listing of the tenant's entries in the partition's index (a KV
	// watch on "<tenant>.*", which the tenant may not make itself), sorted
	// by thread id, from After on.
	w, err := h.parts[r.Partition].index.WatchFiltered(ctx, []string{tenant + ".*"}, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	var all []wireEntry
	for e := range w.Updates() {
		if e == nil {
			break
		}
		thread := strings.TrimPrefix(e.Key(), tenant+".")
		if thread > r.After {
			all = append(all, wireEntry{Thread: thread, Revision: e.Revision(), Created: e.Created().UnixNano(), Value: e.Value()})
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	slices.SortFunc(all, func(a, b wireEntry) int { return strings.Compare(a.Thread, b.Thread) })
	budget := h.budget(r.MaxBytes)
	page := indexPage{}
	size := 0
	for i, e := range all {
		size += len(e.Value) + len(e.Thread) + 32
		if i > 0 && size > budget {
			page.More = true
			break
		}
		page.Entries = append(page.Entries, e)
	}
	b, err := msgpack.Marshal(&page)
	if err != nil {
		return err
	}
	return req.Respond(b)
}

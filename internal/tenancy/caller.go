package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/provision"
)

// ServiceError is an error answer of the tenant service: Code is its
// HTTP-like status ("400" bad request, "409" exists, "413" too large,
// "500" the service failed), Description what was wrong.
type ServiceError struct {
	Op          string
	Code        string
	Description string
}

func (e *ServiceError) Error() string {
	return fmt.Sprintf("tenant service %s: %s %s", e.Op, e.Code, e.Description)
}

// Caller makes a tenant-scoped user's requests to the tenant service, for
// one tenant. Safe for concurrent use. Every method returns a
// *ServiceError for an error answer, nats.ErrNoResponders when no agentd
// runs the service, and the context's error at its deadline.
type Caller struct {
	nc     *nats.Conn
	tenant string
	root   string
	// res names the deployment; res.Partitions is its K.
	res provision.Config
}

// NewCaller returns the caller of tenant on nc (connected as one of the
// tenant's users, with nats.CustomInboxPrefix(InboxPrefix(tenant))) for
// the deployment res (res.Partitions its K, 0 counting as 1: the subjects
// of the events the service returns are those of each thread's
// partition).
func NewCaller(nc *nats.Conn, res provision.Config, tenant string) *Caller {
	res = res.WithDefaults()
	return &Caller{nc: nc, tenant: tenant, root: res.TenantAPI, res: res}
}

// subject is the subject of the tenant's thread, in its partition.
func (c *Caller) subject(thread string) (string, error) {
	p := events.Partition(c.tenant, thread, c.res.Partitions)
	return events.Subjects{Prefix: c.res.Partition(p).SubjectPrefix}.Thread(c.tenant, thread)
}

// call sends req (JSON) to op and returns the answer's body.
func (c *Caller) call(ctx context.Context, op string, req any) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	m, err := c.nc.RequestWithContext(ctx, opSubject(c.root, c.tenant, op), body)
	if err != nil {
		return nil, fmt.Errorf("tenant service %s: %w", op, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, &ServiceError{Op: op, Code: code, Description: m.Header.Get(micro.ErrorHeader)}
	}
	return m.Data, nil
}

// LogGet returns up to batch (1..MaxBatch) events of thread with sequence
// >= from, stopping after about maxBytes of data (0: one answer's worth),
// and how many more of the thread's events the stream held after them:
// directget.Batch, through the service.
func (c *Caller) LogGet(ctx context.Context, thread string, from uint64, batch, maxBytes int) ([]*jetstream.RawStreamMsg, uint64, error) {
	subject, err := c.subject(thread)
	if err != nil {
		return nil, 0, err
	}
	b, err := c.call(ctx, OpLogGet, LogGetRequest{Thread: thread, From: from, Batch: batch, MaxBytes: maxBytes})
	if err != nil {
		return nil, 0, err
	}
	var p logPage
	if err := msgpack.Unmarshal(b, &p); err != nil {
		return nil, 0, fmt.Errorf("tenant service %s: answer: %w", OpLogGet, err)
	}
	out := make([]*jetstream.RawStreamMsg, len(p.Msgs))
	for i, m := range p.Msgs {
		out[i] = &jetstream.RawStreamMsg{Subject: subject, Sequence: m.Seq, Header: nats.Header(m.Header), Data: m.Data, Time: time.Unix(0, m.Time)}
	}
	return out, p.Pending, nil
}

// LogLast returns the sequence of thread's last event as the stream leader
// has it (0: none): directget.LeaderLastSeq, through the service.
func (c *Caller) LogLast(ctx context.Context, thread string) (uint64, error) {
	b, err := c.call(ctx, OpLogLast, ThreadRequest{Thread: thread})
	if err != nil {
		return 0, err
	}
	var r LogLastResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("tenant service %s: answer: %w", OpLogLast, err)
	}
	return r.Seq, nil
}

// KeyCreate stores record as thread's data key record and returns its KV
// revision; jetstream.ErrKeyExists (wrapped) when the thread has one.
func (c *Caller) KeyCreate(ctx context.Context, thread string, record []byte) (uint64, error) {
	b, err := c.call(ctx, OpKeyCreate, KeyCreateRequest{Thread: thread, Record: record})
	var se *ServiceError
	if errors.As(err, &se) && se.Code == codeExists {
		return 0, fmt.Errorf("%w: %s", jetstream.ErrKeyExists, se.Description)
	}
	if err != nil {
		return 0, err
	}
	var r KeyCreateResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("tenant service %s: answer: %w", OpKeyCreate, err)
	}
	return r.Revision, nil
}

// IndexEntry is one thread's index entry (snapstore.Summary, sealed as
// stored).
type IndexEntry struct {
	Thread   string
	Revision uint64
	Created  time.Time
	Value    []byte
}

// IndexList returns the tenant's index entries in partition's index
// bucket (0 in a deployment of one partition) of threads after after
// (byte order), about maxBytes of them at most (0: one answer's worth),
// and whether more follow.
func (c *Caller) IndexList(ctx context.Context, partition int, after string, maxBytes int) ([]IndexEntry, bool, error) {
	b, err := c.call(ctx, OpIndexList, IndexListRequest{After: after, MaxBytes: maxBytes, Partition: partition})
	if err != nil {
		return nil, false, err
	}
	var p indexPage
	if err := msgpack.Unmarshal(b, &p); err != nil {
		return nil, false, fmt.Errorf("tenant service %s: answer: %w", OpIndexList, err)
	}
	out := make([]IndexEntry, len(p.Entries))
	for i, e := range p.Entries {
		out[i] = IndexEntry{Thread: e.Thread, Revision: e.Revision, Created: time.Unix(0, e.Created), Value: e.Value}
	}
	return out, p.More, nil
}

// Partitions returns the deployment's partition count K from its record
// (provision.PartitionsKey in res.ConfigBucket) with a subject-appended
// direct get, which a tenant-scoped user may make ([For]); 1 when the
// bucket has no record. Errors: NATS errors (no responders when the
// bucket does not exist: agentd serve creates it), an unreadable record.
func Partitions(ctx context.Context, js jetstream.JetStream, res provision.Config) (int, error) {
	res = res.WithDefaults()
	m, err := directget.Last(ctx, js, "KV_"+res.ConfigBucket, "$KV."+res.ConfigBucket+"."+provision.PartitionsKey)
	if err != nil {
		return 0, fmt.Errorf("tenancy: the deployment's partition count: %w", err)
	}
	if m == nil {
		return 1, nil
	}
	k, err := provision.ParsePartitions(m.Data)
	if err != nil {
		return 0, fmt.Errorf("tenancy: the deployment's partition count (KV %s, key %s): %w", res.ConfigBucket, provision.PartitionsKey, err)
	}
	return k, nil
}

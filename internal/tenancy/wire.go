package tenancy

import (
	"fmt"
	"strings"

	"github.com/convlog/convlog/events"
)

// The tenant service's operations: a tenant-scoped user sends a request to
// "<TenantAPI>.<tenant>.<op>" (provision.Config.TenantAPI, default
// "convlog.api"), its body one JSON object. Answers are msgpack (log
// pages, index pages) or JSON; an error is an empty answer with the
// headers Nats-Service-Error-Code (an HTTP-like status) and
// Nats-Service-Error (what was wrong), as the NATS micro protocol has it.
const (
	// OpLogGet reads a page of one of the tenant's threads: request
	// [LogGetRequest], answer a msgpack page (see [Caller.LogGet]).
	OpLogGet = "log.get"
	// OpLogLast answers the sequence of a thread's last event as the
	// stream leader has it: request [ThreadRequest], answer
	// [LogLastResponse].
	OpLogLast = "log.last"
	// OpKeyCreate creates a thread's data key record (threadkey): request
	// [KeyCreateRequest], answer [KeyCreateResponse]; 409 when the thread
	// already has one.
	OpKeyCreate = "key.create"
	// OpIndexList lists the tenant's index entries in key order: request
	// [IndexListRequest], answer a msgpack page (see [Caller.IndexList]).
	OpIndexList = "index.list"
)

// Error codes in Nats-Service-Error-Code.
const (
	codeBadRequest = "400"
	codeExists     = "409"
	codeTooLarge   = "413"
	codeInternal   = "500"
)

// MaxBatch is the most events one OpLogGet answers (as client's page).
const MaxBatch = 1000

// LogGetRequest asks for up to Batch (1..MaxBatch) events of Thread with
// sequence >= From, stopping after about MaxBytes bytes of data (0 = as
// many as one answer carries: the connection's max payload less 64 KiB).
type LogGetRequest struct {
	Thread   string `json:"thread"`
	From     uint64 `json:"from"`
	Batch    int    `json:"batch"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// ThreadRequest names one of the tenant's threads.
type ThreadRequest struct {
	Thread string `json:"thread"`
}

// LogLastResponse is the sequence of a thread's last event (0: none).
type LogLastResponse struct {
	Seq uint64 `json:"seq"`
}

// KeyCreateRequest stores Record (a new key record,
// threadkey.CheckNewRecord: 41 bytes of version 1; JSON base64) as
// Thread's data key, if it has none.
type KeyCreateRequest struct {
	Thread string `json:"thread"`
	Record []byte `json:"record"`
}

// KeyCreateResponse is the KV revision of the created key record.
type KeyCreateResponse struct {
	Revision uint64 `json:"revision"`
}

// IndexListRequest asks for the tenant's index entries in the index bucket
// of Partition (0..K-1; provision.Config.Partition) whose thread id is
// after After (byte order; "" = from the first), about MaxBytes bytes of
// values at most (0 = as many as one answer carries).
type IndexListRequest struct {
	After     string `json:"after,omitempty"`
	MaxBytes  int    `json:"max_bytes,omitempty"`
	Partition int    `json:"partition,omitempty"`
}

// logPage is OpLogGet's answer: the events and how many more of the
// thread the stream held after them.
type logPage struct {
	Msgs    []wireMsg `msgpack:"m"`
	Pending uint64    `msgpack:"p"`
}

// wireMsg is one stored event: stream sequence, server time (Unix ns),
// headers and bytes as stored.
type wireMsg struct {
	Seq    uint64              `msgpack:"s"`
	Time   int64               `msgpack:"t"`
	Header map[string][]string `msgpack:"h,omitempty"`
	Data   []byte              `msgpack:"d"`
}

// indexPage is OpIndexList's answer.
type indexPage struct {
	Entries []wireEntry `msgpack:"e"`
	More    bool        `msgpack:"more"`
}

// wireEntry is one index entry: the thread id (the KV key without
// "<tenant>."), its revision, creation time (Unix ns) and value.
type wireEntry struct {
	Thread   string `msgpack:"k"`
	Revision uint64 `msgpack:"r"`
	Created  int64  `msgpack:"t"`
	Value    []byte `msgpack:"v"`
}

// answerSlack is what an answer's framing may add to its data: a page
// stops at the max payload less this.
const answerSlack = 64 << 10

// opSubject is the subject of op for tenant: "<root>.<tenant>.<op>".
func opSubject(root, tenant, op string) string { return root + "." + tenant + "." + op }

// tenantOf returns the tenant token of a service subject
// "<root>.<tenant>.<op>".
func tenantOf(root, subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, root+".")
	if !ok {
		return "", fmt.Errorf("subject %q is not under %q", subject, root)
	}
	tenant, _, _ := strings.Cut(rest, ".")
	if err := events.ValidateTenant(tenant); err != nil {
		return "", err
	}
	return tenant, nil
}

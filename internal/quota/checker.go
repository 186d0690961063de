package quota

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/internal/directget"
	"github.com/convlog/convlog/internal/lru"
)

// CheckTTL is how long a [Checker] uses a tenant's record before it reads
// it again.
const CheckTTL = 500 * time.Millisecond

// checkerTenants bounds how many tenants' records a Checker keeps.
const checkerTenants = 4096

// Checker tells writers whether a tenant may append (see the package
// doc). It reads a tenant's record with a subject-appended direct get of
// "$KV.<bucket>.<tenant>" (which a tenant-scoped NATS user may make for
// its own tenant) at most once per CheckTTL, and keeps up to 4,096
// tenants' records. Safe for concurrent use.
//
// It fails open: when the record cannot be read (no usage bucket, an old
// deployment, or a NATS error) the append goes on, and the failure is
// remembered for CheckTTL.
type Checker struct {
	js     jetstream.JetStream
	bucket string
	cache  *lru.Cache[string, checked]
	now    func() time.Time
}

type checked struct {
	usage *Usage // nil: no record, or it could not be read
	at    time.Time
}

// NewChecker returns a Checker on the usage bucket named bucket.
func NewChecker(js jetstream.JetStream, bucket string) *Checker {
	return &Checker{js: js, bucket: bucket, cache: lru.New[string, checked](checkerTenants, 0), now: time.Now}
}

// Check returns an *Error when tenant is over a limit, else nil.
func (c *Checker) Check(ctx context.Context, tenant string) error {
	now := c.now()
	e, ok := c.cache.Get(tenant)
	if !ok || now.Sub(e.at) >= CheckTTL {
		e = checked{at: now}
		m, err := directget.Last(ctx, c.js, "KV_"+c.bucket, "$KV."+c.bucket+"."+tenant)
		if err == nil && m != nil && m.Header.Get("KV-Operation") == "" {
			var u Usage
			if json.Unmarshal(m.Data, &u) == nil {
				e.usage = &u
			}
		}
		c.cache.Put(tenant, e, 1)
	}
	if e.usage == nil {
		return nil
	}
	return e.usage.Check(tenant, now)
}

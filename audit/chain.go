package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
	"strings"
	"sync"
	"time"
)

// Hash is a SHA-256 digest: a leaf or a chain head.
type Hash [sha256.Size]byte

// Record is one stored message of the stream as the chain sees it: what
// JetStream stored and returns on any read path (consumer delivery or
// direct get).
type Record struct {
	// Subject is the thread subject, "<prefix>.<tenant>.<thread>".
	Subject string
	// Seq is the stream sequence the server assigned.
	Seq uint64
	// Time is the server's store time (nanoseconds; the consumer's
	// metadata timestamp and a direct get's Nats-Time-Stamp are the same
	// value).
	Time time.Time
	// Header is the message's NATS header as read (nats.Header converts
	// to this type); see [Leaf] for which names count.
	Header map[string][]string
	// Data is the message body, the msgpack-encoded event.
	Data []byte
}

const (
	leafDomain  = "convlog.audit.leaf.v1\n"
	chainDomain = "convlog.audit.chain.v1\n"
)

// Leaf returns the leaf hash of one stored message:
//
//	SHA-256( "convlog.audit.leaf.v1\n"
//	       || u64be(seq) || i64be(store time, Unix nanoseconds)
//	       || lp(subject)
//	       || u32be(number of header fields) || for each field: lp(name) || lp(value)
//	       || lp(data) )
//
// where lp(x) = u32be(len(x)) || x. The header fields are the stored
// header's names lower-cased (ASCII), each with each of its values in stored
// order, sorted by name (values of one name in stored order), leaving out every name that
// starts with "nats-" except "nats-msg-id" (the server adds Nats-Sequence,
// Nats-Time-Stamp and others on a direct get, and publish preconditions
// such as Nats-Expected-Last-Subject-Sequence are not content). For a
// convlog event that is convlog-type, convlog-schema and nats-msg-id.
// The construction is documented in docs/audit.md so that an auditor in
// another language recomputes it. Leaf is a pure function, safe for
// concurrent use.
func Leaf(r Record) Hash {
	h := hashPool.Get().(*leafHasher)
	defer hashPool.Put(h)
	h.d.Reset()
	b := append(h.buf[:0], leafDomain...)
	b = binary.BigEndian.AppendUint64(b, r.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Time.UnixNano()))
	b = appendLP(b, r.Subject)
	// Names sorted lower-cased (ties, "Foo" beside "foo", by the name as
	// read), so the order never depends on map iteration.
	names := h.names[:0]
	fields := 0
	for name, vs := range r.Header {
		if !hasPrefixFold(name, "nats-") || equalFold(name, "nats-msg-id") {
			names = append(names, name)
			fields += len(vs)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := compareFold(a, b); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	b = binary.BigEndian.AppendUint32(b, uint32(fields))
	for _, name := range names {
		for _, v := range r.Header[name] {
			b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
			for i := 0; i < len(name); i++ {
				b = append(b, lower(name[i]))
			}
			b = appendLP(b, v)
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Data)))
	h.d.Write(b)
	h.d.Write(r.Data)
	h.buf, h.names = b[:0], names[:0]
	var out Hash
	h.d.Sum(out[:0])
	return out
}

// leafHasher is Leaf's reusable state.
type leafHasher struct {
	d     hash.Hash
	buf   []byte
	names []string
}

var hashPool = sync.Pool{New: func() any {
	return &leafHasher{d: sha256.New(), buf: make([]byte, 0, 256), names: make([]string, 0, 8)}
}}

func appendLP(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// lower is ASCII lower-casing: header names are ASCII tokens.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// compareFold compares a and b ASCII-lower-cased.
func compareFold(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if ca, cb := lower(a[i]), lower(b[i]); ca != cb {
			return int(ca) - int(cb)
		}
	}
	return len(a) - len(b)
}

func equalFold(a, b string) bool { return len(a) == len(b) && compareFold(a, b) == 0 }

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && equalFold(s[:len(prefix)], prefix)
}

// Next returns the chain head after leaf: SHA-256("convlog.audit.chain.v1\n"
// || prev || leaf). A subject's chain starts at the zero Hash, so its head
// after its n-th stored message binds every message before it, in order.
// Pure, safe for concurrent use.
func Next(prev, leaf Hash) Hash {
	h := sha256.New()
	h.Write([]byte(chainDomain))
	h.Write(prev[:])
	h.Write(leaf[:])
	var out Hash
	h.Sum(out[:0])
	return out
}

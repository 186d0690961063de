package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
	"strings"
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
// header's names lower-cased, each with each of its values in stored
// order, sorted by name (values of one name in stored order), leaving out every name that
// starts with "nats-" except "nats-msg-id" (the server adds Nats-Sequence,
// Nats-Time-Stamp and others on a direct get, and publish preconditions
// such as Nats-Expected-Last-Subject-Sequence are not content). For a
// convlog event that is convlog-type, convlog-schema and nats-msg-id.
// The construction is documented in docs/audit.md so that an auditor in
// another language recomputes it. Leaf is a pure function, safe for
// concurrent use.
func Leaf(r Record) Hash {
	h := sha256.New()
	var b [8]byte
	h.Write([]byte(leafDomain))
	binary.BigEndian.PutUint64(b[:], r.Seq)
	h.Write(b[:])
	binary.BigEndian.PutUint64(b[:], uint64(r.Time.UnixNano()))
	h.Write(b[:])
	lp(h, r.Subject)
	// Names sorted lower-cased (ties, "Foo" beside "foo", by the name as
	// read), so the order never depends on map iteration.
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		if n := strings.ToLower(name); !strings.HasPrefix(n, "nats-") || n == "nats-msg-id" {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := strings.Compare(strings.ToLower(a), strings.ToLower(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	type field struct{ name, value string }
	var fields []field
	for _, name := range names {
		for _, v := range r.Header[name] {
			fields = append(fields, field{strings.ToLower(name), v})
		}
	}
	binary.BigEndian.PutUint32(b[:4], uint32(len(fields)))
	h.Write(b[:4])
	for _, f := range fields {
		lp(h, f.name)
		lp(h, f.value)
	}
	binary.BigEndian.PutUint32(b[:4], uint32(len(r.Data)))
	h.Write(b[:4])
	h.Write(r.Data)
	var out Hash
	h.Sum(out[:0])
	return out
}

func lp(h hash.Hash, s string) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(len(s)))
	h.Write(b[:])
	h.Write([]byte(s))
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

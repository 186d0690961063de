package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Header names of a checkpoint message (the body is the Checkpoint's JSON).
const (
	// HeaderSignature carries the Ed25519 signature (RFC 8032) of the
	// message body, standard base64.
	HeaderSignature = "Convlog-Audit-Signature"
	// HeaderKey carries the signer's public key, standard base64 of its
	// 32 bytes: it names the key, a verifier trusts it only when it is in
	// its own set of trusted keys.
	HeaderKey = "Convlog-Audit-Key"
)

// CheckpointVersion is the format version of [Checkpoint].
const CheckpointVersion = 1

// Checkpoint is one signed statement of the chain heads, stored in the
// stream itself on the checkpoint subject ("<prefix>.audit"). Checkpoint n
// covers every thread message with a stream sequence in [From, Seq]; the
// checkpoints form their own chain through Prev, so a missing or altered
// checkpoint breaks it. JSON, as stored:
//
//	{"v":1,"stream":"CONVLOG","from":1,"seq":42,"time":"2026-11-26T08:00:00Z",
//	 "prev":"<hex SHA-256 of the previous checkpoint's body, or empty>",
//	 "interval_ms":1000,
//	 "threads":[{"subject":"conv.acme.t1","prev":"<hex head before>","prev_cp":12,
//	             "head":"<hex head after>","leaves":[[7,"<hex leaf>"],...]}]}
//
// threads is sorted by subject, each thread's leaves by sequence.
type Checkpoint struct {
	V      int       `json:"v"`
	Stream string    `json:"stream"`
	From   uint64    `json:"from"`
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Prev   string    `json:"prev"`
	// IntervalMS is the cadence of the checkpointer that signed it
	// (Config.Interval in milliseconds, rounded up): a checkpoint comes at
	// most this long after the first event it covers reached the
	// checkpointer. Verify takes the newest signed checkpoint's as the
	// cadence that stored events after it must meet; 0 (absent) means
	// VerifyOptions.Interval.
	IntervalMS int64         `json:"interval_ms,omitempty"`
	Threads    []ThreadHeads `json:"threads"`
}

// ThreadHeads is one thread subject's part of a [Checkpoint]: its chain
// head before and after the checkpoint's messages, and the leaf of each
// of them ([Leaf]).
type ThreadHeads struct {
	Subject string `json:"subject"`
	Prev    string `json:"prev"`
	// PrevCheckpoint is the stream sequence of the previous checkpoint
	// message that named this subject (0 for its first): a verifier of one
	// thread walks these back from the newest instead of reading every
	// checkpoint of the stream.
	PrevCheckpoint uint64      `json:"prev_cp,omitempty"`
	Head           string      `json:"head"`
	Leaves         []LeafEntry `json:"leaves"`
}

// LeafEntry is [stream sequence, hex leaf hash]; JSON is a two-element
// array.
type LeafEntry struct {
	Seq  uint64
	Leaf Hash
}

// MarshalJSON encodes e as [seq, "hex"].
func (e LeafEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]any{e.Seq, hex.EncodeToString(e.Leaf[:])})
}

// UnmarshalJSON decodes [seq, "hex"]; anything else is an error naming the
// input.
func (e *LeafEntry) UnmarshalJSON(b []byte) error {
	// The form every checkpointer writes, [123,"<64 hex>"], without the
	// reflection of the general path (a checkpoint has thousands).
	if s, ok := bytes.CutPrefix(b, []byte("[")); ok {
		if num, rest, ok := bytes.Cut(s, []byte(",\"")); ok && len(rest) == 2*len(e.Leaf)+2 && string(rest[len(rest)-2:]) == "\"]" {
			if seq, err := strconv.ParseUint(string(num), 10, 64); err == nil {
				if _, err := hex.Decode(e.Leaf[:], rest[:2*len(e.Leaf)]); err == nil {
					e.Seq = seq
					return nil
				}
			}
		}
	}
	var raw [2]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("audit: a leaf entry must be [seq, \"hex\"], got %s", b)
	}
	if err := json.Unmarshal(raw[0], &e.Seq); err != nil {
		return fmt.Errorf("audit: leaf entry %s: sequence: %w", b, err)
	}
	var s string
	if err := json.Unmarshal(raw[1], &s); err != nil {
		return fmt.Errorf("audit: leaf entry %s: hash: %w", b, err)
	}
	h, err := ParseHash(s)
	if err != nil {
		return fmt.Errorf("audit: leaf entry %s: %w", b, err)
	}
	e.Leaf = h
	return nil
}

// ParseHash decodes 64 hex digits; "" is the zero Hash (a chain's start).
func ParseHash(s string) (Hash, error) {
	var h Hash
	if s == "" {
		return h, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("audit: %q is not 64 hex digits", s)
	}
	copy(h[:], b)
	return h, nil
}

// String is the hash in hex; the zero Hash is "".
func (h Hash) String() string {
	if h == (Hash{}) {
		return ""
	}
	return hex.EncodeToString(h[:])
}

// BodyHash is the hash that the next checkpoint's Prev names: SHA-256 of
// the stored body bytes.
func BodyHash(body []byte) Hash { return sha256.Sum256(body) }

// Sign returns the body to store and its header values (signature and
// key), signing the JSON of c with key.
func Sign(c Checkpoint, key ed25519.PrivateKey) (body []byte, sig, pub string, err error) {
	body, err = json.Marshal(c)
	if err != nil {
		return nil, "", "", err
	}
	return body, base64.StdEncoding.EncodeToString(ed25519.Sign(key, body)),
		base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)), nil
}

// Open checks body's signature (the HeaderSignature value sig) against the
// trusted keys and decodes it. It returns [ErrBadSignature] (wrapped) when
// no trusted key verifies it, or an error naming what is malformed.
func Open(body []byte, sig string, trusted []ed25519.PublicKey) (Checkpoint, error) {
	if err := checkSignature(body, sig, trusted); err != nil {
		return Checkpoint{}, err
	}
	return decodeCheckpoint(body)
}

// lazyCheckpoint is a Checkpoint whose threads' leaves stay undecoded
// until asked for: a verifier of one thread or tenant decodes only its
// own, a checkpointer loading heads none. Its Threads hides the
// Checkpoint's (encoding/json fills the shallower field), which stays nil.
type lazyCheckpoint struct {
	Checkpoint
	Threads []lazyThread `json:"threads"`
}

// lazyThread is a ThreadHeads whose Leaves (hiding the ThreadHeads' own,
// which stay nil) are the undecoded JSON array.
type lazyThread struct {
	ThreadHeads
	Leaves json.RawMessage `json:"leaves"`
}

// openLazy is Open into a lazyCheckpoint.
func openLazy(body []byte, sig string, trusted []ed25519.PublicKey) (lazyCheckpoint, error) {
	if err := checkSignature(body, sig, trusted); err != nil {
		return lazyCheckpoint{}, err
	}
	return decodeLazy(body)
}

func decodeLazy(body []byte) (lazyCheckpoint, error) {
	var c lazyCheckpoint
	if err := json.Unmarshal(body, &c); err != nil {
		return c, fmt.Errorf("audit: checkpoint body: %w", err)
	}
	if c.V != CheckpointVersion {
		return c, fmt.Errorf("audit: checkpoint format version %d, this verifier knows %d", c.V, CheckpointVersion)
	}
	return c, nil
}

func checkSignature(body []byte, sig string, trusted []ed25519.PublicKey) error {
	s, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(s) != ed25519.SignatureSize {
		return fmt.Errorf("%w: the %s header is not a base64 Ed25519 signature", ErrBadSignature, HeaderSignature)
	}
	for _, k := range trusted {
		if ed25519.Verify(k, body, s) {
			return nil
		}
	}
	return ErrBadSignature
}

// decodeCheckpoint decodes a checkpoint body of this format version.
func decodeCheckpoint(body []byte) (Checkpoint, error) {
	lc, err := decodeLazy(body)
	if err != nil {
		return Checkpoint{}, err
	}
	c := lc.Checkpoint
	for _, th := range lc.Threads {
		leaves, err := parseLeaves(th.Leaves)
		if err != nil {
			return c, fmt.Errorf("audit: checkpoint leaves of %s: %w", th.Subject, err)
		}
		th.ThreadHeads.Leaves = leaves
		c.Threads = append(c.Threads, th.ThreadHeads)
	}
	return c, nil
}

// parseLeaves decodes a thread's leaves as every checkpointer writes them,
// [[seq,"<64 hex>"],...] without spaces, by hand (a checkpoint carries
// thousands, and the verifier reads them all); any other valid JSON form
// goes through encoding/json.
func parseLeaves(raw []byte) ([]LeafEntry, error) {
	const entry = len(`[0,""]`) + 2*len(Hash{})
	out := make([]LeafEntry, 0, len(raw)/(entry+1))
	b := raw
	if len(b) < 2 || b[0] != '[' {
		return slowLeaves(raw)
	}
	b = b[1:]
	if len(b) == 1 && b[0] == ']' {
		return out, nil
	}
	for {
		end := bytes.IndexByte(b, ']')
		if end < 0 {
			return slowLeaves(raw)
		}
		var e LeafEntry
		if err := e.UnmarshalJSON(b[:end+1]); err != nil {
			return slowLeaves(raw)
		}
		out = append(out, e)
		b = b[end+1:]
		switch {
		case len(b) == 1 && b[0] == ']':
			return out, nil
		case len(b) > 1 && b[0] == ',':
			b = b[1:]
		default:
			return slowLeaves(raw)
		}
	}
}

func slowLeaves(raw []byte) ([]LeafEntry, error) {
	var out []LeafEntry
	err := json.Unmarshal(raw, &out)
	return out, err
}

// checkpointMeta reads only the "seq" and "interval_ms" members of a
// checkpoint body, without decoding its threads when they come after both
// (as every checkpointer writes them).
func checkpointMeta(body []byte) (seq uint64, intervalMS int64, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, fmt.Errorf("audit: a checkpoint body is a JSON object")
	}
	haveSeq := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, 0, fmt.Errorf("audit: checkpoint body: %w", err)
		}
		switch t {
		case "threads":
			if haveSeq {
				return seq, intervalMS, nil
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, 0, fmt.Errorf("audit: checkpoint body: %w", err)
			}
		case "seq":
			if err := dec.Decode(&seq); err != nil {
				return 0, 0, fmt.Errorf("audit: checkpoint seq: %w", err)
			}
			haveSeq = true
		case "interval_ms":
			if err := dec.Decode(&intervalMS); err != nil {
				return 0, 0, fmt.Errorf("audit: checkpoint interval_ms: %w", err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, 0, fmt.Errorf("audit: checkpoint body: %w", err)
			}
		}
	}
	if !haveSeq {
		return 0, 0, fmt.Errorf("audit: checkpoint body has no seq")
	}
	return seq, intervalMS, nil
}

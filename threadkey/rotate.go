package threadkey

// Key rotation, for redaction (docs/erasure-design.md):
// a thread gets a new key while every event sealed with the old ones keeps
// its own derived key, except the redacted events, which keep only a
// replacement payload. Destroying the old keys then destroys exactly the
// redacted events' keys.
//
// Record version 2: 02 || key || number of retired keys still kept (1
// byte) || each retired key || the table, sealed as a value under the
// current key with place "<tenant>.<thread>#table" (the rest of the
// record); a key is id (8) || event key (32) || value id (8) || value key
// (32). Event keys and value keys rotate at different points: a new event
// key at BeginRotation (writers move to it while the old one still opens
// everything), a new value key at Finish, which destroys every older one
// (values are derived data: snapshots are written again). The table's plain form is a sequence of
// entries: kind (1 byte: 1 an event key, 2 a replacement payload) ||
// length of the event id (1 byte) || event id || length (4 bytes, big
// endian) || the 32-byte key or the payload's msgpack bytes. An event's
// key is that of its format (threadkey.go: HChaCha20 of the root key for
// format 2, HMAC-SHA256 for format 1); the payload's first byte says
// which.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
)

// KeyTTL is how long a process uses a key record it read before reading
// it again: within KeyTTL of a rotation every writer seals with the new
// key. A rotation waits [RotationWait] before it reads the log.
const KeyTTL = 2 * time.Second

// RotationWait is how long [Keys.BeginRotation]'s caller waits before
// [Rotation.Finish]: KeyTTL, twice, and a second for appends in flight.
const RotationWait = 2*KeyTTL + time.Second

const (
	recordVersion2 = 2
	entryKey       = 1
	entryPayload   = 2
)

// tableEntry is what the table holds for one event: its key, or its
// replacement payload (msgpack) when it was redacted.
type tableEntry struct {
	key         []byte
	replacement []byte
}

// byValueID returns tk or the retired key whose value key has that id.
func (tk *threadKey) byValueID(id []byte) *threadKey {
	if string(id) == string(tk.valueID[:]) {
		return tk
	}
	for _, p := range tk.prev {
		if string(id) == string(p.valueID[:]) {
			return p
		}
	}
	return nil
}

// byID returns tk or the retired key with that id, or nil.
func (tk *threadKey) byID(id []byte) *threadKey {
	if string(id) == string(tk.id[:]) {
		return tk
	}
	for _, p := range tk.prev {
		if string(id) == string(p.id[:]) {
			return p
		}
	}
	return nil
}

// newKey returns a key with random event and value keys and ids.
func newKey() (*threadKey, error) {
	var b [2 * (idLen + 32)]byte
	if _, err := randRead(b[:]); err != nil {
		return nil, fmt.Errorf("threadkey: random key: %w", err)
	}
	tk, _ := readKey(b[:])
	return tk, nil
}

// newValueKey gives tk a new random value key.
func newValueKey(tk *threadKey) error {
	var b [idLen + 32]byte
	if _, err := randRead(b[:]); err != nil {
		return fmt.Errorf("threadkey: random key: %w", err)
	}
	copy(tk.valueID[:], b[:idLen])
	tk.setValueKey(b[idLen:])
	return nil
}

// appendKey appends tk's ids and keys (record version 2).
func appendKey(b []byte, tk *threadKey) []byte {
	b = append(b, tk.id[:]...)
	b = append(b, tk.key[:]...)
	b = append(b, tk.valueID[:]...)
	return append(b, tk.valueKey...)
}

// readKey reads what appendKey wrote; n is its length.
func readKey(b []byte) (*threadKey, int) {
	const n = 2 * (idLen + 32)
	if len(b) < n {
		return nil, 0
	}
	tk := &threadKey{}
	copy(tk.id[:], b[:idLen])
	copy(tk.key[:], b[idLen:idLen+32])
	tk.setEventRoot()
	copy(tk.valueID[:], b[idLen+32:2*idLen+32])
	tk.setValueKey(bytes.Clone(b[2*idLen+32 : n]))
	return tk, n
}

// encodeRecord2 encodes tk (its prev and table) as a version 2 record.
func encodeRecord2(tk *threadKey, name string) ([]byte, error) {
	if len(tk.prev) > 255 {
		return nil, fmt.Errorf("threadkey: %d retired keys kept, at most 255", len(tk.prev))
	}
	b := appendKey([]byte{recordVersion2}, tk)
	b = append(b, byte(len(tk.prev)))
	for _, p := range tk.prev {
		b = appendKey(b, p)
	}
	var plain []byte
	for id, e := range tk.table {
		if len(id) > 255 {
			return nil, fmt.Errorf("threadkey: event id of %d bytes", len(id))
		}
		kind, v := byte(entryKey), e.key
		if e.replacement != nil {
			kind, v = entryPayload, e.replacement
		}
		plain = append(plain, kind, byte(len(id)))
		plain = append(plain, id...)
		plain = binary.BigEndian.AppendUint32(plain, uint32(len(v)))
		plain = append(plain, v...)
	}
	sealed, err := sealValue(tk, name+"#table", plain)
	if err != nil {
		return nil, err
	}
	return append(b, sealed...), nil
}

// parseRecord2 decodes a version 2 record. The table's place needs the
// record's name, which the sealed table does not say: it is tried under
// every name by its authentication (see recordName).
func parseRecord2(b []byte, rev uint64) (*threadKey, error) {
	bad := func(what string) error {
		return fmt.Errorf("%w: key record version 2: %s", ErrCorrupt, what)
	}
	tk, i := readKey(b[1:])
	if tk == nil || len(b) < 1+i+1 {
		return nil, bad("too short")
	}
	tk.rev = rev
	i++
	n := int(b[i])
	i++
	for range n {
		p, m := readKey(b[i:])
		if p == nil {
			return nil, bad("retired keys cut off")
		}
		tk.prev = append(tk.prev, p)
		i += m
	}
	tk.sealedTable = b[i:]
	return tk, nil
}

// openTable opens tk's sealed table, stored under name.
func (tk *threadKey) openTable(name string) error {
	if tk.sealedTable == nil {
		return nil
	}
	if len(tk.sealedTable) < 2+idLen+nonceLen+16 {
		return fmt.Errorf("%w: key table of %s cut off", ErrCorrupt, name)
	}
	plain, err := openValue(tk, name+"#table", tk.sealedTable)
	if err != nil {
		return fmt.Errorf("key table of %s: %w", name, err)
	}
	tk.table = map[string]tableEntry{}
	for r := bytes.NewReader(plain); r.Len() > 0; {
		var hdr [2]byte
		if _, err := r.Read(hdr[:]); err != nil {
			return fmt.Errorf("%w: key table of %s", ErrCorrupt, name)
		}
		id := make([]byte, hdr[1])
		var n uint32
		if _, err := r.Read(id); err != nil || binary.Read(r, binary.BigEndian, &n) != nil || int(n) > r.Len() {
			return fmt.Errorf("%w: key table of %s", ErrCorrupt, name)
		}
		v := make([]byte, n)
		_, _ = r.Read(v)
		switch hdr[0] {
		case entryKey:
			tk.table[string(id)] = tableEntry{key: v}
		case entryPayload:
			tk.table[string(id)] = tableEntry{replacement: v}
		default:
			return fmt.Errorf("%w: key table of %s: entry kind %d", ErrCorrupt, name, hdr[0])
		}
	}
	tk.sealedTable = nil
	return nil
}

// Rotation is a key rotation of one thread in progress: begun with
// [Keys.BeginRotation], ended with [Rotation.Finish]. Not safe for
// concurrent use; one rotation of a thread at a time (a second one fails
// its compare-and-swap).
type Rotation struct {
	k              *Keys
	tenant, thread string
	begun          *threadKey // the record BeginRotation stored
}

// BeginRotation stores a new current key for tenant/thread and keeps the
// current and retired keys and the table, so that every reader still
// opens everything while writers (within [KeyTTL]) move to the new key.
// Errors: [ErrNoKey] (a thread with no key has nothing to rotate),
// [ErrDestroyed], a conflict with another rotation, NATS errors.
func (k *Keys) BeginRotation(ctx context.Context, tenant, thread string) (*Rotation, error) {
	name := Key(tenant, thread)
	e, err := k.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNoKey, tenant, thread)
	}
	if err != nil {
		return nil, fmt.Errorf("threadkey: read key of %s/%s: %w", tenant, thread, err)
	}
	if isTombstone(e.Value()) {
		return nil, fmt.Errorf("%w: %s/%s", ErrDestroyed, tenant, thread)
	}
	cur, err := parseRecord(e.Value(), e.Revision())
	if err == nil {
		err = cur.openTable(name)
	}
	if err != nil {
		return nil, fmt.Errorf("threadkey: key of %s/%s: %w", tenant, thread, err)
	}
	next, err := newKey()
	if err != nil {
		return nil, err
	}
	next.table = cur.table
	next.prev = append([]*threadKey{cur}, cur.prev...)
	for _, p := range next.prev {
		p.prev, p.table = nil, nil
	}
	rec, err := encodeRecord2(next, name)
	if err != nil {
		return nil, err
	}
	rev, err := k.kv.Update(ctx, name, rec, e.Revision())
	if err != nil {
		return nil, fmt.Errorf("threadkey: rotate key of %s/%s: %w", tenant, thread, err)
	}
	next.rev = rev
	k.forget(tenant, thread)
	return &Rotation{k: k, tenant: tenant, thread: thread, begun: next}, nil
}

// Finish ends the rotation: given every stored event of the thread (the
// stored bytes, sealed or not) and the replacement payloads of the events
// to redact (by event id, msgpack of the payload map), it stores the
// record with the new key and a table holding, for every event sealed
// with a retired key, its derived key, or its replacement when it is
// redacted; then it secure-deletes every older revision of the record, so
// that the retired keys (and with them the redacted events' keys) are in
// no file. A sealed payload too short for its format, or of no known
// format, is passed over: no key opens it, before or after. Call it
// [RotationWait] after BeginRotation. Errors: an event
// sealed with a key the rotation does not know (it cannot be kept), a
// record over the server's max payload (about 20,000 events), NATS
// errors; on an error the retired keys are still kept (nothing is lost;
// Finish may be called again).
func (r *Rotation) Finish(ctx context.Context, stored [][]byte, replacements map[string][]byte) error {
	name := Key(r.tenant, r.thread)
	b := r.begun
	// The event key stays; the value key is new: values sealed with any
	// earlier one (snapshots written meanwhile, which may hold a redacted
	// event's text) are unreadable once the older revisions are erased.
	final := &threadKey{id: b.id, key: b.key, root: b.root, events: b.events, table: map[string]tableEntry{}}
	if err := newValueKey(final); err != nil {
		return err
	}
	for id, e := range b.table {
		final.table[id] = e
	}
	for _, data := range stored {
		pm, err := events.LocatePayload(data)
		if _, ok := wellFormed(pm); err != nil || !pm.Sealed || !ok {
			continue // nothing a key opens, before or after
		}
		id := pm.Envelope.ID
		kid := pm.Value[1 : 1+idLen]
		if rep, ok := replacements[id]; ok {
			final.table[id] = tableEntry{replacement: rep}
			continue
		}
		if string(kid) == string(b.id[:]) {
			continue // sealed with the new key
		}
		if use := b.byID(kid); use != nil {
			ek := sealedKey(use, pm)
			if ek == nil {
				return fmt.Errorf("threadkey: rotation of %s/%s: event %s: %w: sealed payload of %d bytes, format %d", r.tenant, r.thread, id, ErrCorrupt, len(pm.Value), firstByte(pm.Value))
			}
			final.table[id] = tableEntry{key: ek}
			continue
		}
		if _, ok := b.table[id]; ok {
			continue // kept from an earlier rotation
		}
		return fmt.Errorf("threadkey: rotation of %s/%s: event %s is sealed with a key the rotation does not know (key id %x)", r.tenant, r.thread, id, kid)
	}
	for id := range replacements {
		if e, ok := final.table[id]; !ok || e.replacement == nil {
			return fmt.Errorf("threadkey: rotation of %s/%s: event %s to redact is not among the thread's sealed events", r.tenant, r.thread, id)
		}
	}
	rec, err := encodeRecord2(final, name)
	if err != nil {
		return err
	}
	rev, err := r.k.kv.Update(ctx, name, rec, b.rev)
	if err != nil {
		return fmt.Errorf("threadkey: finish the rotation of %s/%s: %w", r.tenant, r.thread, err)
	}
	r.k.forget(r.tenant, r.thread)
	return r.k.eraseOlder(ctx, name, rev)
}

// eraseOlder secure-deletes every revision of name's record before rev.
func (k *Keys) eraseOlder(ctx context.Context, name string, rev uint64) error {
	st, err := k.stream(ctx)
	if err != nil {
		return err
	}
	hist, err := k.kv.History(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("threadkey: history of %s: %w", name, err)
	}
	for _, e := range hist {
		if e.Revision() >= rev {
			continue
		}
		if err := st.SecureDeleteMsg(ctx, e.Revision()); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("threadkey: erase revision %d of %s: %w", e.Revision(), name, err)
		}
	}
	return nil
}

func (k *Keys) forget(tenant, thread string) {
	if k.cache != nil {
		k.last.Store(nil)
		k.cache.Remove(threadName{tenant, thread})
	}
}

// Forget drops tenant/thread's key from this Keys' cache, so that the next
// use reads the record again (after a rotation another process made).
func (k *Keys) Forget(tenant, thread string) { k.forget(tenant, thread) }

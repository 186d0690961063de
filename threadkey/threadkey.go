// Package threadkey keeps one data key per thread and encrypts with it
// every byte of a thread's content that convlog writes to NATS: event
// payloads, snapshot heads and chunks, index entries and blobs. Erasing a
// thread destroys its key ([Keys.Destroy]), which makes every copy of that
// content unreadable wherever JetStream left it: the stream's and the
// buckets' block files, KV values that later updates dropped without
// overwriting, followers and raft logs of a cluster, backups. This is
// crypto-shredding; docs/erasure-design.md says why convlog erases this
// way (JetStream overwrites only a message it deletes securely, which the
// stream's deny_delete forbids, and never a KV value an update replaced).
//
// # Keys
//
// A thread's key is 32 random bytes with a random 8-byte id, stored in the
// KV bucket "convlog_keys" (provision.Config.KeyBucket) at
// "<tenant>.<thread>" as 41 bytes: version 1, the id, the key. The bucket's
// stream is created without deny_delete (provision.Ensure), so Destroy
// deletes the value with JetStream's secure delete, which overwrites it in
// the block file on every replica, and then stores a tombstone (the one
// byte 0) in its place: a destroyed key is never created again, so no
// writer or projector racing the erasure can seal anything of the thread
// under a new key (an erased thread accepts no events, fold.CodeErased). A
// key is created by the first writer that needs it (KV create; a writer
// that loses the race reads the winner's). The id in every ciphertext tells a key of a later lifetime of
// the same thread id (after an erasure) from the one that sealed it.
//
// # Formats (schemas/README.md)
//
//   - Event payload: the envelope member "payload_sealed" (bin) replaces
//     "payload" (events.LocatePayload). Writers seal format 2:
//     0x02 || key id (8) || nonce tail (8 random bytes) ||
//     XChaCha20-Poly1305 ciphertext+tag of the payload map's msgpack
//     bytes, under the root key HMAC-SHA256(thread key, "convlog.event.v2")
//     with the 24-byte nonce: the event id's 16 bytes (a canonical UUID) ||
//     the tail, and associated data "convlog.event.v2\x00" || tenant || 0
//     || thread || 0 || event id || 0 || type. XChaCha20 derives from the
//     nonce's first 16 bytes the event's own key, HChaCha20(root key,
//     event id bytes), and opens with ChaCha20-Poly1305 under it and the
//     nonce 0^4 || tail; that key is what a rotation keeps per event. So
//     each event has a key of its own, which lets a redaction destroy one
//     event's key while keeping the others (docs/erasure-design.md), and
//     sealing or opening one runs no key schedule and no HMAC: the root
//     key is derived once per thread key.
//   - Format 1, still read: 0x01 || key id (8) || nonce (12 random bytes)
//     || AES-256-GCM ciphertext+tag, under the event key
//     HMAC-SHA256(thread key, "convlog.event.v1\x00" || event id), with
//     the associated data above under the label "convlog.event.v1\x00". An
//     event whose id is not a canonical UUID (events.Validate rejects it,
//     so no append writes one) is sealed in format 1.
//   - KV value and blob: 0xc1 (a byte msgpack never uses, so a sealed value
//     is told from a clear one by its first byte) || 0x01 || key id (8) ||
//     nonce (12) || AES-256-GCM ciphertext+tag, under HMAC-SHA256(thread
//     key, "convlog.value.v1"), with associated data "convlog.value.v1\x00"
//     || the KV key or object name, which binds a value to its place. One
//     value key serves the whole thread, so its AES-GCM state is kept with
//     the cached key.
//
// Events of type thread.erased are never sealed: the erasure marker must
// stay readable after the key is gone.
//
// # Concurrency and memory
//
// A [Keys] is safe for concurrent use. It caches up to CacheThreads keys
// (default 65,536, about 400 bytes each with their ciphers). A key
// destroyed by another process stays usable from this cache until it is
// evicted; what it unlocks is already purged from the stream and the
// buckets by the erasure that destroyed it.
package threadkey

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/lru"
)

// Errors. Match with errors.Is.
var (
	// ErrNoKey: the thread has no data key: it never had sealed content,
	// or its key was destroyed (the thread was erased; then [ErrDestroyed]
	// is wrapped too).
	ErrNoKey = errors.New("threadkey: the thread has no data key (never sealed, or erased)")
	// ErrDestroyed: the thread's key was destroyed (the thread was erased):
	// nothing can be sealed for it any more. Wraps [ErrNoKey].
	ErrDestroyed = fmt.Errorf("%w: destroyed by an erasure", ErrNoKey)
	// ErrOtherKey: a ciphertext names a key id other than the thread's
	// current key: it was sealed in an earlier lifetime of the thread id,
	// whose key an erasure destroyed.
	ErrOtherKey = errors.New("threadkey: sealed with a destroyed key of an earlier lifetime of the thread")
	// ErrCorrupt: a sealed value is malformed or fails authentication
	// (altered bytes, or moved to another key or event).
	ErrCorrupt = errors.New("threadkey: sealed value does not authenticate")
)

// DefaultCacheThreads is the default number of keys a [Keys] caches.
const DefaultCacheThreads = 65536

// CacheBytes bounds the memory of a [Keys] cache besides its count: 64
// MiB, estimated per key by [threadKey.cost] (about 1 KiB for a key:
// its record, the derived root and value keys and their AEAD states; plus the
// replacement table a key rotation leaves, which
// has no bound of its own). Least recently used keys go first.
const CacheBytes = 64 << 20

const (
	recordVersion = 1
	recordLen     = 1 + 8 + 32
	formatV1      = 0x01
	formatV2      = 0x02
	// tailLen is the random part of a format 2 nonce: the XChaCha20
	// nonce is the event id's 16 bytes and these 8.
	tailLen = 8
	// ValueMarker is the first byte of a sealed KV value or blob: 0xc1,
	// which msgpack never uses.
	ValueMarker = 0xc1
	nonceLen    = 12
	idLen       = 8
	eventLabel  = "convlog.event.v1\x00"
	eventLabel2 = "convlog.event.v2\x00"
	rootLabel   = "convlog.event.v2"
	valueLabel  = "convlog.value.v1"
)

// Keys reads, creates and destroys thread data keys and seals and opens
// content with them. Create one with [New].
type Keys struct {
	kv    jetstream.KeyValue
	js    jetstream.JetStream
	stMu  sync.Mutex
	st    jetstream.Stream // the bucket's stream, see stream
	cache *lru.Cache[threadName, *threadKey]
	// last is the key the cache took last (remember), looked at before
	// the cache: a reader or writer of one thread finds its key without
	// the cache's lock. forget clears it with the cache's entry, so it
	// is never staler than the cache.
	last atomic.Pointer[namedKey]
}

// namedKey is a cached key with its thread's name (Keys.last).
type namedKey struct {
	name threadName
	tk   *threadKey
}

// threadName is a key cache's key: comparable without building the
// record's name, which [Keys.get] would otherwise do on every use.
type threadName struct{ tenant, thread string }

// threadKey is one thread's key with its value cipher.
type threadKey struct {
	id  [idLen]byte
	key [32]byte
	// valueID and valueKey seal KV values and blobs: in a version 1 record
	// the key's id and HMAC-SHA256(key, "convlog.value.v1"); a rotation
	// gives them their own (rotate.go).
	valueID  [idLen]byte
	valueKey []byte
	value    cipher.AEAD
	rev      uint64
	// root is HMAC-SHA256(key, "convlog.event.v2") and events the
	// XChaCha20-Poly1305 AEAD under it, which seals format 2 event
	// payloads (eventKey2).
	root   [32]byte
	events cipher.AEAD
	// macs pools HMACs keyed with key (format 1's eventKey).
	macs sync.Pool
	// prev are retired keys still kept (a rotation in progress), table
	// the keys and replacements of events sealed with destroyed keys
	// (rotate.go); fetched is when the record was last read, in Unix
	// nanoseconds (cache TTL): a re-read that finds the same revision
	// moves it while other goroutines use the key.
	prev        []*threadKey
	table       map[string]tableEntry
	sealedTable []byte
	fetched     atomic.Int64
	// record is the key record's bytes as read (not copied: nothing
	// writes them), to tell a re-read of the same record.
	record []byte
}

// fetchedAt is when tk's record was last read.
func (tk *threadKey) fetchedAt() time.Time { return time.Unix(0, tk.fetched.Load()) }

// New returns a Keys on the KV bucket kv (provisioned by
// provision.Ensure with deny_delete off). cacheThreads bounds the key
// cache (0 = [DefaultCacheThreads], negative = no cache), and
// [CacheBytes] its estimated memory. It makes no
// request: the bucket's stream, which only a rotation's Finish needs
// (secure deletes), is looked up then, so a tenant-scoped NATS user
// (package tenancy), which may not read stream information, can use a
// Keys on its own threads.
func New(_ context.Context, js jetstream.JetStream, kv jetstream.KeyValue, cacheThreads int) (*Keys, error) {
	if cacheThreads == 0 {
		cacheThreads = DefaultCacheThreads
	}
	k := &Keys{kv: kv, js: js}
	if cacheThreads > 0 {
		k.cache = lru.New[threadName, *threadKey](cacheThreads, CacheBytes)
	}
	return k, nil
}

// stream returns the key bucket's stream, looked up on first use.
func (k *Keys) stream(ctx context.Context) (jetstream.Stream, error) {
	k.stMu.Lock()
	defer k.stMu.Unlock()
	if k.st != nil {
		return k.st, nil
	}
	st, err := k.js.Stream(ctx, "KV_"+k.kv.Bucket())
	if err != nil {
		return nil, fmt.Errorf("threadkey: stream of bucket %s: %w", k.kv.Bucket(), err)
	}
	k.st = st
	return st, nil
}

// CheckNewRecord reports whether rec is a key record a thread's first
// writer may create: version 1, 41 bytes (the layout in the package
// doc). The tenant service (package tenancy) creates keys for
// tenant-scoped users after this check, so that a tenant cannot store a
// tombstone, a rotation record or bytes of another shape.
func CheckNewRecord(rec []byte) error {
	if len(rec) != recordLen || rec[0] != recordVersion {
		return fmt.Errorf("%w: a new key record is %d bytes of version %d, got %d bytes of version %d", ErrCorrupt, recordLen, recordVersion, len(rec), firstByte(rec))
	}
	return nil
}

// Key returns the KV key of tenant/thread's data key.
func Key(tenant, thread string) string { return tenant + "." + thread }

// fresh returns the cached key of the thread name read less than maxAge
// ago, or nil.
func (k *Keys) fresh(name threadName, maxAge time.Duration) *threadKey {
	if maxAge <= 0 {
		return nil
	}
	if tk := k.cachedAny(name); tk != nil && time.Since(tk.fetchedAt()) < maxAge {
		return tk
	}
	return nil
}

// cachedAny returns the cached key of the thread name of any age (the
// last key taken first, then the cache), or nil. The last key is the one
// remember put in the cache last, so the two agree on a name.
func (k *Keys) cachedAny(name threadName) *threadKey {
	if k.cache == nil {
		return nil
	}
	if l := k.last.Load(); l != nil && l.name == name {
		return l.tk
	}
	if tk, ok := k.cache.Get(name); ok {
		return tk
	}
	return nil
}

// get returns the thread's key, creating it when create is set and there
// is none. A cached record is used when it was read less than maxAge ago
// (0: read it again in any case); one read again and found unchanged keeps
// its parsed key. Errors: [ErrNoKey] (not create), or
// NATS errors.
func (k *Keys) get(ctx context.Context, tenant, thread string, create bool, maxAge time.Duration) (*threadKey, error) {
	cached := threadName{tenant, thread}
	if tk := k.fresh(cached, maxAge); tk != nil {
		return tk, nil
	}
	// The names may alias an event's bytes (events.LocatePayloadNoCopy):
	// the cache keeps copies.
	tenant, thread = strings.Clone(tenant), strings.Clone(thread)
	cached = threadName{tenant, thread}
	name := Key(tenant, thread)
	for attempt := 0; ; attempt++ {
		e, err := k.kv.Get(ctx, name)
		if err == nil && isTombstone(e.Value()) {
			return nil, fmt.Errorf("%w: %s/%s", ErrDestroyed, tenant, thread)
		}
		if err == nil {
			if old := k.cachedAny(cached); old != nil && old.rev == e.Revision() && bytes.Equal(old.record, e.Value()) {
				// The same record (a KV revision is the stream sequence of
				// one write; the bytes tell a bucket made again, whose
				// revisions start over): keep the key parsed from it, its
				// ciphers and table, instead of deriving them again, and
				// count it as read now.
				old.fetched.Store(time.Now().UnixNano())
				return old, nil
			}
			tk, err := parseRecord(e.Value(), e.Revision())
			if err == nil {
				err = tk.openTable(name)
			}
			if err != nil {
				return nil, fmt.Errorf("threadkey: key of %s/%s: %w", tenant, thread, err)
			}
			k.remember(cached, tk)
			return tk, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("threadkey: read key of %s/%s: %w", tenant, thread, err)
		}
		if !create {
			return nil, fmt.Errorf("%w: %s/%s", ErrNoKey, tenant, thread)
		}
		if attempt > 0 {
			return nil, fmt.Errorf("threadkey: key of %s/%s created and gone again", tenant, thread)
		}
		var rec [recordLen]byte
		rec[0] = recordVersion
		if _, err := randRead(rec[1:]); err != nil {
			return nil, fmt.Errorf("threadkey: random key: %w", err)
		}
		rev, err := k.kv.Create(ctx, name, rec[:])
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // another writer created it first: read theirs
		}
		if err != nil {
			return nil, fmt.Errorf("threadkey: create key of %s/%s: %w", tenant, thread, err)
		}
		tk, err := parseRecord(rec[:], rev)
		if err != nil {
			return nil, err
		}
		k.remember(cached, tk)
		return tk, nil
	}
}

func (k *Keys) remember(name threadName, tk *threadKey) {
	tk.fetched.Store(time.Now().UnixNano())
	if k.cache != nil {
		k.cache.Put(name, tk, tk.cost())
		k.last.Store(&namedKey{name, tk})
	}
}

// cost estimates the memory of a cached key in bytes (see CacheBytes).
func (tk *threadKey) cost() int64 {
	n := 1024 + len(tk.sealedTable) + len(tk.record)
	for id, e := range tk.table {
		n += 64 + len(id) + len(e.key) + len(e.replacement)
	}
	for _, p := range tk.prev {
		n += int(p.cost())
	}
	return int64(n)
}

// tombstone is the record of a destroyed key.
var tombstone = []byte{0}

func isTombstone(b []byte) bool { return len(b) == 1 && b[0] == 0 }

// parseRecord decodes a stored key record (version 1, or 2 from a
// rotation: rotate.go).
func parseRecord(b []byte, rev uint64) (*threadKey, error) {
	tk, err := parseRecordOf(b, rev)
	if err != nil {
		return nil, err
	}
	tk.record = b
	return tk, nil
}

// parseRecordOf is parseRecord without keeping b.
func parseRecordOf(b []byte, rev uint64) (*threadKey, error) {
	if len(b) > 0 && b[0] == recordVersion2 {
		return parseRecord2(b, rev)
	}
	if len(b) != recordLen || b[0] != recordVersion {
		return nil, fmt.Errorf("%w: key record of %d bytes, version %d (want %d bytes, version %d)", ErrCorrupt, len(b), firstByte(b), recordLen, recordVersion)
	}
	tk := &threadKey{rev: rev}
	copy(tk.id[:], b[1:1+idLen])
	copy(tk.key[:], b[1+idLen:])
	tk.setEventRoot()
	tk.valueID = tk.id
	tk.setValueKey(derive(tk.key[:], []byte(valueLabel)))
	return tk, nil
}

// setEventRoot derives from tk.key the root key of format 2 events.
func (tk *threadKey) setEventRoot() {
	copy(tk.root[:], derive(tk.key[:], []byte(rootLabel)))
	a, err := chacha20poly1305.NewX(tk.root[:])
	if err != nil {
		panic(err) // 32-byte key: cannot fail
	}
	tk.events = a
}

// setValueKey sets the key KV values are sealed with.
func (tk *threadKey) setValueKey(k []byte) {
	tk.valueKey = k
	tk.value = newAEAD(k)
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// derive is HMAC-SHA256(key, label).
func derive(key, label []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(label)
	return h.Sum(nil)
}

func newAEAD(key []byte) cipher.AEAD {
	b, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // 32-byte key: cannot fail
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return g
}

// Destroy deletes tenant/thread's data key with JetStream's secure delete
// (the value is overwritten on disk on every replica), stores the
// tombstone in its place, and drops the key from this Keys' cache. It
// reports whether there was a key. Everything sealed with it is
// unreadable from then on, everywhere, and no key is created for the
// thread again ([ErrDestroyed]). Idempotent; a thread that never had a
// key gets the tombstone too.
func (k *Keys) Destroy(ctx context.Context, tenant, thread string) (bool, error) {
	name := Key(tenant, thread)
	destroyed := false
	// Dropped from the cache before the record is read and after the
	// tombstone is written, so that no use here races the destruction.
	k.forget(tenant, thread)
	defer k.forget(tenant, thread)
	for attempt := 0; attempt < 10; attempt++ {
		e, err := k.kv.Get(ctx, name)
		switch {
		case err == nil && isTombstone(e.Value()):
			return destroyed, nil
		case err == nil:
			// Every revision: a rotation keeps up to three.
			if err := k.eraseOlder(ctx, name, e.Revision()+1); err != nil {
				return destroyed, fmt.Errorf("threadkey: destroy key of %s/%s: %w", tenant, thread, err)
			}
			destroyed = true
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return destroyed, fmt.Errorf("threadkey: read key of %s/%s: %w", tenant, thread, err)
		}
		_, err = k.kv.Create(ctx, name, tombstone)
		if err == nil {
			return destroyed, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return destroyed, fmt.Errorf("threadkey: tombstone for key of %s/%s: %w", tenant, thread, err)
		}
		// A writer created a key between the delete and the tombstone:
		// destroy that one too.
	}
	return destroyed, fmt.Errorf("threadkey: destroy key of %s/%s: keys kept being created", tenant, thread)
}

// Sealable reports whether events of type t are sealed: all but
// thread.erased and event.redacted, which hold no content and must be
// readable by auditors without keys.
func Sealable(t events.Type) bool { return t != events.TypeErased && t != events.TypeRedacted }

// SealEvent returns data (one encoded event) with its payload sealed
// under the thread's key, creating the key if the thread has none. An
// event already sealed, or of a type that is never sealed, is returned
// unchanged. Errors wrap events.ErrDecode for bytes that are not an
// event, or are NATS errors reading or creating the key.
func (k *Keys) SealEvent(ctx context.Context, data []byte) ([]byte, error) {
	pm, err := events.LocatePayloadNoCopy(data)
	if err != nil {
		return nil, err
	}
	return k.sealLocated(ctx, data, pm)
}

// SealLocated is [Keys.SealEvent] of data whose payload member pm the
// caller has from encoding it (events.MarshalAppendLocated), so that the
// envelope is not read again: the same result, the same errors. pm must
// be what events.LocatePayload(data) returns (the envelope's ID, Type,
// Tenant and Thread, the member's place and value); a pm that plainly does
// not fit data (no member key at pm.Start, or Value not ending at pm.End in
// data's memory) is an error wrapping events.ErrDecode.
func (k *Keys) SealLocated(ctx context.Context, data []byte, pm events.PayloadMember) ([]byte, error) {
	if !placed(data, pm) {
		return nil, fmt.Errorf("%w: payload member [%d, %d) of event %s is not in its %d bytes", events.ErrDecode, pm.Start, pm.End, pm.Envelope.ID, len(data))
	}
	return k.sealLocated(ctx, data, pm)
}

// placed reports whether pm's member lies in data: a member "payload" (or
// "payload_sealed" when pm.Sealed) at pm.Start, its value ending at pm.End.
func placed(data []byte, pm events.PayloadMember) bool {
	key := payloadMember
	if pm.Sealed {
		key = sealedMember
	}
	if pm.Start < 0 || pm.End > len(data) || pm.End-pm.Start < len(key)+len(pm.Value) ||
		string(data[pm.Start:pm.Start+len(key)]) != key || len(pm.Value) == 0 {
		return false
	}
	return &data[pm.End-1] == &pm.Value[len(pm.Value)-1]
}

// sealLocated is SealLocated without the check of pm.
func (k *Keys) sealLocated(ctx context.Context, data []byte, pm events.PayloadMember) ([]byte, error) {
	env := pm.Envelope
	if pm.Sealed || !Sealable(env.Type) {
		return data, nil
	}
	tk, err := k.get(ctx, env.Tenant, env.Thread, true, KeyTTL)
	if err != nil {
		return nil, err
	}
	return sealEvent(tk, data, pm)
}

// sealEvent seals the payload pm of data with tk in format 2, or in
// format 1 when the event id is not a canonical UUID (events.Validate
// rejects such an event, so no append writes one).
func sealEvent(tk *threadKey, data []byte, pm events.PayloadMember) ([]byte, error) {
	u, ok := uuidBytes(pm.Envelope.ID)
	if !ok {
		return sealEventV1(tk, data, pm)
	}
	// Sealed straight into the stored encoding: the envelope before the
	// member, "payload_sealed", the bin header, the box, the envelope
	// after it. The associated data and the nonce are built in a pooled
	// scratch buffer (warm in the cache, where the new result's memory is
	// not), so that sealing allocates only its result.
	env := pm.Envelope
	box := 1 + idLen + tailLen + len(pm.Value) + 16
	n := pm.Start + len(sealedMember) + binHeaderLen(box) + box + len(data) - pm.End
	sp := getScratch(adLen(eventLabel2, env) + 24)
	defer putScratch(sp)
	ad := appendAD((*sp)[:0], eventLabel2, env)
	out := make([]byte, 0, n)
	out = append(out, data[:pm.Start]...)
	out = append(out, sealedMember...)
	out = appendBinHeader(out, box)
	out = append(out, formatV2)
	out = append(out, tk.id[:]...)
	tail := out[len(out) : len(out)+tailLen]
	if _, err := randRead(tail); err != nil {
		return nil, fmt.Errorf("threadkey: random nonce: %w", err)
	}
	out = out[:len(out)+tailLen]
	nonce := append(append(ad[len(ad):], u[:]...), tail...)
	out = tk.events.Seal(out, nonce, pm.Value, ad)
	return append(out, data[pm.End:]...), nil
}

// sealedMember is the msgpack fixstr "payload_sealed" (events.LocatePayload),
// payloadMember the fixstr "payload".
const (
	sealedMember  = "\xaepayload_sealed"
	payloadMember = "\xa7payload"
)

// binHeaderLen is the length of the msgpack bin header of n bytes.
func binHeaderLen(n int) int {
	switch {
	case n < 1<<8:
		return 2
	case n < 1<<16:
		return 3
	}
	return 5
}

// appendBinHeader appends the msgpack bin header of n bytes (as
// events.ReplacePayload writes it).
func appendBinHeader(b []byte, n int) []byte {
	switch {
	case n < 1<<8:
		return append(b, 0xc4, byte(n))
	case n < 1<<16:
		return binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
}

// sealEventV1 seals the payload pm of data with tk in format 1.
func sealEventV1(tk *threadKey, data []byte, pm events.PayloadMember) ([]byte, error) {
	out := make([]byte, 1+idLen+nonceLen, 1+idLen+nonceLen+len(pm.Value)+16)
	out[0] = formatV1
	copy(out[1:], tk.id[:])
	if _, err := randRead(out[1+idLen:]); err != nil {
		return nil, fmt.Errorf("threadkey: random nonce: %w", err)
	}
	g := newAEAD(eventKey(tk, pm.Envelope.ID))
	out = g.Seal(out, out[1+idLen:], pm.Value, appendAD(nil, eventLabel, pm.Envelope))
	return events.ReplacePayload(data, pm, out, true), nil
}

// randRead fills nonces and new keys (crypto/rand; the test vector's
// generator replaces it).
var randRead = rand.Read

// OpenEvent returns data with its payload opened, or data itself when it
// is not sealed (or is not an event: the decoder reports that). Errors:
// [ErrNoKey] or [ErrOtherKey] when the key is gone (erased), [ErrCorrupt]
// when the ciphertext does not authenticate, NATS errors reading the key.
// On an error the caller keeps data as stored; events.Unmarshal of it
// gives the envelope and events.ErrSealed.
func (k *Keys) OpenEvent(ctx context.Context, data []byte) ([]byte, error) {
	return k.openEvent(ctx, data, false)
}

// openEvent is OpenEvent, over data's own bytes when inPlace
// (OpenStoredInPlace).
func (k *Keys) openEvent(ctx context.Context, data []byte, inPlace bool) ([]byte, error) {
	if !mayBeSealed(data) {
		return data, nil
	}
	pm, err := events.LocatePayloadNoCopy(data)
	if err != nil || !pm.Sealed {
		return data, nil
	}
	env := pm.Envelope
	u, ok := wellFormed(pm)
	if !ok {
		return nil, fmt.Errorf("%w: event %s: sealed payload of %d bytes, format %d", ErrCorrupt, env.ID, len(pm.Value), firstByte(pm.Value))
	}
	tk, err := k.get(ctx, env.Tenant, env.Thread, false, KeyTTL)
	if err != nil {
		return nil, err
	}
	return openEventID(tk, data, pm, u, inPlace)
}

// wellFormed reports whether the sealed payload pm is long enough for its
// format, and for format 2 whether the event id is a canonical UUID,
// whose bytes it returns.
func wellFormed(pm events.PayloadMember) (u [16]byte, ok bool) {
	v := pm.Value
	switch firstByte(v) {
	case formatV1:
		return u, len(v) >= 1+idLen+nonceLen+16
	case formatV2:
		u, ok = uuidBytes(pm.Envelope.ID)
		return u, ok && len(v) >= 1+idLen+tailLen+16
	}
	return u, false
}

// openEvent opens the sealed payload pm of data, checked by wellFormed,
// with tk.
func openEvent(tk *threadKey, data []byte, pm events.PayloadMember) ([]byte, error) {
	u, _ := uuidBytes(pm.Envelope.ID)
	return openEventID(tk, data, pm, u, false)
}

// openEventID is openEvent with the bytes u of the event id (format 2),
// which wellFormed parsed; inPlace: the result is written over data (see
// OpenStoredInPlace), which is left unchanged on an error.
func openEventID(tk *threadKey, data []byte, pm events.PayloadMember, u [16]byte, inPlace bool) ([]byte, error) {
	env, v := pm.Envelope, pm.Value
	use := tk.byID(v[1 : 1+idLen])
	e, inTable := tk.table[env.ID]
	switch {
	case use == nil && inTable && e.replacement != nil:
		// Redacted: its key is destroyed; it reads as its replacement.
		return events.ReplacePayload(data, pm, e.replacement, false), nil
	case use == nil && !inTable:
		return nil, fmt.Errorf("%w: event %s of %s/%s", ErrOtherKey, env.ID, env.Tenant, env.Thread)
	}
	label := eventLabel2
	if v[0] == formatV1 {
		label = eventLabel
	}
	// Opened straight into the clear encoding, which is shorter than
	// data: the envelope before the member, "payload", the plaintext, the
	// envelope after it. The associated data and the nonce are built in a
	// pooled scratch buffer, which is warm in the cache where a new
	// result's memory is not, so that opening allocates only its result;
	// in place, the plaintext goes there too and is copied over data once
	// it authenticates.
	adn := adLen(label, env) + 24
	n := adn
	if inPlace {
		n += len(v)
	}
	sp := getScratch(n)
	defer putScratch(sp)
	scratch := (*sp)[:0]
	ad := appendAD(scratch, label, env)
	g, nonce, ct, err := eventAEAD(use, e, env, v, u, ad[len(ad):])
	if err != nil {
		return nil, err
	}
	if inPlace {
		plain, err := g.Open(scratch[adn:adn], nonce, ct, ad)
		if err != nil {
			return nil, fmt.Errorf("%w: event %s of %s/%s", ErrCorrupt, env.ID, env.Tenant, env.Thread)
		}
		// env's strings alias data: not used from here on.
		n := pm.Start
		data[n] = 0xa0 | byte(len("payload"))
		n++
		n += copy(data[n:], "payload")
		n += copy(data[n:], plain)
		n += copy(data[n:], data[pm.End:])
		return data[:n:n], nil
	}
	out := make([]byte, 0, len(data))
	out = append(out, data[:pm.Start]...)
	out = append(out, 0xa0|byte(len("payload")))
	out = append(out, "payload"...)
	out, err = g.Open(out, nonce, ct, ad)
	if err != nil {
		return nil, fmt.Errorf("%w: event %s of %s/%s", ErrCorrupt, env.ID, env.Tenant, env.Thread)
	}
	return append(out, data[pm.End:]...), nil
}

// eventAEAD returns the AEAD, nonce and ciphertext that open the sealed
// payload v of env (u: the event id's bytes): format 1 under the event's
// key (derived from use, or e's from the table), format 2 under use's
// root key, or ChaCha20-Poly1305 under e's table key. A nonce it builds
// is appended to buf. Errors: [ErrCorrupt] for a table key of the wrong
// size.
func eventAEAD(use *threadKey, e tableEntry, env events.Event, v []byte, u [16]byte, buf []byte) (g cipher.AEAD, nonce, ct []byte, err error) {
	switch {
	case v[0] == formatV1:
		ek := e.key
		if use != nil {
			ek = eventKey(use, env.ID)
		}
		return newAEAD(ek), v[1+idLen : 1+idLen+nonceLen], v[1+idLen+nonceLen:], nil
	case use != nil:
		// XChaCha20-Poly1305 under the root key; its nonce is the event
		// id and the random tail.
		return use.events, append(append(buf, u[:]...), v[1+idLen:1+idLen+tailLen]...), v[1+idLen+tailLen:], nil
	}
	// The event's own key from the table: ChaCha20-Poly1305 under it
	// with the nonce 0^4 || tail, which is what XChaCha20-Poly1305
	// does after deriving that key.
	c, err := chacha20poly1305.New(e.key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: event %s of %s/%s: table key of %d bytes", ErrCorrupt, env.ID, env.Tenant, env.Thread, len(e.key))
	}
	return c, append(append(buf, 0, 0, 0, 0), v[1+idLen:1+idLen+tailLen]...), v[1+idLen+tailLen:], nil
}

// scratches pools the buffers of sealing and opening an event (its
// associated data and nonce; opening in place, its plaintext too);
// maxScratch is the largest one kept, so that a rare large
// event does not pin its buffer.
var scratches = sync.Pool{New: func() any { return new([]byte) }}

const maxScratch = 64 << 10

// getScratch returns a pooled buffer of capacity at least n.
func getScratch(n int) *[]byte {
	sp := scratches.Get().(*[]byte)
	if cap(*sp) < n {
		*sp = make([]byte, 0, n)
	}
	return sp
}

func putScratch(sp *[]byte) {
	if cap(*sp) <= maxScratch {
		scratches.Put(sp)
	}
}

// OpenStored is OpenEvent for a reader of stored events: an event whose
// key is gone ([ErrNoKey], [ErrOtherKey]: erased, or redacted without a
// replacement) or whose ciphertext does not authenticate ([ErrCorrupt]) is
// returned as stored, and decodes with the envelope and events.ErrSealed
// (the fold records it as undecodable). The error is only for a key that
// could not be read (NATS), which the caller must not take as the event's
// fate: it retries or fails the read.
func (k *Keys) OpenStored(ctx context.Context, data []byte) ([]byte, error) {
	opened, err := k.OpenEvent(ctx, data)
	if errors.Is(err, ErrNoKey) || errors.Is(err, ErrOtherKey) || errors.Is(err, ErrCorrupt) {
		return data, nil
	}
	return opened, err
}

// OpenStoredInPlace is [Keys.OpenStored] for a caller that does not keep
// the sealed form (a reader of messages that nats.go copied for it): the
// opened event, which is shorter, is written over data's own bytes and
// returned as a prefix of data (its capacity cut to its length), so that
// opening allocates nothing. data must not be in use by anyone else: its
// bytes change. On any error, and for an event that is not sealed or whose
// key is gone, data is returned unchanged, as OpenStored returns it.
func (k *Keys) OpenStoredInPlace(ctx context.Context, data []byte) ([]byte, error) {
	opened, err := k.openEvent(ctx, data, true)
	if errors.Is(err, ErrNoKey) || errors.Is(err, ErrOtherKey) || errors.Is(err, ErrCorrupt) {
		return data, nil
	}
	return opened, err
}

// mayBeSealed is a cheap filter: a sealed event holds the member name
// "payload_sealed". Most clear events are rejected without parsing.
func mayBeSealed(data []byte) bool {
	return bytes.Contains(data, []byte(sealedMember))
}

// eventKey is the format 1 event key, HMAC-SHA256(tk.key, eventLabel ||
// id). The HMAC keyed with tk.key is pooled per key (hmac.Reset restores
// the keyed state without hashing the key again).
func eventKey(tk *threadKey, id string) []byte {
	h, _ := tk.macs.Get().(hash.Hash)
	if h == nil {
		h = hmac.New(sha256.New, tk.key[:])
	} else {
		h.Reset()
	}
	h.Write([]byte(eventLabel))
	h.Write([]byte(id))
	k := h.Sum(make([]byte, 0, sha256.Size))
	tk.macs.Put(h)
	return k
}

// eventKey2 is the format 2 event key, HChaCha20(tk.root, the 16 bytes
// of the event id), the key XChaCha20-Poly1305 derives from the nonce's
// first 16 bytes. ok is false for an id that is not a canonical UUID.
func eventKey2(tk *threadKey, id string) (key []byte, ok bool) {
	u, ok := uuidBytes(id)
	if !ok {
		return nil, false
	}
	k, err := chacha20.HChaCha20(tk.root[:], u[:])
	if err != nil {
		panic(err) // fixed sizes: cannot fail
	}
	return k, true
}

// sealedKey returns the key that opens the sealed payload pm with tk,
// of its format (eventKey or eventKey2), which a rotation keeps in its
// table; nil for a payload that is not well formed.
func sealedKey(tk *threadKey, pm events.PayloadMember) []byte {
	if _, ok := wellFormed(pm); !ok {
		return nil
	}
	if pm.Value[0] == formatV1 {
		return eventKey(tk, pm.Envelope.ID)
	}
	k, _ := eventKey2(tk, pm.Envelope.ID)
	return k
}

// uuidBytes returns the 16 bytes of id, a UUID in canonical lower-case
// form (8-4-4-4-12 hex digits, as events.Validate requires), or ok false.
func uuidBytes(id string) (u [16]byte, ok bool) {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return u, false
	}
	var bad byte
	for j, i := range uuidDigits {
		hi, lo := lowerHex[id[i]], lowerHex[id[i+1]]
		bad |= hi | lo
		u[j] = hi<<4 | lo&0x0f
	}
	return u, bad&0xf0 == 0
}

// uuidDigits are the offsets of the 16 hex digit pairs in a canonical UUID.
var uuidDigits = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// lowerHex is the value of each byte as a lower-case hex digit, 0xff for
// any other byte.
var lowerHex = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		default:
			t[c] = 0xff
		}
	}
	return t
}()

// appendAD appends to b the associated data of a sealed event: label ||
// tenant || 0 || thread || 0 || id || 0 || type; adLen is its length.
func appendAD(b []byte, label string, env events.Event) []byte {
	b = append(b, label...)
	b = append(b, env.Tenant...)
	b = append(b, 0)
	b = append(b, env.Thread...)
	b = append(b, 0)
	b = append(b, env.ID...)
	b = append(b, 0)
	return append(b, env.Type...)
}

func adLen(label string, env events.Event) int {
	return len(label) + len(env.Tenant) + len(env.Thread) + len(env.ID) + len(env.Type) + 3
}

// Sealed reports whether a KV value or blob is sealed (starts with
// [ValueMarker]).
func Sealed(value []byte) bool { return len(value) > 0 && value[0] == ValueMarker }

// SealValue seals plain, the value of KV key or object name place of
// tenant/thread, creating the thread's key if it has none. Errors are
// NATS errors reading or creating the key.
func (k *Keys) SealValue(ctx context.Context, tenant, thread, place string, plain []byte) ([]byte, error) {
	tk, err := k.get(ctx, tenant, thread, true, KeyTTL)
	if err != nil {
		return nil, err
	}
	return sealValue(tk, place, plain)
}

// sealValue seals plain, the value at place, with tk.
func sealValue(tk *threadKey, place string, plain []byte) ([]byte, error) {
	out := make([]byte, 2+idLen+nonceLen, 2+idLen+nonceLen+len(plain)+16)
	out[0], out[1] = ValueMarker, formatV1
	copy(out[2:], tk.valueID[:])
	if _, err := randRead(out[2+idLen:]); err != nil {
		return nil, fmt.Errorf("threadkey: random nonce: %w", err)
	}
	return tk.value.Seal(out, out[2+idLen:], plain, valueAD(place)), nil
}

// OpenValue returns the plain bytes of a value SealValue sealed for the
// same tenant/thread and place, or value itself when it is not sealed.
// value is not changed. Errors: [ErrNoKey] or [ErrOtherKey] (erased),
// [ErrCorrupt], NATS errors.
func (k *Keys) OpenValue(ctx context.Context, tenant, thread, place string, value []byte) ([]byte, error) {
	return k.openValue(ctx, tenant, thread, place, value, false)
}

// OpenValueInPlace is [Keys.OpenValue] for a caller that does not keep
// the sealed form (a snapshot chunk read to be decoded): it decrypts into
// value's own bytes, overwriting them also when it fails, and returns a
// slice of value, so that opening allocates no copy of the plaintext.
// Errors as OpenValue's.
func (k *Keys) OpenValueInPlace(ctx context.Context, tenant, thread, place string, value []byte) ([]byte, error) {
	return k.openValue(ctx, tenant, thread, place, value, true)
}

func (k *Keys) openValue(ctx context.Context, tenant, thread, place string, value []byte, inPlace bool) ([]byte, error) {
	if !Sealed(value) {
		return value, nil
	}
	if len(value) < 2+idLen+nonceLen+16 || value[1] != formatV1 {
		return nil, fmt.Errorf("%w: value %s: %d bytes, format %d", ErrCorrupt, place, len(value), value[1%len(value)])
	}
	// A value opens with a cached record of any age that holds its key:
	// values sealed under a retired value key are purged by the rotation
	// (snapshots are written again), so only a record that does not know
	// the key is read again. Events keep the KeyTTL bound (OpenEvent): a
	// redacted event's old key must stop opening it everywhere.
	tk, err := k.get(ctx, tenant, thread, false, time.Duration(math.MaxInt64))
	if err != nil {
		return nil, err
	}
	if tk.byValueID(value[2:2+idLen]) == nil {
		if tk, err = k.get(ctx, tenant, thread, false, 0); err != nil {
			return nil, err
		}
	}
	if inPlace {
		return openValueInto(tk, place, value, value[2+idLen+nonceLen:2+idLen+nonceLen])
	}
	return openValue(tk, place, value)
}

// openValue opens value, sealed at place, with tk, into a new buffer.
func openValue(tk *threadKey, place string, value []byte) ([]byte, error) {
	return openValueInto(tk, place, value, nil)
}

// openValueInto opens value, sealed at place, with tk, appending the
// plaintext to dst: nil, or the ciphertext's start in value (in place).
func openValueInto(tk *threadKey, place string, value, dst []byte) ([]byte, error) {
	use := tk.byValueID(value[2 : 2+idLen])
	if use == nil {
		return nil, fmt.Errorf("%w: value %s", ErrOtherKey, place)
	}
	plain, err := use.value.Open(dst, value[2+idLen:2+idLen+nonceLen], value[2+idLen+nonceLen:], valueAD(place))
	if err != nil {
		return nil, fmt.Errorf("%w: value %s", ErrCorrupt, place)
	}
	return plain, nil
}

func valueAD(place string) []byte {
	ad := make([]byte, 0, len(valueLabel)+1+len(place))
	ad = append(ad, valueLabel...)
	ad = append(ad, 0)
	return append(ad, place...)
}

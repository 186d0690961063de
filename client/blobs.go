package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
)

// Blobs are the values larger than one event can hold (LangGraph
// checkpoints grow past the 1 MiB a NATS message carries; a thread's
// key-value state is capped at fold.MaxStateBytes). A blob is a named byte
// value of a thread, stored in the JetStream object store
// (provision.Config.BlobBucket, default "convlog_blobs"; nats.go's object
// store chunks it into 128 KiB messages and checks its SHA-256 digest on
// read) under <tenant>/<thread>/<lifetime>/<name>, so that a thread id
// used again after a soft delete (a new lifetime) starts with no blobs,
// while the earlier lifetime's stay readable for audit until the thread is
// erased. Blobs are not events: write a state key or an event that names
// the blob when the log must record it.

// MaxBlobNameLen is the longest blob name accepted, in bytes.
const MaxBlobNameLen = 512

// DefaultMaxBlobBytes is the default size limit of one blob: 32 MiB.
const DefaultMaxBlobBytes = 32 << 20

// ErrBlobNotFound is returned (wrapped) for a blob the thread's current
// lifetime does not have.
var ErrBlobNotFound = errors.New("client: blob not found")

// ErrBlobTooLarge is returned (wrapped in a *BlobTooLargeError) when a
// blob is larger than the limit it is written under.
var ErrBlobTooLarge = errors.New("client: blob too large")

// BlobTooLargeError says how large a blob may be.
type BlobTooLargeError struct {
	Name  string
	Limit int64 // bytes
}

// Error implements error.
func (e *BlobTooLargeError) Error() string {
	return fmt.Sprintf("client: blob %q is larger than the limit of %d bytes", e.Name, e.Limit)
}

// Unwrap returns [ErrBlobTooLarge].
func (e *BlobTooLargeError) Unwrap() error { return ErrBlobTooLarge }

// BlobInfo describes a stored blob.
type BlobInfo struct {
	// Name is the blob's name within its thread.
	Name string `json:"name"`
	// Size in bytes (of the content, not of its sealed form).
	Size uint64 `json:"size"`
	// Digest is "SHA-256=" and the base64url digest of the bytes as stored
	// (the object store's form): of the sealed bytes for a sealed blob
	// (blobs_seal.go), so a tag that changes with every write rather than
	// a digest of the content.
	Digest string `json:"digest"`
	// ContentType as written ("" when none was given).
	ContentType string `json:"content_type,omitempty"`
	// Lifetime is the thread lifetime the blob belongs to.
	Lifetime int `json:"lifetime"`
	// Modified is when it was written (UTC).
	Modified time.Time `json:"modified"`
}

// ValidateBlobName checks a blob name: 1..[MaxBlobNameLen] bytes of valid
// UTF-8 without control characters. Errors name what is wrong.
func ValidateBlobName(name string) error {
	switch {
	case name == "":
		return errors.New("blob name must not be empty")
	case len(name) > MaxBlobNameLen:
		return fmt.Errorf("blob name is %d bytes, the limit is %d", len(name), MaxBlobNameLen)
	case !utf8.ValidString(name):
		return errors.New("blob name is not valid UTF-8")
	}
	for i, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("blob name has the control character %U at byte %d", r, i)
		}
	}
	return nil
}

// blobStore opens the object store on first use (a client that did not
// provision may run against a deployment that predates blobs: the error
// names the bucket).
type blobStore struct {
	mu sync.Mutex
	os jetstream.ObjectStore
}

func (c *Client) blobStore(ctx context.Context) (jetstream.ObjectStore, error) {
	if err := c.scopedErr("blobs"); err != nil {
		return nil, err
	}
	c.blobs.mu.Lock()
	defer c.blobs.mu.Unlock()
	if c.blobs.os != nil {
		return c.blobs.os, nil
	}
	os, err := c.js.ObjectStore(ctx, c.cfg.Resources.BlobBucket)
	if err != nil {
		return nil, fmt.Errorf("client: object store %s: %w (provision it with `agentd serve` or Config.Provision)", c.cfg.Resources.BlobBucket, err)
	}
	c.blobs.os = os
	return os, nil
}

// blobPrefix is the object-name prefix of a thread's blobs in lifetime
// (lifetime < 0: every lifetime).
func blobPrefix(tenant, thread string, lifetime int) string {
	p := tenant + "/" + thread + "/"
	if lifetime >= 0 {
		p += strconv.Itoa(lifetime) + "/"
	}
	return p
}

// blobLifetime returns the current lifetime of a thread that can be
// written (exists, not deleted or erased).
func (c *Client) blobLifetime(ctx context.Context, tenant, thread string) (int, error) {
	if err := events.ValidateTenant(tenant); err != nil {
		return 0, err
	}
	if err := events.ValidateThreadID(thread); err != nil {
		return 0, err
	}
	s, err := c.headState(ctx, tenant, thread)
	if err != nil {
		return 0, err
	}
	if err := notFound(s); err != nil {
		return 0, err
	}
	return s.Lifetime, nil
}

// PutBlob stores the bytes of r as the blob name of tenant/thread's
// current lifetime, replacing a blob of that name. At most limit bytes are
// read (limit <= 0 means [DefaultMaxBlobBytes]); a longer r stores nothing
// and returns a *BlobTooLargeError. contentType is kept for readers.
// Concurrent writers of one name: the last complete write wins (each
// write is whole: a reader never sees a mix).
//
// Errors: *events.IDError for bad ids; an error naming a bad name;
// *NotFoundError when the thread does not exist or is deleted or erased;
// *BlobTooLargeError; object store errors.
func (c *Client) PutBlob(ctx context.Context, tenant, thread, name, contentType string, r io.Reader, limit int64) (BlobInfo, error) {
	if p := c.route(tenant, thread); p != c {
		return p.PutBlob(ctx, tenant, thread, name, contentType, r, limit)
	}
	if err := c.check(); err != nil {
		return BlobInfo{}, err
	}
	if err := ValidateBlobName(name); err != nil {
		return BlobInfo{}, fmt.Errorf("client: %w", err)
	}
	if limit <= 0 {
		limit = DefaultMaxBlobBytes
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	lifetime, err := c.blobLifetime(ctx, tenant, thread)
	if err != nil {
		return BlobInfo{}, err
	}
	os, err := c.blobStore(ctx)
	if err != nil {
		return BlobInfo{}, err
	}
	lr := &limitedReader{r: r, left: limit}
	meta := jetstream.ObjectMeta{Name: blobPrefix(tenant, thread, lifetime) + name, Headers: nats.Header{}}
	if contentType != "" {
		meta.Headers.Set("Content-Type", contentType)
	}
	var body io.Reader = lr
	if !c.cfg.ClearPayloads {
		meta.Headers.Set(sealedBlobHeader, "1")
		body = &sealingReader{ctx: ctx, keys: c.keys, tenant: tenant, thread: thread, name: meta.Name, r: lr}
	}
	info, err := os.Put(ctx, meta, body)
	if lr.over {
		// nats.go purges the chunks of a Put whose reader fails; the
		// name keeps its previous value, if any.
		return BlobInfo{}, &BlobTooLargeError{Name: name, Limit: limit}
	}
	if err != nil {
		return BlobInfo{}, fmt.Errorf("client: blob %q of %s/%s: %w", name, tenant, thread, err)
	}
	return blobInfoOf(info, name, lifetime), nil
}

// errOverLimit is what limitedReader returns past its limit.
var errOverLimit = errors.New("over the limit")

// limitedReader reads at most left bytes and fails (over = true) when r
// holds more.
type limitedReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more says whether r ends exactly at the limit.
		var b [1]byte
		n, err := l.r.Read(b[:])
		if n > 0 {
			l.over = true
			return 0, errOverLimit
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// GetBlob opens the blob name of tenant/thread's current lifetime; the
// caller reads and closes it (the object store checks the digest at the
// end of the read: a read error then means the bytes were corrupted).
// Errors: as PutBlob; [ErrBlobNotFound] (wrapped) for a name the lifetime
// does not have.
func (c *Client) GetBlob(ctx context.Context, tenant, thread, name string) (BlobInfo, io.ReadCloser, error) {
	if p := c.route(tenant, thread); p != c {
		return p.GetBlob(ctx, tenant, thread, name)
	}
	if err := c.check(); err != nil {
		return BlobInfo{}, nil, err
	}
	if err := ValidateBlobName(name); err != nil {
		return BlobInfo{}, nil, fmt.Errorf("client: %w", err)
	}
	lifetime, err := c.blobLifetime(ctx, tenant, thread)
	if err != nil {
		return BlobInfo{}, nil, err
	}
	os, err := c.blobStore(ctx)
	if err != nil {
		return BlobInfo{}, nil, err
	}
	res, err := os.Get(ctx, blobPrefix(tenant, thread, lifetime)+name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return BlobInfo{}, nil, fmt.Errorf("%w: %q of %s/%s", ErrBlobNotFound, name, tenant, thread)
	}
	if err != nil {
		return BlobInfo{}, nil, fmt.Errorf("client: blob %q of %s/%s: %w", name, tenant, thread, err)
	}
	info, err := res.Info()
	if err != nil {
		res.Close()
		return BlobInfo{}, nil, fmt.Errorf("client: blob %q of %s/%s: %w", name, tenant, thread, err)
	}
	var body io.ReadCloser = res
	if info.Headers.Get(sealedBlobHeader) != "" {
		body = &openingReader{ctx: ctx, keys: c.keys, tenant: tenant, thread: thread, name: info.Name, r: res}
	}
	return blobInfoOf(info, name, lifetime), body, nil
}

// DeleteBlob removes the blob name of tenant/thread's current lifetime
// (its chunks are purged from the object store's stream). Deleting a
// missing blob returns [ErrBlobNotFound] (wrapped). Errors as GetBlob.
func (c *Client) DeleteBlob(ctx context.Context, tenant, thread, name string) error {
	if p := c.route(tenant, thread); p != c {
		return p.DeleteBlob(ctx, tenant, thread, name)
	}
	if err := c.check(); err != nil {
		return err
	}
	if err := ValidateBlobName(name); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	lifetime, err := c.blobLifetime(ctx, tenant, thread)
	if err != nil {
		return err
	}
	os, err := c.blobStore(ctx)
	if err != nil {
		return err
	}
	err = os.Delete(ctx, blobPrefix(tenant, thread, lifetime)+name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%w: %q of %s/%s", ErrBlobNotFound, name, tenant, thread)
	}
	if err != nil {
		return fmt.Errorf("client: blob %q of %s/%s: %w", name, tenant, thread, err)
	}
	return nil
}

// eraseBlobs deletes every blob of every lifetime of tenant/thread (part
// of Erase) and returns their object names. Listing walks the bucket's
// metadata (one message per blob of every thread).
func (c *Client) eraseBlobs(ctx context.Context, tenant, thread string) ([]string, error) {
	os, err := c.blobStore(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := os.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := blobPrefix(tenant, thread, -1)
	var names []string
	for _, in := range infos {
		if !strings.HasPrefix(in.Name, prefix) {
			continue
		}
		if err := os.Delete(ctx, in.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return names, fmt.Errorf("blob %q: %w", in.Name, err)
		}
		names = append(names, in.Name)
	}
	return names, nil
}

// sealedBlobHeader marks an object stored sealed (blobs_seal.go).
const sealedBlobHeader = "Convlog-Sealed"

func blobInfoOf(in *jetstream.ObjectInfo, name string, lifetime int) BlobInfo {
	b := BlobInfo{Name: name, Size: in.Size, Digest: in.Digest, Lifetime: lifetime, Modified: in.ModTime.UTC()}
	if in.Headers != nil {
		b.ContentType = in.Headers.Get("Content-Type")
		if in.Headers.Get(sealedBlobHeader) != "" {
			b.Size = plainBlobSize(in.Size)
		}
	}
	return b
}

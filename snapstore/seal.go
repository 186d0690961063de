package snapstore

import "context"

// Sealer encrypts and decrypts the KV values of a thread (heads, chunks,
// index entries) with the thread's data key; threadkey.Keys implements it.
// place is the value's KV key, bound to the ciphertext so that a value
// cannot be moved to another key. A nil Sealer stores values in the clear.
type Sealer interface {
	// SealValue returns the stored form of plain. Errors (a key that cannot
	// be read or was destroyed by an erasure) fail the write.
	SealValue(ctx context.Context, tenant, thread, place string, plain []byte) ([]byte, error)
	// OpenValue returns the plain form of a stored value, or the value
	// itself when it is not sealed (written in the clear, e.g. before
	// sealing existed).
	OpenValue(ctx context.Context, tenant, thread, place string, value []byte) ([]byte, error)
}

// sealing applies an optional Sealer.
type sealing struct{ s Sealer }

// seal is s.SealValue, or plain when there is no Sealer.
func (x sealing) seal(ctx context.Context, tenant, thread, place string, plain []byte) ([]byte, error) {
	if x.s == nil {
		return plain, nil
	}
	return x.s.SealValue(ctx, tenant, thread, place, plain)
}

// open is s.OpenValue, or value when there is no Sealer (a sealed value
// then fails to decode, as corrupt).
func (x sealing) open(ctx context.Context, tenant, thread, place string, value []byte) ([]byte, error) {
	if x.s == nil {
		return value, nil
	}
	return x.s.OpenValue(ctx, tenant, thread, place, value)
}

// inPlaceOpener is a Sealer that can also open a value into the value's
// own bytes (threadkey.Keys.OpenValueInPlace), overwriting them.
type inPlaceOpener interface {
	OpenValueInPlace(ctx context.Context, tenant, thread, place string, value []byte) ([]byte, error)
}

// openInPlace is open for a value nothing else holds (a chunk just read,
// to be decoded): with a Sealer that can, it decrypts into value's bytes,
// which it overwrites, instead of allocating a copy of the plaintext.
func (x sealing) openInPlace(ctx context.Context, tenant, thread, place string, value []byte) ([]byte, error) {
	if o, ok := x.s.(inPlaceOpener); ok {
		return o.OpenValueInPlace(ctx, tenant, thread, place, value)
	}
	return x.open(ctx, tenant, thread, place, value)
}

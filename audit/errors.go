package audit

import "errors"

// ErrBadSignature is returned (wrapped) by [Open] when a checkpoint's
// signature does not verify with any trusted key, or names a key that is
// not trusted. It is not retryable. [Verify] reports such a checkpoint as
// a [KindSignature] problem instead.
var ErrBadSignature = errors.New("audit: checkpoint signature does not verify with a trusted key")

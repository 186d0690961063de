package client

// Blobs are stored sealed with their thread's data key (package
// threadkey), so that erasing the thread makes every copy of their bytes
// unreadable. A blob of n bytes is stored as segments of blobSegment plain
// bytes (the last shorter, and one empty segment for an empty blob), each
// sealed as a threadkey value whose place is "<object name>#<index>", and
// "<object name>#<index>$" for the last: a segment cannot be moved,
// reordered, dropped or cut off at the end without failing to open. The
// object store's size and digest are those of the sealed bytes; BlobInfo
// reports the plain size (derived from the sealed one) and the sealed
// digest (an opaque tag that changes with every write).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/convlog/convlog/threadkey"
)

const (
	// blobSegment is the plain bytes of one sealed blob segment.
	blobSegment = 64 << 10
	// blobOverhead is what sealing adds to a segment (threadkey's value
	// format: marker, format, key id, nonce, tag).
	blobOverhead = 2 + 8 + 12 + 16
)

// segmentPlace is the threadkey place of segment i of object name.
func segmentPlace(name string, i int, last bool) string {
	p := name + "#" + strconv.Itoa(i)
	if last {
		p += "$"
	}
	return p
}

// plainBlobSize is the plain size of a sealed blob of n stored bytes.
func plainBlobSize(n uint64) uint64 {
	full := uint64(blobSegment + blobOverhead)
	segs := (n + full - 1) / full
	if segs == 0 || n < segs*blobOverhead {
		return n // not a sealed blob (stored in the clear)
	}
	return n - segs*blobOverhead
}

// sealingReader reads a plain stream and yields its sealed segments.
type sealingReader struct {
	ctx            context.Context
	keys           *threadkey.Keys
	tenant, thread string
	name           string
	r              io.Reader
	i              int
	next           []byte // the plain segment read ahead (nil before the first read)
	eof            bool
	out            []byte // sealed bytes not yet returned
	done           bool
	err            error
}

func (s *sealingReader) fill() ([]byte, error) {
	buf := make([]byte, blobSegment)
	n, err := io.ReadFull(s.r, buf)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		s.eof = true
		err = nil
	}
	return buf[:n], err
}

func (s *sealingReader) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if s.done {
			return 0, io.EOF
		}
		cur := s.next
		if cur == nil {
			if cur, s.err = s.fill(); s.err != nil {
				return 0, s.err
			}
		}
		last := s.eof
		if !last {
			if s.next, s.err = s.fill(); s.err != nil {
				return 0, s.err
			}
			last = len(s.next) == 0 && s.eof
		}
		sealed, err := s.keys.SealValue(s.ctx, s.tenant, s.thread, segmentPlace(s.name, s.i, last), cur)
		if err != nil {
			s.err = fmt.Errorf("seal blob segment %d: %w", s.i, err)
			return 0, s.err
		}
		s.out, s.i, s.done = sealed, s.i+1, last
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// openingReader reads a sealed blob (one whose object has the
// sealedBlobHeader) and yields its plain bytes.
type openingReader struct {
	ctx            context.Context
	keys           *threadkey.Keys
	tenant, thread string
	name           string
	r              io.ReadCloser
	i              int
	next           []byte
	nextEOF        bool
	started        bool
	out            []byte
	done           bool
	err            error
}

func (o *openingReader) read() ([]byte, bool, error) {
	buf := make([]byte, blobSegment+blobOverhead)
	n, err := io.ReadFull(o.r, buf)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return buf[:n], true, nil
	}
	return buf[:n], false, err
}

func (o *openingReader) Read(p []byte) (int, error) {
	for len(o.out) == 0 {
		if o.err != nil {
			return 0, o.err
		}
		if o.done {
			return 0, io.EOF
		}
		cur, curEOF := o.next, o.nextEOF
		if !o.started {
			o.started = true
			if cur, curEOF, o.err = o.read(); o.err != nil {
				return 0, o.err
			}
		}
		last := curEOF
		if !last {
			if o.next, o.nextEOF, o.err = o.read(); o.err != nil {
				return 0, o.err
			}
			last = len(o.next) == 0 && o.nextEOF
		}
		plain, err := o.keys.OpenValue(o.ctx, o.tenant, o.thread, segmentPlace(o.name, o.i, last), cur)
		if err != nil {
			o.err = fmt.Errorf("client: blob %s segment %d: %w", o.name, o.i, err)
			return 0, o.err
		}
		o.out, o.i, o.done = plain, o.i+1, last
	}
	n := copy(p, o.out)
	o.out = o.out[n:]
	return n, nil
}

func (o *openingReader) Close() error { return o.r.Close() }

package snapstore

import (
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// mapWriter writes the entries of a msgpack map field by field with enc,
// keeping the first error. The projector writes a head and an index
// summary on every step, and msgpack's reflection encoder boxes every
// omitempty field to test it for emptiness, an allocation each; writing
// the fields one by one gives the same bytes without them (each writer's
// test compares its bytes with the reflection encoder's).
type mapWriter struct {
	enc *msgpack.Encoder
	err error
}

func (w *mapWriter) do(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *mapWriter) mapLen(n int) { w.do(w.enc.EncodeMapLen(n)) }

func (w *mapWriter) key(k string) { w.do(w.enc.EncodeString(k)) }

func (w *mapWriter) str(k, v string) {
	w.key(k)
	w.do(w.enc.EncodeString(v))
}

// strUnless writes k: v unless omit (an omitempty field that is empty).
func (w *mapWriter) strUnless(omit bool, k, v string) {
	if !omit {
		w.str(k, v)
	}
}

func (w *mapWriter) uint(k string, v uint64) {
	w.key(k)
	w.do(w.enc.EncodeUint(v))
}

func (w *mapWriter) int(k string, v int) {
	w.key(k)
	w.do(w.enc.EncodeInt(int64(v)))
}

func (w *mapWriter) bool(k string, v bool) {
	w.key(k)
	w.do(w.enc.EncodeBool(v))
}

func (w *mapWriter) time(k string, t time.Time) {
	w.key(k)
	w.do(w.enc.EncodeTime(t))
}

// value writes v, a pointer or a map (boxed without an allocation), with
// the reflection encoder.
func (w *mapWriter) value(k string, v any) {
	w.key(k)
	w.do(w.enc.Encode(v))
}

// valueUnless writes k: v as value does unless omit.
func (w *mapWriter) valueUnless(omit bool, k string, v any) {
	if !omit {
		w.value(k, v)
	}
}

package events

import (
	"errors"
	"fmt"
)

// maxNesting bounds how deeply maps and arrays may nest in an encoded
// event. convlog's own events nest at most six deep (envelope, payload,
// messages, message, content, part); the bound leaves room for fields a
// newer schema may add. Without it a hostile message of a few megabytes of
// nested arrays overflows the decoder's stack (the msgpack library skips
// values recursively), which is a fatal error, not a panic.
const maxNesting = 64

// checkWire verifies, without decoding, that b is exactly one complete
// msgpack value whose maps and arrays nest at most maxNesting deep and
// whose declared lengths fit in b. It walks the bytes iteratively and
// allocates only the stack of open containers.
func checkWire(b []byte) error {
	var open []uint64    // values still to read in each enclosing container
	pending := uint64(1) // values still to read at the current level
	i := 0
	for {
		for pending == 0 {
			if len(open) == 0 {
				if i != len(b) {
					return fmt.Errorf("%d trailing bytes after the event", len(b)-i)
				}
				return nil
			}
			pending = open[len(open)-1]
			open = open[:len(open)-1]
		}
		if i >= len(b) {
			return errors.New("unexpected end of input")
		}
		h, err := wireHeadOf(b[i], i)
		if err != nil {
			return err
		}
		i++
		pending--
		if h.lenBytes > 0 {
			if len(b)-i < h.lenBytes {
				return errors.New("unexpected end of input")
			}
			var n uint64
			for _, x := range b[i : i+h.lenBytes] {
				n = n<<8 | uint64(x)
			}
			i += h.lenBytes
			if h.container {
				h.items = n
			} else {
				h.skip = n + h.ext
			}
		}
		if h.skip > uint64(len(b)-i) {
			return fmt.Errorf("a value at offset %d claims %d bytes, only %d remain", i, h.skip, len(b)-i)
		}
		i += int(h.skip)
		if !h.container {
			continue
		}
		if h.isMap {
			h.items *= 2
		}
		if h.items > uint64(len(b)-i) { // every value takes at least one byte
			return fmt.Errorf("a container at offset %d claims %d values, only %d bytes remain", i, h.items, len(b)-i)
		}
		if h.items == 0 {
			continue
		}
		if len(open) == maxNesting {
			return fmt.Errorf("maps and arrays nest more than %d deep", maxNesting)
		}
		open = append(open, pending)
		pending = h.items
	}
}

// wireHead is what a msgpack value's first byte says of it.
type wireHead struct {
	skip  uint64 // bytes of the value after its first byte (and length field)
	items uint64 // values inside a container
	// lenBytes is the size of a length field that follows the first byte:
	// the container's items or, plus ext, the bytes to skip.
	lenBytes  int
	ext       uint64 // 1 for ext formats: a type byte follows the length
	container bool
	isMap     bool // a container of key-value pairs (2 values per item)
}

// wireHeadOf reads the first byte c, at offset at, of a msgpack value.
func wireHeadOf(c byte, at int) (wireHead, error) {
	switch {
	case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		return wireHead{}, nil
	case c <= 0x8f: // fixmap
		return wireHead{items: uint64(c & 0x0f), container: true, isMap: true}, nil
	case c <= 0x9f: // fixarray
		return wireHead{items: uint64(c & 0x0f), container: true}, nil
	case c <= 0xbf: // fixstr
		return wireHead{skip: uint64(c & 0x1f)}, nil
	case c == 0xc1:
		return wireHead{}, fmt.Errorf("byte 0xc1 at offset %d is not msgpack", at)
	}
	return wireHeads[c-0xc0], nil
}

// wireHeads are the heads of the first bytes 0xc0 to 0xdf (msgpack's
// spec, "formats"), by c - 0xc0. nil (0xc0), false (0xc2) and true (0xc3)
// are the byte alone: the zero head. 0xc1 is never used.
var wireHeads = [0x20]wireHead{
	0xc4 - 0xc0: {lenBytes: 1},                               // bin8
	0xc5 - 0xc0: {lenBytes: 2},                               // bin16
	0xc6 - 0xc0: {lenBytes: 4},                               // bin32
	0xc7 - 0xc0: {lenBytes: 1, ext: 1},                       // ext8
	0xc8 - 0xc0: {lenBytes: 2, ext: 1},                       // ext16
	0xc9 - 0xc0: {lenBytes: 4, ext: 1},                       // ext32
	0xca - 0xc0: {skip: 4},                                   // float32
	0xcb - 0xc0: {skip: 8},                                   // float64
	0xcc - 0xc0: {skip: 1},                                   // uint8
	0xcd - 0xc0: {skip: 2},                                   // uint16
	0xce - 0xc0: {skip: 4},                                   // uint32
	0xcf - 0xc0: {skip: 8},                                   // uint64
	0xd0 - 0xc0: {skip: 1},                                   // int8
	0xd1 - 0xc0: {skip: 2},                                   // int16
	0xd2 - 0xc0: {skip: 4},                                   // int32
	0xd3 - 0xc0: {skip: 8},                                   // int64
	0xd4 - 0xc0: {skip: 1 + 1},                               // fixext1 (a type byte, then the data)
	0xd5 - 0xc0: {skip: 1 + 2},                               // fixext2
	0xd6 - 0xc0: {skip: 1 + 4},                               // fixext4
	0xd7 - 0xc0: {skip: 1 + 8},                               // fixext8
	0xd8 - 0xc0: {skip: 1 + 16},                              // fixext16
	0xd9 - 0xc0: {lenBytes: 1},                               // str8
	0xda - 0xc0: {lenBytes: 2},                               // str16
	0xdb - 0xc0: {lenBytes: 4},                               // str32
	0xdc - 0xc0: {lenBytes: 2, container: true},              // array16
	0xdd - 0xc0: {lenBytes: 4, container: true},              // array32
	0xde - 0xc0: {lenBytes: 2, container: true, isMap: true}, // map16
	0xdf - 0xc0: {lenBytes: 4, container: true, isMap: true}, // map32
}

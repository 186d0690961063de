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
		c := b[i]
		i++
		pending--

		var skip, items uint64 // bytes to skip; values inside a container
		var lenBytes int       // size of a length field that follows c
		extType := uint64(0)   // 1 for ext formats: a type byte follows the length
		container, isMap := false, false
		switch {
		case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		case c <= 0x8f: // fixmap
			items, container, isMap = uint64(c&0x0f), true, true
		case c <= 0x9f: // fixarray
			items, container = uint64(c&0x0f), true
		case c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		default:
			switch c {
			case 0xc0, 0xc2, 0xc3: // nil, false, true
			case 0xc1:
				return fmt.Errorf("byte 0xc1 at offset %d is not msgpack", i-1)
			case 0xc4, 0xd9: // bin8, str8
				lenBytes = 1
			case 0xc5, 0xda: // bin16, str16
				lenBytes = 2
			case 0xc6, 0xdb: // bin32, str32
				lenBytes = 4
			case 0xc7: // ext8
				lenBytes, extType = 1, 1
			case 0xc8: // ext16
				lenBytes, extType = 2, 1
			case 0xc9: // ext32
				lenBytes, extType = 4, 1
			case 0xcc, 0xd0: // uint8, int8
				skip = 1
			case 0xcd, 0xd1: // uint16, int16
				skip = 2
			case 0xca, 0xce, 0xd2: // float32, uint32, int32
				skip = 4
			case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
				skip = 8
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16 (+ type byte)
				skip = 1 + 1<<(c-0xd4)
			case 0xdc: // array16
				lenBytes, container = 2, true
			case 0xdd: // array32
				lenBytes, container = 4, true
			case 0xde: // map16
				lenBytes, container, isMap = 2, true, true
			case 0xdf: // map32
				lenBytes, container, isMap = 4, true, true
			}
		}
		if lenBytes > 0 {
			if len(b)-i < lenBytes {
				return errors.New("unexpected end of input")
			}
			var n uint64
			for _, x := range b[i : i+lenBytes] {
				n = n<<8 | uint64(x)
			}
			i += lenBytes
			if container {
				items = n
			} else {
				skip = n + extType
			}
		}
		if skip > uint64(len(b)-i) {
			return fmt.Errorf("a value at offset %d claims %d bytes, only %d remain", i, skip, len(b)-i)
		}
		i += int(skip)
		if !container {
			continue
		}
		if isMap {
			items *= 2
		}
		if items > uint64(len(b)-i) { // every value takes at least one byte
			return fmt.Errorf("a container at offset %d claims %d values, only %d bytes remain", i, items, len(b)-i)
		}
		if items == 0 {
			continue
		}
		if len(open) == maxNesting {
			return fmt.Errorf("maps and arrays nest more than %d deep", maxNesting)
		}
		open = append(open, pending)
		pending = items
	}
}

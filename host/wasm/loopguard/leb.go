package loopguard

import (
	"errors"
	"fmt"
)

// reader reads the binary format; the first error sticks and every later
// read returns zero.
type reader struct {
	b   []byte
	pos int
	err error
}

var errShort = errors.New("unexpected end")

func (r *reader) done() bool { return r.pos >= len(r.b) }

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %w", r.pos, err)
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.done() {
		r.fail(errShort)
		return 0
	}
	r.pos++
	return r.b[r.pos-1]
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.fail(errShort)
		return nil
	}
	r.pos += n
	return r.b[r.pos-n : r.pos]
}

func (r *reader) u32() uint32 { return uint32(r.leb(32, false)) }

func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

// limits reads a table's or memory's limits (flags 0 to 3: max, shared).
func (r *reader) limits() {
	flags := r.byte()
	if flags > 3 {
		r.fail(fmt.Errorf("limits flags %#x", flags))
	}
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// leb reads an LEB128 number of at most bits bits, sign-extended when
// signed; over-long encodings are refused as the specification says.
func (r *reader) leb(bits uint, signed bool) int64 {
	var v uint64
	var shift uint
	for {
		b := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits {
			r.fail(errors.New("LEB128 too long"))
			return 0
		}
		v |= uint64(b&0x7f) << shift
		shift += 7
		if b&0x80 == 0 {
			if signed && shift < 64 && b&0x40 != 0 {
				v |= ^uint64(0) << shift
			}
			return int64(v)
		}
	}
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

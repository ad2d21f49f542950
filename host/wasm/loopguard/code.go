package loopguard

import (
	"errors"
	"fmt"
)

// rewriteCode returns the code section with check inserted after every
// loop's block type, or nil when nothing was inserted. A function without a loop keeps its bytes (and the
// encoding of its size, which some linkers pad); with check empty the
// section comes out as it went in, but every body is still walked.
func rewriteCode(body, check []byte) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	out := append(make([]byte, 0, len(body)+len(body)/8), body[:r.pos]...) // the count as encoded
	changed := false
	for i := uint32(0); i < n && r.err == nil; i++ {
		start := r.pos
		size := r.u32()
		fn := r.bytes(int(size))
		if r.err != nil {
			break
		}
		loops, err := walk(fn)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		if len(loops) == 0 || len(check) == 0 {
			out = append(out, body[start:r.pos]...)
			continue
		}
		changed = true
		nb := make([]byte, 0, len(fn)+len(loops)*len(check))
		last := 0
		for _, at := range loops {
			nb = append(append(nb, fn[last:at]...), check...)
			last = at
		}
		nb = append(nb, fn[last:]...)
		out = append(appendU32(out, uint32(len(nb))), nb...)
	}
	if r.err == nil && !r.done() {
		r.fail(errors.New("bytes after the last function"))
	}
	if r.err != nil {
		return nil, fmt.Errorf("code section: %w", r.err)
	}
	if !changed {
		return nil, nil
	}
	return out, nil
}

// walk decodes one function body (locals, then instructions up to its final
// end) and returns the offsets just after each loop's block type. It checks
// only what it must to find instruction boundaries; wazero validates the
// rest after the rewrite.
func walk(fn []byte) (loops []int, err error) {
	r := reader{b: fn}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.u32()
		valType(&r)
	}
	depth := 1 // the function's own block
	for depth > 0 && r.err == nil {
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x04: // block, if
			blockType(&r)
			depth++
		case op == 0x03: // loop
			blockType(&r)
			depth++
			loops = append(loops, r.pos)
		case op == 0x0b: // end
			depth--
		case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
			// unreachable nop else return drop select ref.is_null
		case op == 0x0c || op == 0x0d || op == 0x10 || op == 0xd2 || (op >= 0x20 && op <= 0x26):
			r.u32() // br br_if call ref.func local.* global.* table.get/set
		case op == 0x0e: // br_table
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.u32()
			}
			r.u32()
		case op == 0x11: // call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				valType(&r)
			}
		case op >= 0x28 && op <= 0x3e:
			memarg(&r)
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			zero(&r)
		case op == 0x41:
			r.leb(32, true)
		case op == 0x42:
			r.leb(64, true)
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op >= 0x45 && op <= 0xc4: // numeric, sign-extension
		case op == 0xd0: // ref.null
			valType(&r)
		case op == 0xfc:
			misc(&r)
		case op == 0xfd:
			simd(&r)
		default:
			r.fail(fmt.Errorf("unknown opcode %#x", op))
		}
	}
	if r.err == nil && !r.done() {
		r.fail(errors.New("bytes after the function's end"))
	}
	return loops, r.err
}

// misc reads a 0xFC instruction's immediates: saturating truncation, bulk
// memory and table operations.
func misc(r *reader) {
	switch op := r.u32(); {
	case op <= 7:
	case op == 8: // memory.init
		r.u32()
		zero(r)
	case op == 9 || op == 13 || (op >= 15 && op <= 17): // data.drop elem.drop table.grow/size/fill
		r.u32()
	case op == 10: // memory.copy
		zero(r)
		zero(r)
	case op == 11: // memory.fill
		zero(r)
	case op == 12 || op == 14: // table.init, table.copy
		r.u32()
		r.u32()
	default:
		r.fail(fmt.Errorf("unknown opcode 0xfc %d", op))
	}
}

// simd reads a 0xFD (fixed-width SIMD) instruction's immediates.
func simd(r *reader) {
	switch op := r.u32(); {
	case op <= 0x0b || op == 0x5c || op == 0x5d: // loads, store
		memarg(r)
	case op == 0x0c || op == 0x0d: // v128.const, i8x16.shuffle
		r.bytes(16)
	case op >= 0x15 && op <= 0x22: // extract/replace lane
		r.byte()
	case op >= 0x54 && op <= 0x5b: // load/store lane
		memarg(r)
		r.byte()
	case op <= 0xff:
	default:
		r.fail(fmt.Errorf("unknown opcode 0xfd %d", op))
	}
}

// memarg reads alignment and offset. A memory index (bit 6 of the
// alignment, multi-memory) is refused: wazero does not take it either.
func memarg(r *reader) {
	if align := r.u32(); align&0x40 != 0 {
		r.fail(errors.New("memory index in memarg (multi-memory)"))
	}
	r.u32()
}

// zero reads a reserved memory index, which must be 0.
func zero(r *reader) {
	if b := r.byte(); b != 0 && r.err == nil {
		r.fail(fmt.Errorf("memory index %d", b))
	}
}

// blockType reads an empty type (0x40), a value type or an s33 type index.
func blockType(r *reader) {
	if r.err != nil || r.done() {
		r.fail(errors.New("block type missing"))
		return
	}
	switch b := r.b[r.pos]; b {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.pos++
	default:
		if v := r.leb(33, true); v < 0 && r.err == nil {
			r.fail(fmt.Errorf("block type %d", v))
		}
	}
}

// valType reads a number, vector or reference type.
func valType(r *reader) {
	switch b := r.byte(); b {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
	default:
		if r.err == nil {
			r.fail(fmt.Errorf("value type %#x", b))
		}
	}
}

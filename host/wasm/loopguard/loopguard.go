// Package loopguard rewrites a WebAssembly module so that a host can stop
// it at its next loop iteration without wazero's termination checks, which
// exit to Go at every loop header (and start a goroutine per call).
//
// Instrument adds two exported mutable i32 globals and, after the block type
// of every loop instruction, a guard:
//
//	global.get $stop  global.get $fuel  i32.eqz  i32.or
//	if                          ;; stopped, or once every Fuel iterations:
//	  i32.const 0  memory.grow 0  drop   ;; an exit to Go: lets a garbage
//	                                     ;; collection stop the world
//	  global.get $stop  if  unreachable  end
//	  i32.const Fuel  global.set $fuel
//	end
//	global.get $fuel  i32.const 1  i32.sub  global.set $fuel
//
// A host stops a call by setting StopGlobal to 1: the guest traps at its
// next loop header. Only the guest writes FuelGlobal, and the host never
// should: wazero 1.12 carries a global the loop writes into its next
// iteration rather than loading it again, so a host's store to it can go
// unseen (measured: a fuel of 0 set from Go was decremented past). The periodic exit to Go is what makes
// this safe: Go cannot preempt native guest code, so a guest spinning
// through loads and branches alone would hold off a stop-the-world for good,
// and with it the timer that is meant to stop it.
package loopguard

import (
	"errors"
	"fmt"
)

// Names of the globals Instrument exports.
const (
	StopGlobal = "plantgate_stop"
	FuelGlobal = "plantgate_fuel"
)

// Fuel is the number of loop iterations between two exits to Go: it bounds
// how long a spinning guest can delay a garbage collection (a few µs for a
// tight loop) while costing a guest ~0.05 ns per iteration.
const Fuel = 4096

// Instrument returns bin with the loop guard (package comment). It refuses a
// module it cannot walk (an unknown opcode, a malformed section) or that
// already exports one of the globals' names, and one without a memory.
func Instrument(bin []byte) ([]byte, error) {
	return rewrite(bin, true)
}

// section ids, and their required order (custom sections go anywhere).
const (
	secCustom   = 0
	secImport   = 2
	secMemory   = 5
	secGlobal   = 6
	secExport   = 7
	secCode     = 10
	secDataCnt  = 12
	secTag      = 13
	kindGlobal  = 3
	kindMemory  = 2
	wasmHeader  = "\x00asm\x01\x00\x00\x00"
	maxSections = 64
)

var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id   byte
	body []byte
	raw  []byte // as read, header included: kept when the body is unchanged
}

// rewrite walks bin; with guard false it re-encodes every section it would
// touch without inserting anything, which must reproduce bin exactly (the
// round-trip test of the walker).
func rewrite(bin []byte, guard bool) ([]byte, error) {
	if len(bin) < 8 || string(bin[:8]) != wasmHeader {
		return nil, errors.New("not a WebAssembly 1.0 module")
	}
	var secs []section
	r := reader{b: bin, pos: 8}
	for !r.done() {
		start := r.pos
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		if id != secCustom {
			if _, ok := order[id]; !ok {
				return nil, fmt.Errorf("unknown section %d", id)
			}
		}
		secs = append(secs, section{id, body, bin[start:r.pos]})
	}
	m, err := scan(secs)
	if err != nil {
		return nil, err
	}
	if guard && !m.hasMemory {
		return nil, errors.New("module has no memory")
	}
	stop, fuel := m.globals, m.globals+1
	var check []byte
	if guard {
		check = guardCode(stop, fuel)
	}
	out := append(make([]byte, 0, len(bin)+len(bin)/8), wasmHeader...)
	addedGlobals, addedExports := !guard, !guard
	for _, s := range secs {
		if guard && s.id != secCustom && !addedGlobals && order[s.id] > order[secGlobal] {
			out = appendSection(out, secGlobal, appendGlobals(appendU32(nil, 2)))
			addedGlobals = true
		}
		if guard && s.id != secCustom && !addedExports && order[s.id] > order[secExport] {
			out = appendSection(out, secExport, appendExports(appendU32(nil, 2), stop, fuel))
			addedExports = true
		}
		var body []byte // nil: unchanged
		switch {
		case s.id == secGlobal && guard:
			body, err = extendVec(s.body, appendGlobals, 2)
			addedGlobals = true
		case s.id == secExport && guard:
			body, err = extendVec(s.body, func(b []byte) []byte { return appendExports(b, stop, fuel) }, 2)
			addedExports = true
		case s.id == secCode:
			body, err = rewriteCode(s.body, check)
		}
		if err != nil {
			return nil, err
		}
		if body == nil {
			out = append(out, s.raw...)
			continue
		}
		out = appendSection(out, s.id, body)
	}
	if !addedGlobals {
		out = appendSection(out, secGlobal, appendGlobals(appendU32(nil, 2)))
	}
	if !addedExports {
		out = appendSection(out, secExport, appendExports(appendU32(nil, 2), stop, fuel))
	}
	return out, nil
}

// module is what rewrite needs to know before touching the code.
type module struct {
	globals   uint32 // imported and defined
	hasMemory bool
}

func scan(secs []section) (module, error) {
	var m module
	for _, s := range secs {
		r := reader{b: s.body}
		switch s.id {
		case secImport:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.name()
				r.name()
				switch kind := r.byte(); kind {
				case 0:
					r.u32()
				case 1:
					r.byte()
					r.limits()
				case kindMemory:
					r.limits()
					m.hasMemory = true
				case kindGlobal:
					r.byte()
					r.byte()
					m.globals++
				default:
					r.fail(fmt.Errorf("import kind %d", kind))
				}
			}
		case secMemory:
			if r.u32() > 0 {
				m.hasMemory = true
			}
		case secGlobal:
			m.globals += r.u32()
		case secExport:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				if name := r.name(); name == StopGlobal || name == FuelGlobal {
					r.fail(fmt.Errorf("module already exports %q", name))
				}
				r.byte()
				r.u32()
			}
		}
		if r.err != nil {
			return m, fmt.Errorf("section %d: %w", s.id, r.err)
		}
	}
	return m, nil
}

// extendVec returns a vector section body with count+more entries: its own,
// then the ones add appends.
func extendVec(body []byte, add func([]byte) []byte, more uint32) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	return add(append(appendU32(nil, n+more), body[r.pos:]...)), nil
}

// appendGlobals appends the entries of the stop global (0) and the fuel
// global (Fuel), both mutable i32, to a global section's body.
func appendGlobals(b []byte) []byte {
	b = append(b, 0x7f, 1, 0x41, 0, 0x0b)
	b = append(b, 0x7f, 1, 0x41)
	b = appendS32(b, Fuel)
	return append(b, 0x0b)
}

// appendExports appends the exports of the two globals to an export
// section's body.
func appendExports(b []byte, stop, fuel uint32) []byte {
	for _, e := range []struct {
		name string
		idx  uint32
	}{{StopGlobal, stop}, {FuelGlobal, fuel}} {
		b = appendU32(b, uint32(len(e.name)))
		b = append(b, e.name...)
		b = append(b, kindGlobal)
		b = appendU32(b, e.idx)
	}
	return b
}

// guardCode is the instruction sequence inserted after a loop's block type.
func guardCode(stop, fuel uint32) []byte {
	get := func(b []byte, g uint32) []byte { return appendU32(append(b, 0x23), g) }
	b := get(get(nil, stop), fuel)
	b = append(b, 0x45, 0x72, 0x04, 0x40) // i32.eqz, i32.or, if (empty)
	b = append(b, 0x41, 0, 0x40, 0, 0x1a)
	b = get(b, stop)
	b = append(b, 0x04, 0x40, 0x00, 0x0b) // if unreachable end
	b = appendS32(append(b, 0x41), Fuel)
	b = appendU32(append(b, 0x24), fuel)
	b = append(b, 0x0b)
	b = get(b, fuel)
	b = append(b, 0x41, 1, 0x6b) // i32.const 1, i32.sub
	return appendU32(append(b, 0x24), fuel)
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = appendU32(append(out, id), uint32(len(body)))
	return append(out, body...)
}

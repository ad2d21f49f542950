package wasm

import (
	"context"

	"github.com/tetratelabs/wazero/experimental"
)

// Plugins' linear memories live outside the Go heap (linearmem_linux.go
// maps them): left to wazero they are Go byte slices, the largest live
// objects of a gateway (~21 of its ~46 MiB of live heap with the bundled
// plugins), and the collector lets the heap grow to twice the live heap
// before collecting (GOGC=100), so every MiB of guest memory costs about
// two of resident memory under load. A mapping of its own per instance is
// also never copied when the guest grows it (a Go slice is, to a new
// array, the old one garbage until the next collection), and its pages go
// back to the kernel the moment the instance is closed.
//
// Safe because an instance is closed only between calls (pool.go: discard
// takes idle instances, a runner closes its own after a late return, and a
// Close that gives up on running calls leaves their instances and the
// runtime to close as they return, closeLate), so neither guest code nor a
// host function writing a result can touch a memory after it is unmapped
// (TestCloseDeadlineCallFinishes crashed the process before closeLate).
// wazero's own termination checks close a module from another goroutine
// during a call; a plugin run with them (a module loopguard refuses, or
// Options.wazeroChecks) keeps Go-heap memories.

// withLinearMemory returns ctx set up to instantiate p's modules with
// linear memories from linearMemoryAllocator, where the platform has one.
func (p *Plugin) withLinearMemory(ctx context.Context) context.Context {
	if linearMemoryAllocator == nil || p.wazeroCloses {
		return ctx
	}
	return experimental.WithMemoryAllocator(ctx, linearMemoryAllocator)
}

// heapMemory is a linear memory in the Go heap: what wazero does by itself,
// for when a mapping cannot be made.
type heapMemory struct {
	buf []byte
	max uint64
}

func newHeapMemory(capacity, max uint64) *heapMemory {
	return &heapMemory{buf: make([]byte, 0, min(capacity, max)), max: max}
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	switch {
	case size > m.max:
		return nil
	case size <= uint64(cap(m.buf)):
		m.buf = m.buf[:size]
	default:
		m.buf = append(m.buf[:cap(m.buf)], make([]byte, size-uint64(cap(m.buf)))...)[:size]
	}
	return m.buf
}

func (m *heapMemory) Free() { m.buf = nil }

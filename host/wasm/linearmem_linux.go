package wasm

import (
	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// linearMemoryAllocator maps each linear memory on its own (linearmem.go).
// The whole maximum is reserved inaccessible (PROT_NONE: address space
// only, nothing committed, so a 4 GiB limit costs nothing), and each grow
// makes the next pages readable and writable, which is when the kernel
// counts them; fresh anonymous pages read as zero, as wasm requires of
// grown memory. The base never moves.
var linearMemoryAllocator experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(allocateMapped)

func allocateMapped(capacity, max uint64) experimental.LinearMemory {
	if max == 0 {
		return newHeapMemory(capacity, max)
	}
	reserved, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		// No address space for it: the Go heap still works.
		return newHeapMemory(capacity, max)
	}
	return &mappedMemory{reserved: reserved}
}

// mappedMemory is one linear memory: reserved[:size] is accessible.
type mappedMemory struct {
	reserved []byte
	size     uint64
}

func (m *mappedMemory) Reallocate(size uint64) []byte {
	if m.reserved == nil || size > uint64(len(m.reserved)) {
		return nil
	}
	if size > m.size {
		if err := unix.Mprotect(m.reserved[m.size:size], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil // the guest's memory.grow fails (-1), as out of memory
		}
		m.size = size
	}
	return m.reserved[:size:size]
}

func (m *mappedMemory) Free() {
	if m.reserved != nil {
		_ = unix.Munmap(m.reserved)
		m.reserved, m.size = nil, 0
	}
}

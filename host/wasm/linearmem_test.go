package wasm

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// TestLinearMemoryOutsideGoHeap grows one instance's memory to 40 MiB and
// checks the Go heap did not grow with it (linearmem.go): as a Go slice it
// would, and the collector would let the heap reach twice that before
// collecting. Not parallel: it reads the process's heap.
func TestLinearMemoryOutsideGoHeap(t *testing.T) {
	if linearMemoryAllocator == nil {
		t.Skip("linear memories are mapped on Linux only")
	}
	// A long deadline: growing a Go-heap memory copies it, and a copy
	// past the deadline would recycle the instance.
	p := load(t, "grow", nil, Limits{MemoryMiB: 64, Instances: 1, Timeout: time.Minute}, Options{})
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	call := func() {
		if _, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/"}); err != nil {
			t.Fatal(err)
		}
	}
	call() // the instance is made
	before := heap()
	const pages = 640 // 40 MiB, below the recycling threshold of 48
	for range pages - 1 {
		call()
	}
	after := heap()
	if s, m := p.Stats(), p.Memory(); s.Created != 1 || m < pages*65536 {
		t.Fatalf("Stats() = %+v, Memory() = %d: want one instance of at least %d bytes", s, m, pages*65536)
	}
	if grew := int64(after) - int64(before); grew > 8<<20 {
		t.Fatalf("the Go heap grew %d MiB while the guest grew 40 MiB: linear memory is in the Go heap", grew>>20)
	}
}

// TestHeapMemory checks the fallback where no mapping can be made: it
// grows in place or by copying, keeps what was written, reads zero where
// it grew, and refuses past its maximum as a failed memory.grow.
func TestHeapMemory(t *testing.T) {
	const page = 65536
	m := newHeapMemory(page, 4*page)
	b := m.Reallocate(page)
	if len(b) != page {
		t.Fatalf("len %d, want %d", len(b), page)
	}
	b[0], b[page-1] = 1, 2
	b = m.Reallocate(3 * page)
	if len(b) != 3*page || b[0] != 1 || b[page-1] != 2 {
		t.Fatalf("after growing: len %d, b[0] %d, b[page-1] %d; want %d, 1, 2", len(b), b[0], b[page-1], 3*page)
	}
	for i, v := range b[page:] {
		if v != 0 {
			t.Fatalf("grown byte %d is %d, want 0", page+i, v)
		}
	}
	if m.Reallocate(5*page) != nil {
		t.Fatal("grew past its maximum")
	}
	if b = m.Reallocate(4 * page); len(b) != 4*page || b[0] != 1 {
		t.Fatalf("to the maximum: len %d, b[0] %d", len(b), b[0])
	}
	m.Free()
}

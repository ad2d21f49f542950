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

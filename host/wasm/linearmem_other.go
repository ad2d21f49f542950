//go:build !linux

package wasm

import "github.com/tetratelabs/wazero/experimental"

// linearMemoryAllocator is nil where memories are not mapped: wazero keeps
// them in the Go heap (linearmem.go).
var linearMemoryAllocator experimental.MemoryAllocator

//go:build wasip1

// Command panic is a host/wasm test fixture written without the SDK: a
// standard-Go policy plugin that allows everything except an authorize
// request for the path "/panic", where it panics.
//
// host/wasm's TestMain builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
package main

import (
	"unsafe"

	"github.com/plantgate/plantgate/sdk/abi"
)

func main() {}

// buf is the request buffer and record the last decision record; globals so
// they stay alive (Go's collector does not move objects) between calls.
var buf, record []byte

//go:wasmexport plantgate_abi_version
func abiVersion() uint32 { return abi.Version }

//go:wasmexport plantgate_phases
func phases() uint32 { return abi.PhaseAuthorize | abi.PhaseValidate }

//go:wasmexport plantgate_buffer
func buffer(size uint32) uint32 {
	if int(size) > len(buf) || buf == nil {
		buf = make([]byte, max(size, 256))
	}
	return addr(buf)
}

//go:wasmexport plantgate_authorize
func authorize(ptr, n uint32) uint64 {
	r, err := abi.ParseAuthorize(view(ptr, n))
	if err != nil {
		return fault(err.Error())
	}
	if string(r.Path) == "/panic" {
		panic("fixture panic")
	}
	return abi.ResultAllow
}

//go:wasmexport plantgate_validate
func validate(ptr, n uint32) uint64 {
	if _, err := abi.ParseValidate(view(ptr, n)); err != nil {
		return fault(err.Error())
	}
	return abi.ResultAllow
}

func fault(text string) uint64 {
	record = abi.AppendDecision(record[:0], abi.VerdictFault, 0, text)
	return abi.PackResult(addr(record), uint32(len(record)))
}

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func view(ptr, n uint32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), n) }

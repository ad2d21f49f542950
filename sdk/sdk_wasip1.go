//go:build wasip1

package sdk

import (
	"runtime"
	"unsafe"

	"github.com/plantgate/plantgate/sdk/abi"
)

// This file is the WebAssembly face of the SDK: one //go:wasmexport per
// export in package abi and one //go:wasmimport per host function. Its
// native twin, sdk_native.go, wires the same functions for package sdktest.

//go:wasmexport plantgate_abi_version
func exportABIVersion() uint32 { return abi.Version }

//go:wasmexport plantgate_phases
func exportPhases() uint32 { return phases() }

//go:wasmexport plantgate_buffer
func exportBuffer(size uint32) uint32 {
	b := buffer(size)
	if b == nil {
		return 0
	}
	return address(b)
}

//go:wasmexport plantgate_configure
func exportConfigure(ptr, length uint32) abi.Result {
	return export(configure, ptr, length)
}

//go:wasmexport plantgate_config_required
func exportConfigRequired() uint32 {
	if configRequired {
		return 1
	}
	return 0
}

//go:wasmexport plantgate_authorize
func exportAuthorize(ptr, length uint32) abi.Result {
	return export(authorize, ptr, length)
}

//go:wasmexport plantgate_validate
func exportValidate(ptr, length uint32) abi.Result {
	return export(validate, ptr, length)
}

// export runs one export body on the request at ptr and packs its record.
func export(body func([]byte) []byte, ptr, length uint32) abi.Result {
	var rec []byte
	if msg, ok := requestAt(ptr, length); ok {
		rec = body(msg)
	} else {
		rec = encodeFault("sdk: request is not inside the buffer from plantgate_buffer")
	}
	yield(rec)
	if rec == nil {
		return abi.ResultAllow
	}
	return abi.PackResult(address(rec), uint32(len(rec)))
}

// yieldEvery is how many allowed calls may pass between two yields.
const yieldEvery = 64

// calls counts export calls, for yield.
var calls uint32

// yield lets the guest's GC and other goroutines run: they only run when the
// guest yields, and without a yield they would wait for the first allocation
// that needs them. Yielding runs the guest's scheduler, which with the
// host's deadline enforcement on costs more than an allocation-free call
// itself (measured: an SDK authorize 30 µs with a yield per call, 6.5 µs
// without), so the SDK yields after every deny or fault, which are the
// paths that usually allocate, and after every yieldEvery-th call.
func yield(rec []byte) {
	calls++
	if calls%yieldEvery == 0 || (len(rec) > 0 && rec[0] != abi.VerdictAllow) {
		runtime.Gosched()
	}
}

// requestAt returns the part of the request buffer at guest address ptr.
// Translating the address to an offset keeps the SDK from reading memory
// the host did not get from plantgate_buffer.
func requestAt(ptr, length uint32) ([]byte, bool) {
	off := ptr - address(request)
	if ptr < address(request) || uint64(off)+uint64(length) > uint64(len(request)) {
		return nil, false
	}
	return request[off : off+length], true
}

// address is b's guest address; linear memory is 32-bit.
func address(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmimport plantgate log
//go:noescape
func importLog(level int32, ptr unsafe.Pointer, length uint32)

//go:wasmimport plantgate token_lookup
//go:noescape
func importTokenLookup(hashPtr unsafe.Pointer, hashLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport plantgate kv_get
//go:noescape
func importKVGet(keyPtr unsafe.Pointer, keyLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport plantgate kv_set
//go:noescape
func importKVSet(keyPtr unsafe.Pointer, keyLen uint32, valPtr unsafe.Pointer, valLen uint32, ttlMs int64) int32

//go:wasmimport plantgate kv_delete
//go:noescape
func importKVDelete(keyPtr unsafe.Pointer, keyLen uint32) int32

//go:wasmimport plantgate kv_incr
//go:noescape
func importKVIncr(keyPtr unsafe.Pointer, keyLen uint32, delta int64, windowMs int64) int64

//go:wasmimport plantgate kv_take
//go:noescape
func importKVTake(keyPtr unsafe.Pointer, keyLen uint32, limit int64, windowMs int64) int64

func kvGet(key string, out []byte) int32 {
	return importKVGet(stringPtr(key), uint32(len(key)), unsafe.Pointer(unsafe.SliceData(out)), uint32(len(out)))
}

func kvSet(key string, value []byte, ttlMs int64) int32 {
	return importKVSet(stringPtr(key), uint32(len(key)), unsafe.Pointer(unsafe.SliceData(value)), uint32(len(value)), ttlMs)
}

func kvDelete(key string) int32 { return importKVDelete(stringPtr(key), uint32(len(key))) }

func kvIncr(key string, delta, windowMs int64) int64 {
	return importKVIncr(stringPtr(key), uint32(len(key)), delta, windowMs)
}

func kvTake(key string, limit, windowMs int64) int64 {
	return importKVTake(stringPtr(key), uint32(len(key)), limit, windowMs)
}

//go:wasmimport plantgate kv_take_sliding
//go:noescape
func importKVTakeSliding(keyPtr unsafe.Pointer, keyLen uint32, limit int64, windowMs int64) int64

func kvTakeSliding(key string, limit, windowMs int64) int64 {
	return importKVTakeSliding(stringPtr(key), uint32(len(key)), limit, windowMs)
}

func hostLog(level int32, msg string) {
	importLog(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

func tokenLookup(digest *[abi.DigestSize]byte, out []byte) int32 {
	return importTokenLookup(unsafe.Pointer(digest), abi.DigestSize, unsafe.Pointer(unsafe.SliceData(out)), uint32(len(out)))
}

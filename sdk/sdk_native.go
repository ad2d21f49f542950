//go:build !wasip1

package sdk

import (
	"github.com/plantgate/plantgate/sdk/abi"
	"github.com/plantgate/plantgate/sdk/internal/module"
)

// This file is the native twin of sdk_wasip1.go: instead of //go:wasmexport
// it hands the same export bodies to package sdktest, and instead of
// //go:wasmimport it calls host functions that tests replace.

func init() {
	module.Phases = phases
	module.Buffer = buffer
	module.Configure = configure
	module.Authorize = authorize
	module.Validate = validate
}

func hostLog(level int32, msg string) {
	if f := module.Log; f != nil {
		f(level, msg)
	}
}

// A native build without a KV hook (sdktest.SetKV) has no store.

func kvGet(key string, out []byte) int32 {
	if f := module.KVGet; f != nil {
		return f(key, out)
	}
	return int32(abi.KVUnavailable)
}

func kvSet(key string, value []byte, ttlMs int64) int32 {
	if f := module.KVSet; f != nil {
		return f(key, value, ttlMs)
	}
	return int32(abi.KVUnavailable)
}

func kvDelete(key string) int32 {
	if f := module.KVDelete; f != nil {
		return f(key)
	}
	return int32(abi.KVUnavailable)
}

func kvIncr(key string, delta, windowMs int64) int64 {
	if f := module.KVIncr; f != nil {
		return f(key, delta, windowMs)
	}
	return abi.KVUnavailable
}

func kvTake(key string, limit, windowMs int64) int64 {
	if f := module.KVTake; f != nil {
		return f(key, limit, windowMs)
	}
	return abi.KVUnavailable
}

func kvTakeSliding(key string, limit, windowMs int64) int64 {
	if f := module.KVTakeSliding; f != nil {
		return f(key, limit, windowMs)
	}
	return abi.KVUnavailable
}

func tokenLookup(digest *[abi.DigestSize]byte, out []byte) int32 {
	if f := module.TokenLookup; f != nil {
		return f(digest[:], out)
	}
	return abi.LookupNotFound
}

// Package module is a native build of a plugin seen the way the host sees
// the WebAssembly module: its exports as Go functions and its imports as
// replaceable variables, both at the byte level of package abi.
//
// Package sdk fills in the exports when it is compiled without wasip1; package
// sdktest calls them and replaces the imports. Nothing else should use it:
// a plugin author goes through sdk and sdktest.
package module

// Exports of the plugin, set by package sdk's init in native builds. Each
// takes a request in the layout of package abi and returns the decision
// record the wasm export would point to, or nil for abi.ResultAllow. The
// record aliases an SDK-owned buffer that the next call overwrites.
var (
	Phases    func() uint32
	Buffer    func(size uint32) []byte // nil when the SDK cannot provide size bytes
	Configure func(msg []byte) []byte
	Authorize func(msg []byte) []byte
	Validate  func(msg []byte) []byte
)

// Imports of the plugin. Nil means the default of a native build: logs are
// dropped and every token lookup answers abi.LookupNotFound.
var (
	// Log is abi.ImportLog. msg is valid only during the call.
	Log func(level int32, msg string)
	// TokenLookup is abi.ImportTokenLookup: it writes the record for digest
	// to out and returns its length, or a negative abi.Lookup… result.
	TokenLookup func(digest, out []byte) int32

	// The KV imports (abi.ImportKVGet and its siblings), in the plugin's
	// namespace. Nil: every call answers abi.KVUnavailable.
	KVGet    func(key string, out []byte) int32
	KVSet    func(key string, value []byte, ttlMs int64) int32
	KVDelete func(key string) int32
	KVIncr   func(key string, delta, windowMs int64) int64
	KVTake   func(key string, limit, windowMs int64) int64
	// KVTakeSliding is abi.ImportKVTakeSliding.
	KVTakeSliding func(key string, limit, windowMs int64) int64
)

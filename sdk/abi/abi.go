// Package abi is the wire contract between the Plantgate host and its policy
// plugins: the names and signatures of every export and import, the ABI
// version, the decision codes and the byte layout of every message that
// crosses the WebAssembly boundary.
//
// Both the host (host/wasm) and the plugin SDK (sdk) import this package, so
// the two sides can never drift apart. It depends on the standard library
// only and must stay that way: it is compiled into every plugin.
//
// # The call sequence
//
// For every instance the host
//
//  1. instantiates the module, running [ExportInitialize] (Go's package init);
//  2. checks [ExportABIVersion] == [Version] and reads [ExportPhases];
//  3. if the plugin has a config and exports [ExportConfigure], copies the
//     config into the buffer from [ExportBuffer] and calls [ExportConfigure].
//
// For every request and phase the host writes one encoded request
// ([AppendAuthorize] or [AppendValidate]) into the buffer from [ExportBuffer]
// and calls the phase's export once. The guest answers with a [Result]. The
// host calls [ExportBuffer] again only when a request is larger than any
// the instance's buffer was asked for, so most phases are one call.
//
// # Notes
//
//   - All integers are little-endian, as WebAssembly memory is.
//   - Strings are UTF-8 bytes prefixed with their length as a uint32.
//   - Every export takes and returns fixed-size scalars only, because
//     //go:wasmexport accepts nothing else: buffers travel as (ptr, len).
package abi

// Version is the ABI version this package describes. The host loads a
// module whose [ExportABIVersion] returns any version from [MinVersion] to
// Version and refuses the rest at load.
//
// Version 2 added, compatibly:
//   - request context after the fields of version 1 in [Authorize] (request
//     id, client address, the headers the plugin's sidecar asks for, the
//     principal) and the principal in [Validate]: a version-1 parser stops
//     before them, so the host sends them to every module;
//   - response headers in a decision record ([DecisionHeaders]), a flag in
//     a byte that version 1 leaves zero;
//   - the KV imports ([ImportKVGet] and its siblings), which the host
//     offers to every module (a version-1 module imports none of them).
const Version uint32 = 2

// MinVersion is the oldest version the host still loads.
const MinVersion uint32 = 1

// Exports a plugin module provides. The host checks each one's signature at
// load and names the export and the expected signature when it is wrong.
const (
	// ExportInitialize is the reactor start function that Go emits for
	// -buildmode=c-shared; it runs the Go runtime and package init. Optional
	// for hand-written modules.
	//
	// Signature: () -> ()
	ExportInitialize = "_initialize"

	// ExportABIVersion returns the [Version] the module was built against.
	//
	// Signature: () -> i32
	ExportABIVersion = "plantgate_abi_version"

	// ExportPhases returns the phases the module serves as a bit set of
	// [PhaseAuthorize] and [PhaseValidate]. At least one bit must be set, and
	// the export of every set phase must exist.
	//
	// Signature: () -> i32
	ExportPhases = "plantgate_phases"

	// ExportBuffer returns the address of a guest-owned buffer of at least
	// size bytes. The host writes each request there. A guest that cannot
	// provide it returns 0.
	//
	// The buffer stays valid, at the same address and for at least size
	// bytes, until a later ExportBuffer call asks for more than size: the
	// host asks again only for a larger request, which saves one call into
	// the module per phase. A guest may move the buffer only when asked for
	// more than it has handed out before.
	//
	// Signature: (size i32) -> i32
	ExportBuffer = "plantgate_buffer"

	// ExportConfigure receives the plugin's config (the "config" value of its
	// sidecar file, as JSON bytes) once per instance, before any phase call.
	// It returns [ResultAllow] when the config is accepted, or a [Result]
	// pointing to a [VerdictFault] decision whose text says what is wrong.
	// Optional: a module without it takes no config.
	//
	// Signature: (ptr i32, len i32) -> i64
	ExportConfigure = "plantgate_configure"

	// ExportConfigRequired returns non-zero when the plugin cannot run
	// without a config: the host then refuses to load it when its sidecar
	// has no "config" (rather than start it on defaults its author never
	// meant to ship). Optional: a module without it, or returning 0, runs
	// with or without a config. Called once, after [ExportPhases].
	//
	// Signature: () -> i32
	ExportConfigRequired = "plantgate_config_required"

	// ExportAuthorize decides the authorize phase for one request encoded by
	// [AppendAuthorize]. It runs before the request body is read.
	//
	// Signature: (ptr i32, len i32) -> i64
	ExportAuthorize = "plantgate_authorize"

	// ExportValidate decides the validate phase for one plant encoded by
	// [AppendValidate]: the host's canonical decoding of the body, never the
	// raw bytes.
	//
	// Signature: (ptr i32, len i32) -> i64
	ExportValidate = "plantgate_validate"
)

// Phase bits returned by [ExportPhases].
const (
	PhaseAuthorize uint32 = 1 << 0
	PhaseValidate  uint32 = 1 << 1
	// PhaseMask has every phase this version knows; other bits are refused.
	PhaseMask = PhaseAuthorize | PhaseValidate
)

// Imports the host provides in the module named [HostModule]. They are the
// only capabilities a plugin has: no filesystem, network or environment.
const (
	// HostModule is the import module name of the host functions.
	HostModule = "plantgate"

	// ImportLog writes text to the host's log, attributed to the plugin.
	// level uses log/slog's numbering (see [LogDebug] and its siblings).
	//
	// Signature: (level i32, ptr i32, len i32) -> ()
	ImportLog = "log"

	// ImportTokenLookup looks up the access token whose SHA-256 digest is the
	// hashLen (= 32) bytes at hashPtr and writes its [TokenRecord] to out.
	// It returns the record's length n. When n > outCap nothing was written
	// and the guest may call again with a buffer of n bytes. Negative results
	// are [LookupNotFound], [LookupUnavailable] and [LookupBadArgument].
	//
	// Signature: (hashPtr i32, hashLen i32, outPtr i32, outCap i32) -> i32
	ImportTokenLookup = "token_lookup"
)

// KV imports: a small key-value store and counters per plugin, kept in the
// gateway's store (fleet-wide on Redis). The host prefixes every key with
// the plugin's own namespace (its name in the chain, like "rate-limit"), so
// a plugin can never name, read or change another plugin's keys. A key is
// 1 to [MaxKVKey] bytes, a value at most [MaxKVValue] bytes. One phase call
// may make at most [KVBudget] KV calls; later ones answer [KVOverBudget].
// Negative results are the KV* errors below.
const (
	// ImportKVGet reads the value of key into out. It returns the value's
	// length n; when n > outCap nothing was written and the guest may call
	// again with a buffer of n bytes (it counts against the budget again).
	// [KVNotFound] when the key has no value.
	//
	// Signature: (keyPtr i32, keyLen i32, outPtr i32, outCap i32) -> i32
	ImportKVGet = "kv_get"

	// ImportKVSet stores value under key for ttlMs milliseconds (0: until
	// deleted). It returns 0.
	//
	// Signature: (keyPtr i32, keyLen i32, valPtr i32, valLen i32, ttlMs i64) -> i32
	ImportKVSet = "kv_set"

	// ImportKVDelete deletes key. It returns 1 when the key had a value,
	// 0 when it had none.
	//
	// Signature: (keyPtr i32, keyLen i32) -> i32
	ImportKVDelete = "kv_delete"

	// ImportKVIncr adds delta to key's counter for the current window of
	// windowMs milliseconds (windows are aligned to the Unix epoch, so every
	// gateway agrees on them) and returns the counter after the addition,
	// atomically across the fleet. A new window starts at 0. One store
	// round trip per call: for a per-request limit use [ImportKVTake].
	//
	// Signature: (keyPtr i32, keyLen i32, delta i64, windowMs i64) -> i64
	ImportKVIncr = "kv_incr"

	// ImportKVTake takes one unit of key's budget of limit per window of
	// windowMs milliseconds (aligned to the Unix epoch), shared by the
	// fleet. The gateway leases small parts of the budget from the store in
	// one atomic step and spends them locally, for every instance of the
	// plugin, so most takes cost no store round trip and the fleet never
	// grants more than limit in a window (it may grant a little less: a
	// gateway's unspent lease at the window's end is lost). The result is a
	// [Take] when not negative.
	//
	// Signature: (keyPtr i32, keyLen i32, limit i64, windowMs i64) -> i64
	ImportKVTake = "kv_take"
)

// Results of the KV imports below zero.
const (
	KVNotFound    int64 = -1 // kv_get: the key has no value
	KVUnavailable int64 = -2 // the store could not be asked; fail closed unless configured otherwise
	KVBadArgument int64 = -3 // a key, value, pointer, TTL, window or limit is out of range
	KVOverBudget  int64 = -4 // the call already made KVBudget KV calls
)

// KV bounds.
const (
	MaxKVKey   = 256        // bytes of a key
	MaxKVValue = 4096       // bytes of a value
	KVBudget   = 8          // KV calls per phase call
	MaxKVTTL   = 86_400_000 // the longest TTL and window, in milliseconds (a day)
)

// Take is a non-negative [ImportKVTake] result, packed as
//
//	bit 62      set when the budget is spent: deny
//	bits 32–61  the units left in the window (an estimate: other gateways
//	            may hold leases), at most 2^30-1
//	bits 0–31   milliseconds until the window resets
type Take = int64

// PackTake packs a [Take].
func PackTake(denied bool, remaining, resetMs int64) Take {
	t := min(max(remaining, 0), 1<<30-1)<<32 | min(max(resetMs, 0), 1<<32-1)
	if denied {
		t |= 1 << 62
	}
	return t
}

// UnpackTake splits a [Take].
func UnpackTake(t Take) (denied bool, remaining, resetMs int64) {
	return t&(1<<62) != 0, t >> 32 & (1<<30 - 1), t & (1<<32 - 1)
}

// Results of [ImportTokenLookup] below zero.
const (
	LookupNotFound    int32 = -1 // no token has this digest
	LookupUnavailable int32 = -2 // the token store could not be asked; deny with a 503
	LookupBadArgument int32 = -3 // hashLen is not 32 or a pointer is out of range
)

// Log levels for [ImportLog], equal to log/slog's.
const (
	LogDebug int32 = -4
	LogInfo  int32 = 0
	LogWarn  int32 = 4
	LogError int32 = 8
)

// Limits on what crosses the boundary. The host refuses a decision that
// breaks them as a plugin fault.
const (
	// MaxText is the longest deny message, principal or fault text in bytes.
	MaxText = 1024
	// MaxLog is the longest log line the host accepts; longer ones are cut.
	MaxLog = 4096
	// MaxRequestHeaders is the most request headers a sidecar may ask for.
	MaxRequestHeaders = 16
	// MaxHeaderValue is the longest request header value sent to a plugin,
	// and the longest response header value a decision may carry. A longer
	// request header value is cut at this many bytes.
	MaxHeaderValue = 1024
)

// ResponseHeaders is the allow-list of response headers a decision may
// carry, in canonical form (case does not matter in a decision). The host
// refuses a decision with any other header, or a value over
// [MaxHeaderValue] bytes or with bytes outside printable ASCII, as an
// invalid decision (500, error 50002): a plugin cannot set cookies, CORS or
// caching headers, or split the response.
//
//	Retry-After       RFC 9110 §10.2.3: seconds to wait
//	RateLimit         draft-ietf-httpapi-ratelimit-headers: "policy";r=left;t=seconds
//	RateLimit-Policy  draft-ietf-httpapi-ratelimit-headers: "policy";q=quota;w=seconds
var ResponseHeaders = [...]string{"Retry-After", "RateLimit", "RateLimit-Policy"}

// ResponseHeader returns the canonical form of name when it is in
// [ResponseHeaders], or "" and false.
func ResponseHeader(name string) (string, bool) {
	for _, h := range ResponseHeaders {
		if equalFold(h, name) {
			return h, true
		}
	}
	return "", false
}

// equalFold is ASCII strings.EqualFold, without importing strings.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

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

// Version is the ABI version this package describes. A module whose
// [ExportABIVersion] returns anything else is refused at load.
const Version uint32 = 1

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
)

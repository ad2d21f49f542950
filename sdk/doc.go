// Package sdk is what a Plantgate policy plugin imports: it registers the
// plugin's handlers, decodes each request the host sends, and encodes the
// plugin's decision, all without allocating on the per-call path.
//
// A plugin is a plain package main whose init registers handlers:
//
//	package main
//
//	import "github.com/plantgate/plantgate/sdk"
//
//	func init() {
//		sdk.HandleValidate(func(p sdk.Plant) sdk.Decision {
//			if p.Name == "" {
//				return sdk.Deny(40050, "name must not be empty")
//			}
//			return sdk.Allow()
//		})
//	}
//
//	func main() {}
//
// and is built as a WebAssembly reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o 10-rules.wasm ./plugins/rules
//
// The same package compiles natively, so plugin logic is unit-tested with
// plain go test through package sdktest, which drives the same decoding and
// encoding code the wasm exports run. `plantgate plugin new NAME` writes
// such a package, with its test, a Makefile, a sidecar and a copy of this
// SDK, as a project that builds on its own (sdk/README.md).
//
// # Notes
//
//   - Register handlers in init: a c-shared module runs package init (the
//     _initialize export) but never main.
//   - The strings in a [Request] or [Plant], and those of a [Token], alias
//     buffers the SDK reuses: they are valid only until the handler returns.
//     Copy one with strings.Clone to keep it.
//   - A plugin instance serves one call at a time, so handlers need no
//     locks; nothing in this package is safe for concurrent use.
//   - Allocating in a handler is allowed but costs tail latency: the guest's
//     garbage collector runs inside a request. Keep the allow path free of
//     allocations and build messages only when denying.
//   - Everything that goes wrong fails closed: a panic, an invalid deny code,
//     the zero [Decision] or a phase without a handler becomes a fault, which
//     the host turns into an error response without showing the guest's text.
//     A recovered panic's fault names the function and file:line that
//     panicked, for the host's log.
//
// The wire format lives in package abi; this package is its guest side.
package sdk

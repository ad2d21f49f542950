// Package plantgate carries the plugin SDK's source inside the plantgate
// binary, so that `plantgate plugin new` can give a new plugin project a
// copy of it: the SDK module is not published, and a project made that way
// builds offline, anywhere, with the SDK of the gateway that made it.
//
// It sits at the module root because go:embed reaches only files below the
// embedding package.
package plantgate

import "embed"

// SDKFiles holds go.mod and the Go files of the packages a plugin builds
// against: sdk, sdk/abi, sdk/internal/module and sdk/sdktest (their tests
// included; a copy leaves them out).
//
//go:embed go.mod sdk/*.go sdk/abi/*.go sdk/internal/module/*.go sdk/sdktest/*.go
var SDKFiles embed.FS

// KitFiles holds the guest kits for other languages that `plantgate plugin
// new --lang` copies into a project: the Rust crate's sources and
// Cargo.toml, the C kit's header, source and test host, and the
// AssemblyScript package (a project's package.json names it as a file:
// dependency: the kit is not published on npm), each with its guide, and
// docs/abi.md: a project's README points at copies it has, not at a
// repository its author may never have cloned.
//
//go:embed sdk/rust/Cargo.toml sdk/rust/src/*.rs sdk/rust/README.md sdk/c/plantgate.h sdk/c/plantgate.c sdk/c/plantgate_testing.h sdk/c/plantgate_testing.c sdk/c/README.md
//go:embed docs/abi.md
//go:embed sdk/assemblyscript/package.json sdk/assemblyscript/index.ts sdk/assemblyscript/exports.ts sdk/assemblyscript/README.md sdk/assemblyscript/assembly/*.ts
var KitFiles embed.FS

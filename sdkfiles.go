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

// ASKitFiles holds the AssemblyScript guest kit (sdk/assemblyscript) that
// `plantgate plugin new --lang assemblyscript` copies into a new project's
// plantgate-sdk/, which its package.json names as a file: dependency: the
// kit is not published on npm.
//
//go:embed sdk/assemblyscript/package.json sdk/assemblyscript/index.ts sdk/assemblyscript/exports.ts sdk/assemblyscript/README.md sdk/assemblyscript/assembly/*.ts
var ASKitFiles embed.FS

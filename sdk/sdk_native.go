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

func tokenLookup(digest *[abi.DigestSize]byte, out []byte) int32 {
	if f := module.TokenLookup; f != nil {
		return f(digest[:], out)
	}
	return abi.LookupNotFound
}

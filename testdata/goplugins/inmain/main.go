//go:build wasip1

// Command inmain is a host/wasm test fixture of an ordinary mistake: it
// registers its handlers in main, which a c-shared module never runs, so
// the host finds no phase served.
//
// host/wasm's TestMain builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
package main

import "github.com/plantgate/plantgate/sdk"

func main() {
	sdk.HandleValidate(func(sdk.Plant) sdk.Decision { return sdk.Allow() })
}

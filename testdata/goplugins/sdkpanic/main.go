//go:build wasip1

// Command sdkpanic is a host/wasm test fixture built on the SDK: it allows
// as principal "sdk-user", except an authorize request for the path
// "/panic", where its handler panics (the SDK turns that into a fault).
// Validate allows.
//
// host/wasm's TestMain builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
package main

import "github.com/plantgate/plantgate/sdk"

func init() {
	sdk.HandleAuthorize(func(r sdk.Request) sdk.Decision {
		if r.Path == "/panic" {
			panic("sdk fixture panic")
		}
		return sdk.AllowAs("sdk-user")
	})
	sdk.HandleValidate(func(sdk.Plant) sdk.Decision { return sdk.Allow() })
}

func main() {}

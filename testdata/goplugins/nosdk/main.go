//go:build wasip1

// Command nosdk is a host/wasm test fixture of an ordinary mistake: a
// c-shared Go module that does not import the SDK, so it exports none of
// the plugin functions.
//
// host/wasm's TestMain builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
package main

func main() {}

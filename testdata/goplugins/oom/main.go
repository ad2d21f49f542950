//go:build wasip1

// Command oom is a host/wasm test fixture built on the SDK: an authorize
// request for the path "/oom" allocates until the guest runs out of
// memory; one for "/stderr" writes a line to stderr and allows, as does
// every other request.
//
// host/wasm's TestMain builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
package main

import (
	"fmt"
	"os"

	"github.com/plantgate/plantgate/sdk"
)

// hoard keeps every allocation alive, so the collector cannot free them.
var hoard [][]byte

func init() {
	sdk.HandleAuthorize(func(r sdk.Request) sdk.Decision {
		switch r.Path {
		case "/oom":
			for {
				hoard = append(hoard, make([]byte, 1<<20))
			}
		case "/stderr":
			fmt.Fprintln(os.Stderr, "a note on stderr")
		}
		return sdk.Allow()
	})
}

func main() {}

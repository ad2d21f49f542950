//go:build wasip1

// Command operation is a host/http test fixture built on the SDK: an
// authorize plugin that denies every request with 40399 and a message
// naming the operation it was shown (method, path, route, path id), so a
// test can see exactly what an authorize plugin learns.
//
// host/http's TestMain builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
package main

import (
	"fmt"

	"github.com/plantgate/plantgate/sdk"
)

func init() {
	sdk.HandleAuthorize(func(r sdk.Request) sdk.Decision {
		return sdk.Deny(40399, fmt.Sprintf("method=%s path=%s route=%q id=%d has_id=%v", r.Method, r.Path, r.Route, r.PathID, r.HasPathID))
	})
}

func main() {}

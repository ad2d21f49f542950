//go:build wasip1

// Command kv is a host/http test fixture built on the SDK: an authorize
// plugin that runs the KV operation its X-KV header names and denies 40397
// with the outcome, so a test sees exactly what the plugin saw. Its
// sidecar asks for X-KV.
//
//	set KEY VALUE   sdk.Set with no TTL     → "set: ok"
//	get KEY         sdk.Get                 → "get: VALUE"
//	del KEY         sdk.Delete              → "del: true|false"
//	incr KEY        sdk.Incr by 1, 1 minute → "incr: N"
//	budget          sdk.Set until it fails  → "budget: call N: ERROR"
//
// An error answers "OP: ERROR"; sdk.ErrUnavailable answers 503 50397.
// Without X-KV it allows.
package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/plantgate/plantgate/sdk"
)

func init() {
	sdk.HandleAuthorize(func(r sdk.Request) sdk.Decision {
		cmd, ok := r.Header("X-KV")
		if !ok {
			return sdk.Allow()
		}
		f := strings.Fields(cmd)
		var out string
		var err error
		switch f[0] {
		case "set":
			err = sdk.Set(f[1], []byte(f[2]), 0)
			out = "ok"
		case "get":
			var v []byte
			v, err = sdk.Get(f[1])
			out = string(v)
		case "del":
			var d bool
			d, err = sdk.Delete(f[1])
			out = fmt.Sprint(d)
		case "incr":
			var n int64
			n, err = sdk.Incr(f[1], 1, time.Minute)
			out = fmt.Sprint(n)
		case "budget":
			for i := 1; err == nil; i++ {
				if err = sdk.Set("b", []byte("x"), time.Second); err != nil {
					err = fmt.Errorf("call %d: %w", i, err)
				}
			}
		}
		if errors.Is(err, sdk.ErrUnavailable) {
			return sdk.Deny(50397, f[0]+": "+err.Error())
		}
		if err != nil {
			out = err.Error()
		}
		return sdk.Deny(40397, f[0]+": "+out)
	})
}

func main() {}

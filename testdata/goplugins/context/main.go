//go:build wasip1

// Command context is a host/http test fixture built on the SDK: it shows
// what the ABI 2 request context carries, and sends response headers.
// Its sidecar asks for X-Echo and X-Tenant. By X-Echo:
//
//	context       deny 40398 naming the request id, client, X-Tenant, principal and scopes
//	length        deny 40398 "tenant_len=N", the length of the X-Tenant it is shown
//	headers       allow with RateLimit and RateLimit-Policy
//	deny-headers  deny 42951 "slow down" with Retry-After: 9
//	(absent)      allow
//
// Its validate phase denies 40398 naming the caller when the plant's name
// is "echo".
package main

import (
	"fmt"

	"github.com/plantgate/plantgate/sdk"
)

func init() {
	sdk.HandleAuthorize(func(r sdk.Request) sdk.Decision {
		echo, _ := r.Header("x-echo")
		switch echo {
		case "context":
			tenant, ok := r.Header("X-Tenant")
			return sdk.Deny(40398, fmt.Sprintf("rid=%s client=%s tenant=%q/%v principal=%s scopes=%q",
				r.RequestID, r.Client, tenant, ok, r.Caller.Name, r.Caller.Scopes))
		case "length":
			tenant, _ := r.Header("X-Tenant")
			return sdk.Deny(40398, fmt.Sprintf("tenant_len=%d", len(tenant)))
		case "headers":
			return sdk.Allow().WithHeader("RateLimit", `"default";r=7;t=3`).WithHeader("ratelimit-policy", `"default";q=10;w=5`)
		case "deny-headers":
			return sdk.Deny(42951, "slow down").WithHeader("Retry-After", "9")
		}
		return sdk.Allow()
	})
	sdk.HandleValidate(func(p sdk.Plant) sdk.Decision {
		if p.Name == "echo" {
			return sdk.Deny(40398, fmt.Sprintf("caller=%s scopes=%q can_write=%v", p.Caller.Name, p.Caller.Scopes, p.Caller.HasScope("plants:write")))
		}
		return sdk.Allow()
	})
}

func main() {}

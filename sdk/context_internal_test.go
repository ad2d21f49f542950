package sdk

import (
	"testing"
	"time"

	"github.com/plantgate/plantgate/sdk/abi"
	"github.com/plantgate/plantgate/sdk/internal/module"
)

// TestContextCallsDoNotAllocate: reading the version-2 context, taking
// from a budget and denying with constant headers cost no allocation, and
// the record carries the headers.
func TestContextCallsDoNotAllocate(t *testing.T) {
	module.KVTakeSliding = func(key string, limit, windowMs int64) int64 {
		if key != "ci" || limit != 10 || windowMs != 1000 {
			return abi.KVBadArgument
		}
		return abi.PackTake(true, 0, 250)
	}
	t.Cleanup(func() { module.KVTakeSliding = nil; authorizeHandler = nil })
	authorizeHandler = func(r Request) Decision {
		tenant, ok := r.Header("x-tenant")
		if !ok || tenant != "blue" || r.RequestID != "req-1" || r.Client != "192.0.2.7" || !r.Caller.HasScope("plants:write") {
			return Fault("context not as sent")
		}
		if t, err := Take(r.Caller.Name, 10, time.Second); err != nil || t.Allowed || t.Reset != 250*time.Millisecond {
			return Fault("take not as answered")
		}
		return Deny(CodeTooManyRequests, "limited").WithHeader("Retry-After", "1").WithHeader("RateLimit", `"default";r=0;t=1`)
	}
	msg := abi.AppendOperation(abi.AppendAuthorize(nil, "GET", "/plants", ""), "GET /plants", 0, false)
	msg, block := abi.AppendContext(msg, "req-1", []byte("192.0.2.7"))
	msg = abi.AppendRequestHeader(msg, block, "X-Tenant", []byte("blue"))
	msg = abi.AppendPrincipal(msg, "ci", []string{"plants:read plants:write"})
	in := buffer(uint32(len(msg)))[:copy(request, msg)]
	d, err := abi.ParseDecision(authorize(in))
	if err != nil || d.Verdict != abi.VerdictDeny || string(d.Text) != "limited" {
		t.Fatalf("decision %+v %q, %v", d, d.Text, err)
	}
	n, v, _, _ := abi.NextHeader(d.Headers)
	if string(n) != "Retry-After" || string(v) != "1" {
		t.Fatalf("headers %q", d.Headers)
	}
	if n := testing.AllocsPerRun(1000, func() { authorize(in) }); n != 0 {
		t.Errorf("authorize allocates %v times per call, want 0", n)
	}
}

package wasm

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// TestRequestDigest: the chain takes the digest of a credential the host
// resolved from the resolved token (hashed once per request), and hashes
// any other credential itself.
func TestRequestDigest(t *testing.T) {
	const cred = "header.payload.signature"
	want := sha256.Sum256([]byte(cred))
	if got := requestDigest(context.Background(), cred); got != want {
		t.Fatalf("no exchange: %x", got)
	}
	ctx, x := host.NewExchange(context.Background())
	if got := requestDigest(ctx, cred); got != want {
		t.Fatalf("nothing resolved: %x", got)
	}
	x.SetCredential(host.Token{Digest: want, Name: "oidc:alice"}, time.Now().Add(time.Minute))
	if got := requestDigest(ctx, cred); got != want {
		t.Fatalf("resolved: %x", got)
	}
	if got := requestDigest(ctx, ""); got != ([32]byte{}) {
		t.Fatalf("no credential: %x", got)
	}
}

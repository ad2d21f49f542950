package http_test

import (
	"testing"

	"github.com/pb33f/libopenapi"

	gatehttp "github.com/plantgate/plantgate/host/http"
)

// TestOpenAPIWithOIDC: the document serve publishes with --oidc-issuer is
// a valid OpenAPI document naming the issuer's OpenID Connect scheme as an
// alternative to the bearer scheme.
func TestOpenAPIWithOIDC(t *testing.T) {
	b := gatehttp.OpenAPIWithOIDC("https://login.example.com/realms/plants/")
	if b == nil {
		t.Fatal("openapi.yaml lost the anchors OpenAPIWithOIDC extends")
	}
	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := m.Model.Components.SecuritySchemes.Get("oidc")
	if !ok || s.Type != "openIdConnect" || s.OpenIdConnectUrl != "https://login.example.com/realms/plants/.well-known/openid-configuration" {
		t.Fatalf("oidc scheme: %+v", s)
	}
	if n := len(m.Model.Security); n != 2 {
		t.Fatalf("%d top-level security requirements, want bearerAuth or oidc", n)
	}
	if _, ok := m.Model.Security[1].Requirements.Get("oidc"); !ok {
		t.Fatal("the second security requirement is not oidc")
	}
}

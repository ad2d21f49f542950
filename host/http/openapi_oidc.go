package http

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Anchors in openapi.yaml that OpenAPIWithOIDC extends; a test holds the
// document to them.
const (
	securityAnchor = "security:\n  - bearerAuth: []\n"
	schemesAnchor  = "  securitySchemes:\n    bearerAuth:\n      type: http\n      scheme: bearer\n"
)

// OpenAPIWithOIDC returns the OpenAPI document naming, beside the bearer
// scheme, the OpenID Connect security scheme of issuer (its discovery
// document), as either way to meet every operation's security: what serve
// publishes when --oidc-issuer is set. A client generator then knows where
// to get a token. nil when the document lost its anchors (a test keeps it
// from happening).
func OpenAPIWithOIDC(issuer string) []byte {
	if !bytes.Contains(OpenAPI, []byte(securityAnchor)) || !bytes.Contains(OpenAPI, []byte(schemesAnchor)) {
		return nil
	}
	// A JSON string is a YAML scalar, quoted and escaped alike.
	url, _ := json.Marshal(strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration")
	doc := strings.Replace(string(OpenAPI), securityAnchor, securityAnchor+"  - oidc: []\n", 1)
	doc = strings.Replace(doc, schemesAnchor, schemesAnchor+
		"    oidc:\n"+
		"      type: openIdConnect\n"+
		"      openIdConnectUrl: "+string(url)+"\n"+
		"      description: An access token (JWT) of this issuer, for this gateway's audience; its scope or scp claim holds plants:read, plants:write or plants:delete.\n", 1)
	return []byte(doc)
}

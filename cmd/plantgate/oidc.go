package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host"
	plantshttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/oidc"
)

// OIDC is serve's identity provider settings (docs/identity-providers.md).
type OIDC struct {
	Issuer      string        // "": access tokens are not accepted
	Audience    string        // required with Issuer
	Leeway      time.Duration // clock skew allowed on exp, nbf, iat
	CAFile      string        // "": the system roots
	CallerClaim string        // "": sub
	ScopeClaim  string        // "": scope, then scp
}

func oidcFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "oidc-issuer", Usage: "accept the OAuth 2.0 access tokens (JWTs) of this OpenID provider, its issuer URL exactly as its tokens' iss says; keys come from its discovery document's jwks_uri (see docs/identity-providers.md)", Sources: env("OIDC_ISSUER")},
		&cli.StringFlag{Name: "oidc-audience", Usage: "the audience an access token's aud must contain (required with --oidc-issuer)", Sources: env("OIDC_AUDIENCE")},
		&cli.DurationFlag{Name: "oidc-leeway", Value: 30 * time.Second, Usage: "clock skew allowed on an access token's exp, nbf and iat", Sources: env("OIDC_LEEWAY")},
		&cli.StringFlag{Name: "oidc-ca-file", Usage: "PEM file of the CAs the identity provider's TLS certificate must chain to, instead of the system roots", Sources: env("OIDC_CA_FILE")},
		&cli.StringFlag{Name: "oidc-scope-claim", Usage: "the one access token claim to read scopes from (a space-separated string or an array of strings), e.g. roles for Entra ID's application permissions; unset, scope and then scp are read", Sources: env("OIDC_SCOPE_CLAIM")},
		&cli.StringFlag{Name: "oidc-caller-claim", Value: "sub", Usage: `the access token claim that names the caller; the caller is then "oidc:" and its value`, Sources: env("OIDC_CALLER_CLAIM")},
	}
}

func oidcOptions(cmd *cli.Command) (OIDC, error) {
	o := OIDC{Issuer: cmd.String("oidc-issuer"), Audience: cmd.String("oidc-audience"), Leeway: cmd.Duration("oidc-leeway"),
		CAFile: cmd.String("oidc-ca-file"), CallerClaim: cmd.String("oidc-caller-claim"), ScopeClaim: cmd.String("oidc-scope-claim")}
	switch {
	case o.Issuer == "" && (o.Audience != "" || o.CAFile != ""):
		return o, errors.New("--oidc-audience and --oidc-ca-file need --oidc-issuer")
	case o.Issuer == "" && o.ScopeClaim != "":
		return o, errors.New("--oidc-scope-claim needs --oidc-issuer")
	case o.Issuer != "" && o.Audience == "":
		return o, errors.New("--oidc-issuer needs --oidc-audience: the audience this gateway's access tokens are issued for")
	case o.Leeway < 0 || o.Leeway > 5*time.Minute:
		return o, fmt.Errorf("--oidc-leeway %s: want 0 to 5m", o.Leeway)
	case o.CallerClaim == "":
		return o, errors.New("--oidc-caller-claim is empty")
	}
	return o, nil
}

// errDottedBootstrap refuses a bootstrap token the gateway would take for an
// access token. storeUp checks it before the store is written: ensuring it
// first would revoke the fleet's active bootstrap token for a start that
// then never serves.
var errDottedBootstrap = errors.New("--bootstrap-token holds a dot: with --oidc-issuer such a credential is taken for an access token; choose one without")

// startOIDC makes the access-token resolver when an issuer is configured,
// and starts fetching its keys in the background: a provider that cannot
// be reached stops nothing.
func (m *Main) startOIDC() error {
	if m.OIDC.Issuer == "" {
		return nil
	}
	p, err := oidc.NewProvider(oidc.ProviderConfig{Issuer: m.OIDC.Issuer, CAFile: m.OIDC.CAFile, Logger: m.Logger})
	if err != nil {
		return err
	}
	leeway := m.OIDC.Leeway
	if leeway == 0 {
		leeway = -1 // the config's "none"
	}
	v, err := oidc.NewVerifier(p, oidc.VerifierConfig{Audience: m.OIDC.Audience, Leeway: leeway,
		CallerClaim: m.OIDC.CallerClaim, ScopeClaim: m.OIDC.ScopeClaim})
	if err != nil {
		return err
	}
	m.oidcKeys, m.oidc = p, oidc.NewResolver(v, 0)
	p.Start()
	scopes := m.OIDC.ScopeClaim
	if scopes == "" {
		scopes = "scope scp"
	}
	m.Logger.Info("accepting access tokens", "issuer", m.OIDC.Issuer, "audience", m.OIDC.Audience,
		"caller", oidc.CallerPrefix+"<"+m.OIDC.CallerClaim+">", "scopes", scopes, "leeway", leeway)
	return nil
}

// oidcStatus is what /readyz on the admin listener says about the
// identity provider: "" when it is not configured or all is well.
func (m *Main) oidcStatus() string {
	if m.oidcKeys == nil {
		return ""
	}
	_, reason := m.oidcKeys.Status()
	return reason
}

// openAPI is the served document: naming the OpenID Connect scheme too
// when an issuer is configured.
func (m *Main) openAPI() []byte {
	if m.OIDC.Issuer == "" {
		return nil
	}
	return plantshttp.OpenAPIWithOIDC(m.OIDC.Issuer)
}

// reservedName refuses a gateway token name that could pass for an
// identity provider's caller.
func reservedName(name string) error {
	if strings.HasPrefix(name, oidc.CallerPrefix) {
		return fmt.Errorf("--name %q starts with %q, which names the callers of access tokens (--oidc-issuer): choose another", name, oidc.CallerPrefix)
	}
	return nil
}

// credentials is the HTTP layer's resolver: nil (an interface holding no
// pointer) without an issuer.
func (m *Main) credentials() host.CredentialResolver {
	if m.oidc == nil {
		return nil
	}
	return m.oidc
}

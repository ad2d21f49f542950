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

	// RFC 7662 introspection of opaque access tokens.
	Introspection     bool
	ClientID          string  // the gateway's client at the provider
	ClientSecret      string  // from --oidc-client-secret-file; never logged
	IntrospectionRate float64 // provider calls a second; 0: the default
	RequireAudience   bool    // refuse an answer without aud
}

func oidcFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "oidc-issuer", Usage: "accept the OAuth 2.0 access tokens (JWTs) of this OpenID provider, its issuer URL exactly as its tokens' iss says; keys come from its discovery document's jwks_uri (see docs/identity-providers.md)", Sources: env("OIDC_ISSUER")},
		&cli.StringFlag{Name: "oidc-audience", Usage: "the audience an access token's aud must contain (required with --oidc-issuer)", Sources: env("OIDC_AUDIENCE")},
		&cli.DurationFlag{Name: "oidc-leeway", Value: 30 * time.Second, Usage: "clock skew allowed on an access token's exp, nbf and iat", Sources: env("OIDC_LEEWAY")},
		&cli.StringFlag{Name: "oidc-ca-file", Usage: "PEM file of the CAs the identity provider's TLS certificate must chain to, instead of the system roots", Sources: env("OIDC_CA_FILE")},
		&cli.StringFlag{Name: "oidc-scope-claim", Usage: "the one access token claim to read scopes from (a space-separated string or an array of strings), e.g. roles for Entra ID's application permissions; unset, scope and then scp are read", Sources: env("OIDC_SCOPE_CLAIM")},
		&cli.StringFlag{Name: "oidc-caller-claim", Value: "sub", Usage: `the access token claim that names the caller; the caller is then "oidc:" and its value`, Sources: env("OIDC_CALLER_CLAIM")},
		&cli.BoolFlag{Name: "oidc-introspection", Usage: "ask the provider's introspection endpoint (RFC 7662) about credentials that are not a JWT and not the gateway's own tokens: for providers that issue opaque access tokens; needs --oidc-client-id and --oidc-client-secret-file", Sources: env("OIDC_INTROSPECTION")},
		&cli.StringFlag{Name: "oidc-client-id", Usage: "the gateway's client id at the identity provider, for --oidc-introspection", Sources: env("OIDC_CLIENT_ID")},
		&cli.StringFlag{Name: "oidc-client-secret-file", Usage: "read the gateway's client secret at the identity provider from this file (one trailing newline is ignored), for --oidc-introspection", Sources: env("OIDC_CLIENT_SECRET_FILE")},
		&cli.BoolFlag{Name: "oidc-introspection-require-aud", Usage: "refuse an introspection answer that names no aud (RFC 7662 makes it optional; without this flag such an answer is accepted, an aud that is present must always contain --oidc-audience)", Sources: env("OIDC_INTROSPECTION_REQUIRE_AUD")},
		&cli.FloatFlag{Name: "oidc-introspection-rate", Value: oidc.DefaultIntrospectionRate, Usage: "most introspection calls a second (bursts of twice as many); unknown opaque credentials beyond it are refused 503 50306 without a call", Sources: env("OIDC_INTROSPECTION_RATE")},
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
	return o, introspectionOptions(cmd, &o)
}

// introspectionOptions reads the introspection flags into o, and the
// client secret from its file: never from the command line.
func introspectionOptions(cmd *cli.Command, o *OIDC) error {
	o.Introspection, o.ClientID, o.IntrospectionRate = cmd.Bool("oidc-introspection"), cmd.String("oidc-client-id"), cmd.Float("oidc-introspection-rate")
	o.RequireAudience = cmd.Bool("oidc-introspection-require-aud")
	secretFile := cmd.String("oidc-client-secret-file")
	switch {
	case !o.Introspection && (o.ClientID != "" || secretFile != ""):
		return errors.New("--oidc-client-id and --oidc-client-secret-file are for --oidc-introspection, which is off")
	case !o.Introspection && o.RequireAudience:
		return errors.New("--oidc-introspection-require-aud is for --oidc-introspection, which is off")
	case !o.Introspection:
		return nil
	case o.Issuer == "":
		return errors.New("--oidc-introspection needs --oidc-issuer: the provider whose discovery document names the introspection endpoint")
	case o.ClientID == "":
		return errors.New("--oidc-introspection needs --oidc-client-id: the gateway's client at the provider")
	case secretFile == "":
		return errors.New("--oidc-introspection needs --oidc-client-secret-file: the file holding the gateway's client secret")
	case !(o.IntrospectionRate > 0):
		return fmt.Errorf("--oidc-introspection-rate %v: want more than 0", o.IntrospectionRate)
	}
	var err error
	o.ClientSecret, err = readSecretFile("--oidc-client-secret-file", secretFile)
	return err
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
	p, err := oidc.NewProvider(oidc.ProviderConfig{Issuer: m.OIDC.Issuer, CAFile: m.OIDC.CAFile, Logger: m.Logger, Introspection: m.OIDC.Introspection})
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
	if m.OIDC.Introspection {
		m.introspector, err = oidc.NewIntrospector(v, oidc.IntrospectionConfig{ClientID: m.OIDC.ClientID, ClientSecret: m.OIDC.ClientSecret,
			Rate: m.OIDC.IntrospectionRate, RequireAudience: m.OIDC.RequireAudience})
		if err != nil {
			return err
		}
		rate, burst := m.introspector.Limits()
		m.Logger.Info("introspecting opaque access tokens", "client_id", m.OIDC.ClientID, "rate", rate, "burst", burst,
			"aud_required", m.OIDC.RequireAudience)
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

// startIntrospection has the resolver introspect what lookup, the
// gateway's own token lookup (the store behind the token cache), does not
// know, and counts the outcomes.
func (m *Main) startIntrospection(lookup oidc.Known) {
	if m.introspector == nil {
		return
	}
	m.oidc.Introspect(m.introspector, lookup)
	m.metrics.Introspections(oidc.OutcomeNames[:], func() []uint64 {
		s := m.introspector.Stats()
		return s[:]
	})
}

// oidcStatus is what /readyz on the admin listener says about the
// identity provider: "" when it is not configured or all is well.
func (m *Main) oidcStatus() string {
	if m.oidcKeys == nil {
		return ""
	}
	_, reason := m.oidcKeys.Status()
	if m.introspector == nil {
		return reason
	}
	if r := m.introspector.Status(); r != "" && reason != "" {
		reason += "; " + r
	} else if r != "" {
		reason = r
	}
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

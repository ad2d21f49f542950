package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/plantgate/plantgate/host"
)

// CallerPrefix starts the name of every caller an access token names
// ("oidc:" + the caller claim). `plantgate token create` refuses names
// that start with it, so a rate limit or canary share keyed on the name
// never mistakes an identity provider's caller for a gateway token.
const CallerPrefix = "oidc:"

// Bounds on what a token may carry into the gateway.
const (
	maxCallerName = 128 // the whole name, prefix included: as token create's
	maxScopeText  = 2048
)

// The refusals. Fixed messages: none echoes any part of the token.
var (
	errExpired     = &host.Error{Code: host.ErrTokenExpired, Message: "access token expired"}
	errNotYet      = &host.Error{Code: host.ErrTokenNotYetValid, Message: "access token is not valid yet"}
	errIssuer      = &host.Error{Code: host.ErrTokenIssuer, Message: "access token is from another issuer"}
	errAudience    = &host.Error{Code: host.ErrTokenAudience, Message: "access token is for another audience"}
	errNoAudience  = &host.Error{Code: host.ErrTokenAudience, Message: "access token names no audience"}
	errUnknownKey  = &host.Error{Code: host.ErrTokenUnknownKey, Message: "access token is signed with a key the issuer does not publish"}
	errSignature   = &host.Error{Code: host.ErrTokenSignature, Message: "access token signature does not verify"}
	errAlgorithm   = &host.Error{Code: host.ErrTokenSignature, Message: "access token is not signed with RS256, PS256, ES256 or EdDSA"}
	errKeyMismatch = &host.Error{Code: host.ErrTokenSignature, Message: "access token's algorithm does not fit its key"}
	errMalformed   = &host.Error{Code: host.ErrTokenMalformed, Message: "access token is not a well-formed signed JWT"}
	errCrit        = &host.Error{Code: host.ErrTokenMalformed, Message: "access token names a critical header extension the gateway does not understand"}
	errType        = &host.Error{Code: host.ErrTokenMalformed, Message: "access token's typ is neither at+jwt nor JWT"}
	errNoExpiry    = &host.Error{Code: host.ErrTokenMalformed, Message: "access token has no exp"}
	errCaller      = &host.Error{Code: host.ErrTokenMalformed, Message: "access token does not name its caller in a string of at most 123 bytes"}
	errScopes      = &host.Error{Code: host.ErrTokenMalformed, Message: "access token's scope or scp is not a list of scope tokens of at most 2048 bytes"}
	errScopeClaim  = &host.Error{Code: host.ErrTokenMalformed, Message: "access token's scope claim is not a string or array of scope tokens of at most 2048 bytes"}
	errNotAccess   = &host.Error{Code: host.ErrTokenMalformed, Message: "credential is not an access token: the identity provider says it is another kind (refresh, ID, or bound to a proof of possession)"}
	errNoKeys      = &host.Error{Code: host.ErrKeysUnavailable, Message: "the identity provider's signing keys are not available yet; retry later"}
)

// VerifierConfig is what a token must say to be accepted.
type VerifierConfig struct {
	// Audience must be one of the token's aud. Required.
	Audience string
	// Leeway is the clock skew allowed on exp, nbf and iat. Default: 30s
	// (a negative value means none).
	Leeway time.Duration
	// CallerClaim names the claim holding the caller's name. Default: sub.
	CallerClaim string
	// ScopeClaim names the one claim the scopes are read from instead of
	// scope and scp: a space-separated string or an array of strings
	// (Entra ID's client credentials carry application permissions in
	// roles). Optional. Default: "" (scope, then scp).
	ScopeClaim string
}

// Verifier checks access tokens against a Provider's keys.
type Verifier struct {
	keys     *Provider
	audience string
	leeway   time.Duration
	caller   string
	scopes   string // "": scope, then scp
}

// NewVerifier returns a Verifier of tokens issued by keys' issuer.
func NewVerifier(keys *Provider, cfg VerifierConfig) (*Verifier, error) {
	if cfg.Audience == "" {
		return nil, errors.New("oidc: an audience is required with an issuer (--oidc-audience)")
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = 30 * time.Second
	case cfg.Leeway < 0:
		cfg.Leeway = 0
	}
	if cfg.CallerClaim == "" {
		cfg.CallerClaim = "sub"
	}
	return &Verifier{keys: keys, audience: cfg.Audience, leeway: cfg.Leeway, caller: cfg.CallerClaim, scopes: cfg.ScopeClaim}, nil
}

// claims is the part of an access token's claim set the gateway reads.
type claims struct {
	Issuer    string           `json:"iss"`
	Subject   string           `json:"sub"`
	Audience  jwt.Audience     `json:"aud"`
	Expiry    *jwt.NumericDate `json:"exp"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
	// Raw until the scope claim in use is known: with --oidc-scope-claim
	// a scope of any shape is not the gateway's to judge.
	Scope json.RawMessage `json:"scope"`
	Scp   json.RawMessage `json:"scp"`
	// Keycloak names the kind of token in the payload: "Bearer" for an
	// access token, "ID", "Refresh", "Offline" for others it signs with
	// the same keys.
	Typ string `json:"typ"`
}

// otherKind reports whether the claims name a kind of token other than a
// bearer access token (Keycloak's typ), for a JWT and an introspection
// answer alike.
func (c *claims) otherKind() bool { return c.Typ != "" && !strings.EqualFold(c.Typ, "bearer") }

// Verify checks credential, a JWT, at now and returns the token it stands
// for (without its digest), or an *host.Error saying why not. The
// signature is checked before any claim is believed.
func (v *Verifier) Verify(ctx context.Context, credential string, now time.Time) (host.Token, error) {
	tok, err := jwt.ParseSigned(credential, Accepted)
	if err != nil {
		if _, ok := errors.AsType[*jose.ErrUnexpectedSignatureAlgorithm](err); ok {
			return host.Token{}, errAlgorithm
		}
		return host.Token{}, errMalformed
	}
	if len(tok.Headers) != 1 {
		return host.Token{}, errMalformed
	}
	h := tok.Headers[0]
	// jku, x5u, jwk and x5c are never used: the key comes from the
	// issuer's key set by kid, and nowhere else.
	if _, ok := h.ExtraHeaders[jose.HeaderKey("crit")]; ok {
		return host.Token{}, errCrit
	}
	if typ, ok := h.ExtraHeaders[jose.HeaderType]; ok && !goodType(typ) {
		return host.Token{}, errType
	}
	key, err := v.key(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return host.Token{}, err
	}
	if err := tok.Claims(key.Key); err != nil {
		if errors.Is(err, jose.ErrUnsupportedCriticalHeader) {
			return host.Token{}, errCrit
		}
		return host.Token{}, errSignature
	}
	// Verified: the payload may now be read.
	var c claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		return host.Token{}, errMalformed
	}
	if err := v.check(&c, now); err != nil {
		return host.Token{}, err
	}
	if c.otherKind() {
		// An ID token whose aud happens to be the API's is no access token.
		return host.Token{}, errNotAccess
	}
	return v.principal(&c, func(all *map[string]json.RawMessage) error { return tok.UnsafeClaimsWithoutVerification(all) })
}

// principal is the token that checked claims stand for: the caller named
// by the caller claim (read from all, the whole claim set, when it is not
// sub), the scopes of scope and scp or of the scope claim the operator
// names. A verified JWT and an introspection answer become one the same
// way, so plugins cannot tell them apart.
func (v *Verifier) principal(c *claims, all func(*map[string]json.RawMessage) error) (host.Token, error) {
	// Claims the operator names are read from the whole set, decoded once
	// and only when one is named.
	var named map[string]json.RawMessage
	if v.caller != "sub" || v.scopes != "" {
		if err := all(&named); err != nil {
			return host.Token{}, errMalformed
		}
	}
	name := c.Subject
	if v.caller != "sub" {
		if err := json.Unmarshal(named[v.caller], &name); err != nil {
			return host.Token{}, errCaller
		}
	}
	if !goodName(name) {
		return host.Token{}, errCaller
	}
	var scopes []string
	var err error
	if v.scopes != "" {
		scopes, err = scopesIn(named[v.scopes])
	} else {
		scopes, err = scopesOf(c)
	}
	if err != nil {
		return host.Token{}, err
	}
	t := host.Token{Name: CallerPrefix + name, Scopes: scopes}
	if c.Expiry != nil {
		t.Expires = c.Expiry.Time()
	}
	if c.IssuedAt != nil {
		t.Created = c.IssuedAt.Time()
	}
	return t, nil
}

// key returns the issuer's key for kid that fits alg. A kid it does not
// know asks the provider again (at a bounded rate); a token without a kid
// is checked with the only key that fits, if there is exactly one.
func (v *Verifier) key(ctx context.Context, kid, alg string) (jose.JSONWebKey, error) {
	keys, fetched := v.keys.keysFor(kid)
	if len(keys) == 0 && v.keys.refetch(ctx) {
		keys, fetched = v.keys.keysFor(kid)
	}
	if !fetched {
		return jose.JSONWebKey{}, errNoKeys
	}
	if len(keys) == 0 {
		return jose.JSONWebKey{}, errUnknownKey
	}
	var fit []jose.JSONWebKey
	for _, k := range keys {
		if fits(k, alg) {
			fit = append(fit, k)
		}
	}
	if len(fit) != 1 {
		return jose.JSONWebKey{}, errKeyMismatch
	}
	return fit[0], nil
}

// check holds the claims to the configuration at now.
func (v *Verifier) check(c *claims, now time.Time) error {
	if c.Issuer != v.keys.Issuer() {
		return errIssuer
	}
	if !slices.Contains(c.Audience, v.audience) {
		return errAudience
	}
	if c.Expiry == nil {
		return errNoExpiry
	}
	return v.checkTimes(c, now)
}

// checkTimes holds exp (when there is one), nbf and iat to now, with the
// leeway.
func (v *Verifier) checkTimes(c *claims, now time.Time) error {
	if c.Expiry != nil && !now.Before(c.Expiry.Time().Add(v.leeway)) {
		return errExpired
	}
	if c.NotBefore != nil && now.Add(v.leeway).Before(c.NotBefore.Time()) {
		return errNotYet
	}
	if c.IssuedAt != nil && now.Add(v.leeway).Before(c.IssuedAt.Time()) {
		return errNotYet
	}
	return nil
}

// goodType accepts RFC 9068's at+jwt (with or without application/) and
// the plain JWT many providers send, in any case.
func goodType(typ any) bool {
	s, ok := typ.(string)
	if !ok {
		return false
	}
	s = strings.ToLower(s)
	return s == "at+jwt" || s == "application/at+jwt" || s == "jwt"
}

// goodName reports whether a caller claim can be a principal's name: shown
// in logs and sent to plugins, so text without control characters.
func goodName(name string) bool {
	if name == "" || len(CallerPrefix)+len(name) > maxCallerName || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// scopesOf reads the scopes from scope (space-separated, RFC 9068 and
// most providers) and scp (an array: Okta; a space-separated string:
// Entra ID), each once, in the order given.
func scopesOf(c *claims) ([]string, error) {
	var text []string
	if present(c.Scope) {
		var one string
		if json.Unmarshal(c.Scope, &one) != nil {
			return nil, errMalformed // RFC 9068 makes scope a string
		}
		text = append(text, one)
	}
	if present(c.Scp) {
		list, ok := stringOrList(c.Scp)
		if !ok {
			return nil, errScopes
		}
		text = append(text, list...)
	}
	return scopeList(text, errScopes)
}

// scopesIn reads the scopes from the one claim the operator named
// (--oidc-scope-claim): absent or null is no scope; a space-separated
// string or an array of strings; anything else refuses the token.
func scopesIn(raw json.RawMessage) ([]string, error) {
	if !present(raw) {
		return nil, nil
	}
	text, ok := stringOrList(raw)
	if !ok {
		return nil, errScopeClaim
	}
	return scopeList(text, errScopeClaim)
}

// present reports whether a claim is there and not null.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// stringOrList decodes a claim that is a string or an array of strings.
func stringOrList(raw json.RawMessage) ([]string, bool) {
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list, true
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	return nil, false
}

// scopeList splits each text at spaces into scope tokens, each once, in
// the order given, or refuses with bad.
func scopeList(text []string, bad *host.Error) ([]string, error) {
	var scopes []string
	n := 0
	for _, t := range text {
		for _, s := range strings.Fields(t) {
			if !scopeToken(s) {
				return nil, bad
			}
			if n += len(s) + 1; n > maxScopeText {
				return nil, bad
			}
			if !slices.Contains(scopes, s) {
				scopes = append(scopes, s)
			}
		}
	}
	return scopes, nil
}

// scopeToken: RFC 6749 §3.3, scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
func scopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c == 0x22 || c == 0x5c || c > 0x7e {
			return false
		}
	}
	return s != ""
}

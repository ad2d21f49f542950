package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/plantgate/plantgate/host"
)

// Introspection's bounds and defaults.
const (
	// DefaultIntrospectionRate bounds the calls to the provider: a flood
	// of random opaque credentials costs it at most this many a second
	// (in bursts of twice as many), and its excess is refused 503 50306.
	DefaultIntrospectionRate = 50
	// RefusedFor is how long an inactive (or refused) answer is kept, so
	// a client repeating a bad token costs one call per RefusedFor.
	RefusedFor = 30 * time.Second
	// DefaultMaxRefused bounds the refused answers kept.
	DefaultMaxRefused = 10_000
	// introspectTimeout bounds one call, connection included.
	introspectTimeout = 3 * time.Second
	// maxIntrospection bounds an introspection answer's body.
	maxIntrospection = 64 << 10
)

// The refusals of introspection. Fixed messages: none echoes the token.
var (
	errIntrospectBusy   = &host.Error{Code: host.ErrIntrospectBusy, Message: "too many unknown access tokens to ask the identity provider about now; retry later"}
	errIntrospectFailed = &host.Error{Code: host.ErrIntrospectFailed, Message: "the identity provider could not be asked about the access token now; retry later"}
)

// Outcomes of an introspection, as Stats counts them.
const (
	OutcomeActive   = iota // the provider vouched for the token and it passed the checks
	OutcomeInactive        // the provider said active false
	OutcomeRefused         // active, but not for this gateway (iss, aud, times, caller, scopes)
	OutcomeLimited         // not asked: over the rate
	OutcomeFailed          // asked, no usable answer
	numOutcomes
)

// OutcomeNames names the outcomes, by their number, for metrics.
var OutcomeNames = [numOutcomes]string{"active", "inactive", "refused", "limited", "failed"}

// IntrospectionConfig says how the gateway asks the provider about opaque
// access tokens (RFC 7662).
type IntrospectionConfig struct {
	// ClientID and ClientSecret authenticate the gateway to the
	// introspection endpoint (client_secret_basic). Required.
	ClientID, ClientSecret string
	// Rate is the most calls a second to the provider. Default:
	// DefaultIntrospectionRate.
	Rate float64
	// Burst is how many calls may go at once after a quiet time. Default:
	// twice Rate, at least 1.
	Burst int
	// Timeout bounds one call. Default: 3s.
	Timeout time.Duration
	// MaxRefused bounds the refused answers kept. Default: DefaultMaxRefused.
	MaxRefused int
	// RequireAudience refuses an active answer that names no aud (RFC 7662
	// makes it optional): for a provider that always names it, so that a
	// token whose answer somehow lacks it fails closed.
	RequireAudience bool
}

// Introspector asks the provider whether an opaque credential is an active
// access token (RFC 7662) and turns an active answer into the same
// host.Token a verified JWT becomes. It keeps refusals (RefusedFor), shares
// one call among concurrent askers of one token, and refuses what exceeds
// its rate without calling.
type Introspector struct {
	v       *Verifier // the issuer, audience, leeway and caller claim
	id      string
	secret  string
	client  *http.Client
	limit   *rate.Limiter
	calls   singleflight.Group
	refused *lru.Cache[[32]byte, refusal] // by the credential's digest
	now     func() time.Time
	// requireAud: IntrospectionConfig.RequireAudience.
	requireAud bool

	mu      sync.Mutex
	lastErr string // the last failure logged; "" while calls succeed

	outcomes [numOutcomes]atomic.Uint64
}

// refusal is a kept answer that is not an active token: err nil for
// active false, else the 401 it earned.
type refusal struct {
	err   *host.Error
	until time.Time
}

// NewIntrospector returns an Introspector for v's provider, whose
// discovery document must name an introspection_endpoint.
func NewIntrospector(v *Verifier, cfg IntrospectionConfig) (*Introspector, error) {
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("oidc: introspection needs a client id and secret")
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultIntrospectionRate
	}
	if cfg.Burst <= 0 {
		cfg.Burst = max(1, int(2*cfg.Rate))
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = introspectTimeout
	}
	if cfg.MaxRefused <= 0 {
		cfg.MaxRefused = DefaultMaxRefused
	}
	refused, err := lru.New[[32]byte, refusal](cfg.MaxRefused)
	if err != nil {
		return nil, err
	}
	// The provider's TLS, but no redirects: one would carry the token
	// (in the body) to wherever the redirect points.
	client := &http.Client{Transport: v.keys.client.Transport, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Introspector{v: v, id: cfg.ClientID, secret: cfg.ClientSecret, client: client,
		limit: rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst), refused: refused, now: time.Now, requireAud: cfg.RequireAudience}, nil
}

// answer is one call's outcome for its askers.
type answer struct {
	tok    host.Token
	until  time.Time
	active bool
}

// Introspect returns the token credential (whose SHA-256 is digest) stands
// for, until when that answer may be kept, and ok true when the provider
// says it is active and it is for this gateway. ok false with a nil error:
// the provider does not know it (active false), which the caller treats
// as it treats any unknown credential. An error is an *host.Error: 401 for
// an active token that is not for this gateway, 503 when the provider
// could not be asked.
func (in *Introspector) Introspect(ctx context.Context, credential string, digest [32]byte) (host.Token, time.Time, bool, error) {
	if r, ok := in.refused.Peek(digest); ok && in.now().Before(r.until) {
		if r.err != nil {
			return host.Token{}, time.Time{}, false, r.err
		}
		return host.Token{}, time.Time{}, false, nil
	}
	// Shared by digest: N requests with one new token cost one call. The
	// call runs on its own deadline, so one asker giving up ends it for
	// none of the others.
	ch := in.calls.DoChan(string(digest[:]), func() (any, error) { return in.call(credential, digest) })
	select {
	case r := <-ch:
		if r.Err != nil {
			return host.Token{}, time.Time{}, false, r.Err
		}
		a := r.Val.(answer)
		return a.tok, a.until, a.active, nil
	case <-ctx.Done():
		return host.Token{}, time.Time{}, false, errIntrospectFailed
	}
}

// call asks the provider once, within the rate.
func (in *Introspector) call(credential string, digest [32]byte) (answer, error) {
	// No endpoint is no call: it spends nothing of the rate.
	endpoint, err := in.endpoint()
	if err == nil && !in.limit.Allow() {
		in.outcomes[OutcomeLimited].Add(1)
		return answer{}, errIntrospectBusy
	}
	var body []byte
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), in.client.Timeout)
		defer cancel()
		body, err = in.post(ctx, endpoint, credential)
	}
	now := in.now()
	var a answer
	if err == nil {
		a, err = in.judge(body, now)
	}
	var refused *host.Error
	switch {
	case errors.As(err, &refused):
		in.outcomes[OutcomeRefused].Add(1)
		in.refused.Add(digest, refusal{err: refused, until: now.Add(RefusedFor)})
		in.succeeded()
		return answer{}, refused
	case err != nil:
		in.outcomes[OutcomeFailed].Add(1)
		in.failed(err)
		return answer{}, errIntrospectFailed
	case !a.active:
		in.outcomes[OutcomeInactive].Add(1)
		// The client meets bearer-auth's "invalid token", which names no
		// provider; at debug the operator can see the provider said no.
		in.v.keys.log.Debug("the identity provider answered that an opaque credential is not active: refused as an unknown token (401 40151)", "issuer", in.v.keys.Issuer())
		in.refused.Add(digest, refusal{until: now.Add(RefusedFor)})
	default:
		in.outcomes[OutcomeActive].Add(1)
		a.tok.Digest = digest
	}
	in.succeeded()
	return a, nil
}

// endpoint is the provider's introspection endpoint, or why there is none.
func (in *Introspector) endpoint() (string, error) {
	endpoint, discovered := in.v.keys.introspectionEndpoint()
	switch {
	case !discovered:
		return "", errors.New("the provider's discovery document has not been read yet")
	case endpoint == "":
		return "", errors.New("the provider's discovery document names no introspection_endpoint")
	}
	return endpoint, nil
}

// post sends the introspection request (RFC 7662 §2.1) and returns the
// answer's body. Its errors never hold the token or the secret: the
// token travels in the body, the secret in a header, neither in the URL.
func (in *Introspector) post(ctx context.Context, endpoint, credential string) ([]byte, error) {
	form := url.Values{"token": {credential}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("introspection endpoint: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// client_secret_basic: RFC 6749 §2.3.1 form-urlencodes both before
	// Basic encodes them, so a secret with ':' or '%' arrives intact.
	req.SetBasicAuth(url.QueryEscape(in.id), url.QueryEscape(in.secret))
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", endpoint, errors.Unwrap(err)) // the url.Error's own text repeats the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxIntrospection))
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			hint = " (check --oidc-client-id and --oidc-client-secret-file)"
		}
		return nil, fmt.Errorf("POST %s: %s%s", endpoint, resp.Status, hint)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && !strings.Contains(mt, "json") {
		return nil, fmt.Errorf("POST %s: Content-Type %s, want JSON", endpoint, mt)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIntrospection+1))
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", endpoint, err)
	}
	if len(body) > maxIntrospection {
		return nil, fmt.Errorf("POST %s: answer over %d bytes", endpoint, maxIntrospection)
	}
	return body, nil
}

// introspection is the part of an answer (RFC 7662 §2.2) the gateway
// reads: active, and the claims a JWT access token would carry.
type introspection struct {
	Active *bool `json:"active"`
	claims
	// What kind of token it is, in each provider's words: RFC 7662's
	// token_type (an OAuth token type, "Bearer"), Keycloak's typ
	// (claims.Typ), Hydra's token_use
	// ("access_token", "refresh_token"); and RFC 7800's cnf, present when
	// the token is bound to a key or certificate the client must prove.
	TokenType string          `json:"token_type"`
	TokenUse  string          `json:"token_use"`
	Cnf       json.RawMessage `json:"cnf"`
}

// bearerAccess reports whether nothing in the answer says the token is
// other than a bearer access token. Providers introspect refresh and ID
// tokens too, and answer active for them whatever token_type_hint asked;
// a client presenting its refresh token must not pass for its access
// token. A sender-constrained token (DPoP, mTLS-bound) needs a proof the
// gateway does not check, so it is refused rather than taken as a bearer
// one.
func (c *introspection) bearerAccess() bool {
	switch {
	case c.TokenType != "" && !strings.EqualFold(c.TokenType, "bearer"):
		return false
	case c.otherKind():
		return false
	case c.TokenUse != "" && c.TokenUse != "access_token":
		return false
	}
	return len(c.Cnf) == 0 || string(c.Cnf) == "null"
}

// judge reads an answer at now: a plain error when it is no answer at all,
// an *host.Error when the token is active but not for this gateway. The
// claims that are optional in an answer are checked when present, with
// the same refusals as a JWT's; the caller and scopes are read as a JWT's.
func (in *Introspector) judge(body []byte, now time.Time) (answer, error) {
	var c introspection
	if err := json.Unmarshal(body, &c); err != nil {
		return answer{}, fmt.Errorf("introspection answer: %w", err)
	}
	if c.Active == nil {
		return answer{}, errors.New(`introspection answer has no boolean "active"`)
	}
	if !*c.Active {
		return answer{}, nil
	}
	if !c.bearerAccess() {
		return answer{}, errNotAccess
	}
	v := in.v
	if c.Issuer != "" && c.Issuer != v.keys.Issuer() {
		return answer{}, errIssuer
	}
	switch {
	case len(c.Audience) == 0 && in.requireAud:
		return answer{}, errNoAudience
	case len(c.Audience) > 0 && !slices.Contains(c.Audience, v.audience):
		return answer{}, errAudience
	}
	if err := v.checkTimes(&c.claims, now); err != nil {
		return answer{}, err
	}
	t, err := v.principal(&c.claims, func(all *map[string]json.RawMessage) error { return json.Unmarshal(body, all) })
	if err != nil {
		return answer{}, err
	}
	until := now.Add(KeepFor)
	if !t.Expires.IsZero() && t.Expires.Before(until) {
		until = t.Expires
	}
	return answer{tok: t, until: until, active: true}, nil
}

// failed logs a failure when it differs from the last one logged: an
// outage is one line, not one per request.
func (in *Introspector) failed(err error) {
	in.mu.Lock()
	changed := in.lastErr != err.Error()
	in.lastErr = err.Error()
	in.mu.Unlock()
	if changed {
		in.v.keys.log.Error("token introspection failed: opaque access tokens are refused (503 50307) until the identity provider answers",
			"issuer", in.v.keys.Issuer(), "err", err)
	}
}

// succeeded notes an answer, logging the end of an outage.
func (in *Introspector) succeeded() {
	in.mu.Lock()
	was := in.lastErr
	in.lastErr = ""
	in.mu.Unlock()
	if was != "" {
		in.v.keys.log.Info("token introspection answers again", "issuer", in.v.keys.Issuer())
	}
}

// Status says what keeps introspection from working, for /readyz: "" when
// nothing does (as far as the last call knows).
func (in *Introspector) Status() string {
	if endpoint, discovered := in.v.keys.introspectionEndpoint(); discovered && endpoint == "" {
		return "the identity provider's discovery document names no introspection_endpoint: opaque access tokens are refused (503 50307)"
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.lastErr != "" {
		return "token introspection failing: " + in.lastErr
	}
	return ""
}

// Limits returns the calls a second and the burst the provider is asked
// at most: the config's, defaults applied.
func (in *Introspector) Limits() (perSecond float64, burst int) {
	return float64(in.limit.Limit()), in.limit.Burst()
}

// Stats returns how many introspections ended in each outcome (by
// OutcomeActive… numbers).
func (in *Introspector) Stats() [numOutcomes]uint64 {
	var s [numOutcomes]uint64
	for i := range s {
		s[i] = in.outcomes[i].Load()
	}
	return s
}

// Package oidc verifies the OAuth 2.0 access tokens an OpenID provider
// issues (RFC 9068 JWTs), natively in the host with go-jose, and resolves
// them to the same host.Token a stored opaque token is: the second half of
// the one credential resolver (host.CredentialResolver), the store being
// the first.
//
// A Provider keeps the issuer's signing keys: found by discovery
// (/.well-known/openid-configuration, else RFC 8414's
// oauth-authorization-server), fetched from its jwks_uri, refreshed on a
// timer that follows the key set's Cache-Control, and refetched when a
// token names a kid it does not know, at most once every RefetchInterval
// however many such tokens arrive. Keys it has keep working while the
// provider is down. A Resolver checks tokens against it and keeps each
// verified one by digest until its exp (at most KeepFor), so a busy
// client costs one signature check, not one per request.
package oidc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// Timing of key fetches.
const (
	// RefetchInterval spaces refetches for an unknown kid: a burst of
	// tokens with random kids costs the provider one fetch, and a minute
	// at most 60s/RefetchInterval of them.
	RefetchInterval = 12 * time.Second
	// DefaultRefresh is the timer when the key set names no max-age;
	// minRefresh and maxRefresh bound the one it names.
	DefaultRefresh = 15 * time.Minute
	minRefresh     = time.Minute
	maxRefresh     = 24 * time.Hour
	// fetchTimeout bounds one HTTP exchange with the provider.
	fetchTimeout = 10 * time.Second
	// maxDocument bounds a discovery document or key set.
	maxDocument = 1 << 20
	// retryMax is the longest wait between attempts while no key set has
	// arrived, or after a refresh failed.
	retryMax = 30 * time.Second
)

// ProviderConfig says which provider to trust and how to reach it.
type ProviderConfig struct {
	// Issuer is the provider's issuer identifier, exactly as its tokens
	// carry it in iss. Required. Configuration, not input: loopback and
	// private addresses are allowed.
	Issuer string
	// CAFile, when set, is a PEM file of the CAs the provider's TLS
	// certificate must chain to, instead of the system roots (which honour
	// SSL_CERT_FILE as Go does).
	CAFile string
	// Logger receives fetch failures and key set changes. Default: slog.Default().
	Logger *slog.Logger
	// Introspection says the gateway will introspect opaque tokens, so a
	// discovery document without an introspection_endpoint is an error
	// worth a log line at once, not at the first opaque token.
	Introspection bool
}

// Provider keeps one issuer's signing keys.
type Provider struct {
	issuer string
	client *http.Client
	log    *slog.Logger
	now    func() time.Time

	mu      sync.RWMutex
	keys    map[string][]jose.JSONWebKey // by kid; "" holds keys without one
	jwksURI string
	// introspectionURI is the discovery document's introspection_endpoint
	// ("" when it names none), known once jwksURI is.
	introspectionURI string
	introspection    bool  // ProviderConfig.Introspection
	fetched          bool  // a key set has arrived
	lastErr          error // the last fetch's failure, nil after a success

	fetches   singleflight.Group
	limitMu   sync.Mutex
	lastAsked time.Time // the last refetch for an unknown kid

	stop    chan struct{}
	done    chan struct{}
	started sync.Once
}

// NewProvider returns a Provider for cfg; Start begins fetching.
func NewProvider(cfg ProviderConfig) (*Provider, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("oidc: an issuer is required")
	}
	if !httpURL(cfg.Issuer) {
		return nil, fmt.Errorf("oidc issuer %q: want an http(s) URL", cfg.Issuer)
	}
	client, err := newClient(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Provider{issuer: cfg.Issuer, client: client, log: log, now: time.Now, introspection: cfg.Introspection,
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// newClient is the HTTP client for the provider: TLS verified against the
// system roots, or only the CAs of caFile.
func newClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--oidc-ca-file %s: no PEM certificate in it", caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Transport: tr, Timeout: fetchTimeout}, nil
}

// Issuer is the issuer the provider trusts.
func (p *Provider) Issuer() string { return p.issuer }

// Start fetches the key set in the background, at once, again on each
// refresh, and with backoff while the provider cannot be reached. It does
// not wait: a provider down at start stops nothing, and tokens are
// refused with host.ErrKeysUnavailable until keys arrive.
func (p *Provider) Start() {
	p.started.Do(func() { go p.run() })
}

// Close stops the refreshes.
func (p *Provider) Close() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	p.started.Do(func() { close(p.done) }) // never started: nothing to wait for
	<-p.done
}

func (p *Provider) run() {
	defer close(p.done)
	retry := time.Second
	var wait time.Duration
	for {
		select {
		case <-p.stop:
			return
		case <-time.After(wait):
		}
		maxAge, err := p.fetchShared(context.Background())
		switch {
		case err == nil:
			retry, wait = time.Second, refreshAfter(maxAge)
		default:
			wait, retry = retry, min(2*retry, retryMax)
		}
	}
}

// refreshAfter is the timer after a fetch whose Cache-Control said maxAge
// (negative: said none).
func refreshAfter(maxAge time.Duration) time.Duration {
	if maxAge < 0 {
		return DefaultRefresh
	}
	return min(max(maxAge, minRefresh), maxRefresh)
}

// Status says whether keys have arrived and, when the last fetch failed,
// why: for /readyz and the log.
func (p *Provider) Status() (ready bool, reason string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	switch {
	case !p.fetched && p.lastErr != nil:
		return false, "identity provider keys not fetched yet: " + p.lastErr.Error()
	case !p.fetched:
		return false, "identity provider keys not fetched yet"
	case p.lastErr != nil:
		return true, "identity provider keys are stale (the last refresh failed: " + p.lastErr.Error() + "); the known keys keep working"
	}
	return true, ""
}

// keysFor returns the keys a kid names, and whether any key set has
// arrived.
func (p *Provider) keysFor(kid string) ([]jose.JSONWebKey, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.keys[kid], p.fetched
}

// refetch fetches the key set again for a kid it did not know, unless one
// was fetched for that reason less than RefetchInterval ago; it reports
// whether it fetched. Concurrent callers share one fetch.
func (p *Provider) refetch(ctx context.Context) bool {
	p.limitMu.Lock()
	now := p.now()
	if !p.lastAsked.IsZero() && now.Sub(p.lastAsked) < RefetchInterval {
		p.limitMu.Unlock()
		return false
	}
	p.lastAsked = now
	p.limitMu.Unlock()
	_, err := p.fetchShared(ctx)
	return err == nil
}

// fetchShared fetches the key set once for all who ask meanwhile; each
// waits at most until its ctx ends. It returns the key set's max-age
// (negative when it names none).
func (p *Provider) fetchShared(ctx context.Context) (time.Duration, error) {
	ch := p.fetches.DoChan("jwks", func() (any, error) {
		fctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		defer cancel()
		return p.fetch(fctx)
	})
	select {
	case r := <-ch:
		d, _ := r.Val.(time.Duration)
		return d, r.Err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// fetch discovers the jwks_uri when it has none yet, then fetches and
// installs the key set. On failure the keys it had stay.
func (p *Provider) fetch(ctx context.Context) (maxAge time.Duration, err error) {
	defer func() {
		p.mu.Lock()
		first := p.lastErr == nil && err != nil
		p.lastErr = err
		fetched := p.fetched
		p.mu.Unlock()
		switch {
		case err != nil && !fetched && first:
			p.log.Warn("identity provider keys not fetched: access tokens are refused (503 50305) until they arrive; the gateway's own tokens work", "issuer", p.issuer, "err", err)
		case err != nil && first:
			p.log.Warn("identity provider key refresh failed; the known keys keep working", "issuer", p.issuer, "err", err)
		}
	}()
	p.mu.RLock()
	uri := p.jwksURI
	p.mu.RUnlock()
	if uri == "" {
		var meta metadata
		if meta, err = p.discover(ctx); err != nil {
			return -1, err
		}
		uri = meta.JWKSURI
		p.mu.Lock()
		p.jwksURI, p.introspectionURI = uri, meta.introspection()
		p.mu.Unlock()
		if p.introspection && meta.introspection() == "" {
			p.log.Error("the identity provider's discovery document names no http(s) introspection_endpoint: opaque access tokens are refused (503 50307); turn --oidc-introspection off or fix the provider", "issuer", p.issuer)
		}
	}
	body, header, err := p.get(ctx, uri)
	if err != nil {
		return -1, fmt.Errorf("key set: %w", err)
	}
	keys, skipped, err := parseKeySet(body)
	if err != nil {
		return -1, fmt.Errorf("key set %s: %w", uri, err)
	}
	p.mu.Lock()
	was := p.fetched
	p.keys, p.fetched = keys, true
	p.mu.Unlock()
	n := 0
	for _, ks := range keys {
		n += len(ks)
	}
	if !was {
		p.log.Info("identity provider keys fetched: access tokens are accepted", "issuer", p.issuer, "keys", n, "skipped", skipped)
	} else {
		p.log.Debug("identity provider keys refreshed", "issuer", p.issuer, "keys", n, "skipped", skipped)
	}
	return maxAgeOf(header), nil
}

// discover reads the provider's metadata: OpenID Connect Discovery first,
// then RFC 8414's authorization server metadata (inserted between host and
// path, as that RFC places it). Its issuer must be ours exactly.
func (p *Provider) discover(ctx context.Context) (metadata, error) {
	iss, err := url.Parse(p.issuer)
	if err != nil {
		return metadata{}, fmt.Errorf("issuer: %w", err)
	}
	path := strings.TrimSuffix(iss.Path, "/")
	urls := []string{
		strings.TrimSuffix(p.issuer, "/") + "/.well-known/openid-configuration",
		iss.Scheme + "://" + iss.Host + "/.well-known/oauth-authorization-server" + path,
	}
	var errs []error
	for _, u := range urls {
		body, _, err := p.get(ctx, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var meta metadata
		if err := json.Unmarshal(body, &meta); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		if meta.Issuer != p.issuer {
			errs = append(errs, fmt.Errorf("%s names the issuer %q, not %q", u, meta.Issuer, p.issuer))
			continue
		}
		if !httpURL(meta.JWKSURI) {
			errs = append(errs, fmt.Errorf("%s has no http(s) jwks_uri", u))
			continue
		}
		return meta, nil
	}
	// One line: the reason goes into a log value and /readyz's "oidc"
	// field, where errors.Join's newline would split it.
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return metadata{}, fmt.Errorf("discovery: %s", strings.Join(msgs, "; "))
}

// metadata is what the gateway reads of a discovery document.
type metadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// introspection is the introspection endpoint, "" unless an http(s) URL.
func (m metadata) introspection() string {
	if !httpURL(m.IntrospectionEndpoint) {
		return ""
	}
	return m.IntrospectionEndpoint
}

func httpURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// introspectionEndpoint returns the discovery document's
// introspection_endpoint, and whether discovery has happened.
func (p *Provider) introspectionEndpoint() (uri string, discovered bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.introspectionURI, p.jwksURI != ""
}

// get fetches a JSON document of at most maxDocument bytes.
func (p *Provider) get(ctx context.Context, url string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument))
		return nil, nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && !strings.Contains(mt, "json") {
		return nil, nil, fmt.Errorf("GET %s: Content-Type %s, want JSON", url, mt)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if len(body) > maxDocument {
		return nil, nil, fmt.Errorf("GET %s: over %d bytes", url, maxDocument)
	}
	return body, resp.Header, nil
}

// maxAgeOf is Cache-Control's max-age, negative when there is none (or
// no-cache/no-store, which asks for the shortest timer).
func maxAgeOf(h http.Header) time.Duration {
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			if d == "no-cache" || d == "no-store" {
				return 0
			}
			if s, ok := strings.CutPrefix(d, "max-age="); ok {
				if n, err := strconv.Atoi(strings.Trim(s, `"`)); err == nil && n >= 0 {
					return time.Duration(n) * time.Second
				}
			}
		}
	}
	return -1
}

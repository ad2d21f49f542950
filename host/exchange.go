package host

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Exchange is one request as its policy chain sees it beyond the request
// line: context the gateway knows (request id, client address, headers),
// the principal a token lookup established, and the response headers the
// plugins' decisions added. The HTTP layer makes one per request and puts
// it in the request's context (WithExchange); every plugin of both phases
// reads and adds to the same one, which is how a principal established by
// one plugin reaches the later ones.
//
// The chain runs one plugin at a time, but a written-off call may still be
// running when a later one starts, so the mutable part is locked.
type Exchange struct {
	RequestID string
	Client    netip.Addr    // the client's address; the zero Addr when unknown
	Header    RequestHeader // the request's headers; nil when unknown

	mu        sync.Mutex
	principal Principal
	respond   []ResponseHeader
	cred      resolved // the credential, when a CredentialResolver resolved it
}

// RequestHeader reads a request's headers. fasthttp's *RequestHeader
// satisfies it.
type RequestHeader interface {
	// Peek returns the first value of the header key (in any case), nil when
	// the request has none. The bytes are borrowed for the request.
	Peek(key string) []byte
}

// Principal is who a request is from, once a token lookup found its
// credential valid.
type Principal struct {
	Name   string
	Scopes []string
}

// ResponseHeader is a header a decision adds to the response.
type ResponseHeader struct{ Name, Value string }

// SetPrincipal records who the request is from; the first one set stays,
// so a later plugin cannot change it.
func (x *Exchange) SetPrincipal(t Token) {
	x.mu.Lock()
	if x.principal.Name == "" {
		x.principal = Principal{Name: t.Name, Scopes: t.Scopes}
	}
	x.mu.Unlock()
}

// Principal returns who the request is from; the zero Principal before a
// token lookup established it.
func (x *Exchange) Principal() Principal {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.principal
}

// AddResponseHeader records a response header; a later value of the same
// name replaces an earlier one (the last plugin to speak wins).
func (x *Exchange) AddResponseHeader(name, value string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range x.respond {
		if x.respond[i].Name == name {
			x.respond[i].Value = value
			return
		}
	}
	x.respond = append(x.respond, ResponseHeader{name, value})
}

// ResponseHeaders returns the headers the decisions added, in order.
func (x *Exchange) ResponseHeaders() []ResponseHeader {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]ResponseHeader(nil), x.respond...)
}

// TokenValid reports whether t may act for a request at now: not revoked
// and not expired.
func TokenValid(t Token, now time.Time) bool {
	return !t.Revoked && (t.Expires.IsZero() || now.Before(t.Expires))
}

type exchangeKey struct{}

// WithExchange returns ctx carrying x.
func WithExchange(ctx context.Context, x *Exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// NewExchange returns a context under parent carrying a new Exchange, and
// the Exchange: one allocation for both, as every request makes one.
func NewExchange(parent context.Context) (context.Context, *Exchange) {
	c := &exchangeContext{Context: parent}
	return c, &c.x
}

// exchangeContext is a context carrying an Exchange it holds itself.
type exchangeContext struct {
	context.Context
	x Exchange
}

func (c *exchangeContext) Value(key any) any {
	if _, ok := key.(exchangeKey); ok {
		return &c.x
	}
	return c.Context.Value(key)
}

// ExchangeFrom returns the Exchange ctx carries, or nil.
func ExchangeFrom(ctx context.Context) *Exchange {
	x, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return x
}

// Detach returns a copy of x that outlives the request: its request id,
// client, principal and the values of the named headers (the request's
// own headers are borrowed and die with it). A shadow plugin runs on such a
// copy after the answer is sent, so nothing it does reaches the request.
func (x *Exchange) Detach(headers []string) *Exchange {
	// Strings too may be borrowed from the request's buffers: copied.
	pr := x.Principal()
	pr.Name = strings.Clone(pr.Name)
	d := &Exchange{RequestID: strings.Clone(x.RequestID), Client: x.Client, principal: pr}
	// A resolved credential holds no borrowed bytes (the resolver built
	// it), so a shadow plugin's lookup of it is answered as the request's was.
	x.mu.Lock()
	d.cred = x.cred
	x.mu.Unlock()
	if x.Header != nil && len(headers) > 0 {
		h := make(copiedHeader, len(headers))
		for _, name := range headers {
			if v := x.Header.Peek(name); v != nil {
				h[name] = append([]byte(nil), v...)
			}
		}
		d.Header = h
	}
	return d
}

// copiedHeader is a RequestHeader holding copies, keyed by canonical name.
type copiedHeader map[string][]byte

func (h copiedHeader) Peek(key string) []byte { return h[key] }

package wasm

import (
	"context"
	"fmt"
	"net/http"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// appendContext appends the version-2 request context (abi.AppendContext)
// from x to an authorize request; empty fields when x is nil. It allocates
// nothing: the client address is formatted into a stack buffer.
func (p *Plugin) appendContext(dst []byte, x *host.Exchange) []byte {
	if x == nil {
		dst, _ = abi.AppendContext(dst, "", nil)
		return abi.AppendPrincipal(dst, "", nil)
	}
	var client []byte
	var buf [64]byte
	if x.Client.IsValid() {
		client = x.Client.Unmap().AppendTo(buf[:0])
	}
	dst, block := abi.AppendContext(dst, x.RequestID, client)
	if x.Header != nil {
		for _, name := range p.headers {
			if v := x.Header.Peek(name); v != nil {
				dst = abi.AppendRequestHeader(dst, block, name, v[:min(len(v), abi.MaxHeaderValue)])
			}
		}
	}
	pr := x.Principal()
	return abi.AppendPrincipal(dst, pr.Name, pr.Scopes)
}

// respondWith checks a decision's response headers against the allow-list
// (abi.ResponseHeaders) and adds them to the request's exchange. Anything
// else is an invalid decision: dropping it silently would hide the
// author's mistake, and a header outside the list could set cookies or
// split the response.
func respondWith(ctx context.Context, block []byte) error {
	x := host.ExchangeFrom(ctx)
	for rest := block; len(rest) > 0; {
		name, value, r, _ := abi.NextHeader(rest) // ParseDecision checked the block
		rest = r
		canon, ok := abi.ResponseHeader(string(name))
		if !ok {
			return badDecision(fmt.Sprintf("decision sets response header %q, which is not one of %v", name, abi.ResponseHeaders), nil)
		}
		if len(value) > abi.MaxHeaderValue || !printable(value) {
			return badDecision(fmt.Sprintf("decision sets %s to a value that is empty, over %d bytes or not printable ASCII", canon, abi.MaxHeaderValue), nil)
		}
		if x != nil {
			x.AddResponseHeader(canon, string(value))
		}
	}
	return nil
}

// printable reports whether v is a non-empty header value of printable
// ASCII and spaces: no CR or LF can split the response.
func printable(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7E {
			return false
		}
	}
	return true
}

// canonicalHeaders checks a sidecar's request header allow-list and returns
// it in canonical form.
func canonicalHeaders(names []string) ([]string, error) {
	if len(names) > abi.MaxRequestHeaders {
		return nil, fmt.Errorf(`"headers" lists %d headers, at most %d are allowed`, len(names), abi.MaxRequestHeaders)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n == "" || !token(n) {
			return nil, fmt.Errorf(`"headers": %q is not a header name`, n)
		}
		c := http.CanonicalHeaderKey(n)
		if c == "Authorization" || c == "Cookie" || c == "Proxy-Authorization" {
			return nil, fmt.Errorf(`"headers": %s is never sent to plugins (the credential reaches them as Request.Credential)`, c)
		}
		out = append(out, c)
	}
	return out, nil
}

// token reports whether s is an RFC 9110 token, the syntax of a header name.
func token(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
			c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}

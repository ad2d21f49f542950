package http

import (
	"github.com/plantgate/plantgate/host"
)

// ParseBearer extracts the bearer token from the values of the request's
// Authorization header fields, following RFC 6750 §2.1:
//
//	credentials = "Bearer" 1*SP b64token
//	b64token    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
//
// The scheme name is case-insensitive (RFC 7235 §2.1) and, as the grammar
// allows, more than one space may separate it from the token.
//
// No header, an empty one, or a credential of another scheme (Basic, say) is
// ErrMissingCredential: the request carries no bearer credential, so the
// answer is a plain challenge (RFC 6750 §3.1). A bearer credential that
// breaks the grammar, or more than one Authorization field, is
// ErrMalformedAuth: RFC 6750 calls that invalid_request and answers 400.
func ParseBearer(values [][]byte) (string, error) {
	if len(values) > 1 {
		return "", &host.Error{Code: host.ErrMalformedAuth, Message: "more than one Authorization header"}
	}
	if len(values) == 0 || len(trimOWS(values[0])) == 0 {
		return "", missingCredential
	}
	v := trimOWS(values[0])
	scheme, rest := v, []byte(nil)
	for i, c := range v {
		if c == ' ' || c == '\t' {
			scheme, rest = v[:i], v[i:]
			break
		}
	}
	if !isBearer(scheme) {
		if !isToken(scheme) {
			return "", &host.Error{Code: host.ErrMalformedAuth, Message: "Authorization header does not start with an authentication scheme"}
		}
		return "", missingCredential
	}
	i := 0
	for i < len(rest) && rest[i] == ' ' {
		i++
	}
	if i == 0 || i == len(rest) {
		return "", &host.Error{Code: host.ErrMalformedAuth, Message: "bearer credential is empty"}
	}
	tok := rest[i:]
	if !isB64Token(tok) {
		return "", &host.Error{Code: host.ErrMalformedAuth, Message: "bearer credential must be one token of letters, digits and -._~+/ followed by optional ="}
	}
	return string(tok), nil
}

var missingCredential = &host.Error{Code: host.ErrMissingCredential, Message: "a bearer credential is required"}

func isBearer(s []byte) bool {
	const want = "bearer"
	if len(s) != len(want) {
		return false
	}
	for i := range s {
		if s[i]|0x20 != want[i] {
			return false
		}
	}
	return true
}

// isToken reports whether s is an RFC 7230 token (an auth-scheme name).
func isToken(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '!', c == '#', c == '$', c == '%', c == '&', c == '\'', c == '*',
			c == '+', c == '-', c == '.', c == '^', c == '_', c == '`', c == '|', c == '~':
		default:
			return false
		}
	}
	return true
}

func isB64Token(s []byte) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// trimOWS trims optional whitespace (SP, HTAB) around a header value.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

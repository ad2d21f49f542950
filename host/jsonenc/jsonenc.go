// Package jsonenc appends JSON strings for the hand-built bodies Plantgate
// writes on its hot paths: the store's canonical plant content and the
// gateway's Plant and Error responses. One encoder for both keeps a stored
// plant and the plant a client gets back spelled the same way.
package jsonenc

import (
	"log/slog"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// AppendString appends s to dst as a JSON string in its shortest form (RFC
// 8785): '"', '\\' and control characters are escaped, with \b \f \n \r \t
// where JSON has them and \u00xx otherwise; everything else, U+2028, '<',
// '>', '&' and DEL included, is copied as is. The bodies are never embedded
// in HTML or JavaScript, so nothing more needs escaping.
//
// Invalid UTF-8 never reaches here on purpose (bodies are validated, the
// store refuses it): should it, each run of invalid bytes becomes one U+FFFD
// and an error is logged, rather than the string being lost.
func AppendString(dst []byte, s string) []byte {
	out, ok := appendValid(dst, s)
	if !ok {
		slog.Default().Error("invalid UTF-8 in a JSON string")
	}
	return out
}

// AppendClientString is AppendString for text a client may send as
// arbitrary bytes (a header value, a path as sent): each run of invalid
// UTF-8 becomes one U+FFFD, silently, since that is the client's input
// and not a fault of the gateway's.
func AppendClientString(dst []byte, s string) []byte {
	out, _ := appendValid(dst, s)
	return out
}

// appendValid appends s quoted, reporting whether it was valid UTF-8 (when
// not, its invalid runs are written as U+FFFD).
func appendValid(dst []byte, s string) ([]byte, bool) {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		out, _ = jsontext.AppendQuote(dst, strings.ToValidUTF8(s, "\uFFFD"))
		return out, false
	}
	return out, true
}

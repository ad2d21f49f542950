package host

import (
	"strconv"
	"unicode/utf8"
)

// Bounds of what a record keeps of a field a client controls: the decision
// log's lines, the fleet's shadow diff log and the console that shows it.
// A client with plants:write can send a plant name as long as the body
// limit; without these bounds one request made a multi-MB log line and
// diff entry, though the live chain refused the name. A clipped field keeps
// its first bytes and, beside it, its original length ("name_bytes").
const (
	// RecordNameBytes bounds a plant's name and tag in a record.
	RecordNameBytes = 256
	// RecordPathBytes bounds a request path in a record (a span's url.path
	// too).
	RecordPathBytes = 512
	// RecordTextBytes bounds the other strings of a record: the principal,
	// a deny message, the method and route, the request id.
	RecordTextBytes = 256
)

// Clip returns s cut to at most n bytes, at a UTF-8 character boundary,
// and the length of s when it was cut (0 when s fits): the record keeps
// the first bytes and says how long the value was.
//
//	name, nameBytes := host.Clip(p.Name, host.RecordNameBytes)
func Clip(s string, n int) (string, int) {
	if len(s) <= n {
		return s, 0
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], len(s)
}

// ClipString is Clip without the length, for fields whose length a record
// does not report.
func ClipString(s string, n int) string {
	s, _ = Clip(s, n)
	return s
}

// Shown is a record's field as a page or a terminal shows it: cut to n
// bytes again (a record written before its writer clipped may be any
// size), quoted (Go syntax) when quote, and followed by "… (N bytes)" when
// it was cut, here or by the writer, which kept its length in total.
func Shown(s string, total, n int, quote bool) string {
	s, cut := Clip(s, n)
	if quote {
		s = strconv.Quote(s)
	}
	if total = max(total, cut); total > 0 {
		s += "… (" + strconv.Itoa(total) + " bytes)"
	}
	return s
}

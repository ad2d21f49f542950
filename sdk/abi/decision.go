package abi

import "errors"

// Result is what a phase export (and [ExportConfigure]) returns: either
// [ResultAllow], or the address and length of a decision record in guest
// memory, packed as ptr<<32 | len.
//
// The decision record layout is
//
//	offset 0  u8   verdict: VerdictAllow, VerdictDeny or VerdictFault
//	offset 1  u8   flags: DecisionHeaders (version 2), else zero
//	offset 2  [2]  zero
//	offset 4  i32  code: the error code of a deny, else 0
//	offset 8  ...  text: deny message, allow principal, or fault reason
//
// With DecisionHeaders set, a header block comes before the text: a u32
// byte length, then that many bytes of (name, value) string pairs; see
// [ResponseHeaders] for the names allowed.
//
// A fault reason is for the host's log only; clients never see guest text
// from a fault.
type Result = uint64

// ResultAllow is the allow decision with no principal: the common case
// costs no memory read on the host.
const ResultAllow Result = 0

// Verdicts in a decision record.
const (
	VerdictAllow uint8 = 0
	VerdictDeny  uint8 = 1
	VerdictFault uint8 = 2
)

// DecisionHeader is the size of a decision record before its text (and
// before its header block, when it has one).
const DecisionHeader = 8

// DecisionHeaders is the flag of a decision record that carries response
// headers.
const DecisionHeaders uint8 = 1

// MaxHeaderBlock is the largest header block of a decision record, and
// MaxDecision the largest decision record.
const (
	MaxHeaderBlock = 2048
	MaxDecision    = DecisionHeader + 4 + MaxHeaderBlock + MaxText
)

// PackResult packs a guest address and length into a [Result].
func PackResult(ptr, length uint32) Result { return uint64(ptr)<<32 | uint64(length) }

// UnpackResult splits a [Result] into the guest address and length.
func UnpackResult(r Result) (ptr, length uint32) { return uint32(r >> 32), uint32(r) }

// Deny codes. A plugin denies with a code whose hundreds are the HTTP
// status (40151 → 401) and whose last two digits are between
// [PluginCodeMin] and 99: 00–49 belong to the host's own error table, so a
// plugin can never impersonate a host error.
const PluginCodeMin = 50

// ValidDenyCode reports whether a plugin may deny with code: its status is one
// of 400, 401, 403, 429 or 503 and its last two digits are 50–99.
func ValidDenyCode(code int32) bool {
	switch code / 100 {
	case 400, 401, 403, 429, 503:
	default:
		return false
	}
	return code%100 >= PluginCodeMin
}

// PhaseDenies reports whether a plugin serving phase ([PhaseAuthorize] or
// [PhaseValidate]) may deny with code. code must also satisfy
// [ValidDenyCode]; the host refuses any other deny as an invalid decision
// (a fault: 500 50002), so a plugin cannot tell the client something its
// phase cannot know. The table, by the code's status:
//
//	status  authorize  validate  meaning
//	400     no         yes       the plant breaks a rule; authorize runs before the body is read
//	401     yes        no        the credential is not valid (the client gets error="invalid_token");
//	                             once the authorize chain accepted it, validate cannot say so
//	403     yes        yes       valid credential, not allowed: this request, or this plant for
//	                             this principal (error="insufficient_scope")
//	429     yes        yes       rate limit or quota reached; since version 2 the decision may
//	                             carry Retry-After and the RateLimit fields (ResponseHeaders)
//	503     yes        yes       the plugin cannot decide now, e.g. a store it needs is down
//	                             (Retry-After: 1); the client may retry
//
// Any other phase value (a config refusal included) may not deny at all.
func PhaseDenies(phase uint32, code int32) bool {
	if !ValidDenyCode(code) {
		return false
	}
	switch phase {
	case PhaseAuthorize:
		return code/100 != 400
	case PhaseValidate:
		return code/100 != 401
	}
	return false
}

// DenyRanges lists the deny codes a plugin serving phase may use
// ([PhaseDenies]), for messages: "40150–40199, 40350–40399, 42950–42999,
// 50350–50399"; for any other phase value, every code [ValidDenyCode]
// allows.
func DenyRanges(phase uint32) string {
	var b []byte
	for _, status := range [...]int32{400, 401, 403, 429, 503} {
		lo := status*100 + PluginCodeMin
		if phase != 0 && !PhaseDenies(phase, lo) {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = appendInt(b, lo)
		b = append(b, "–"...)
		b = appendInt(b, status*100+99)
	}
	return string(b)
}

func appendInt(b []byte, v int32) []byte {
	var d [10]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + v%10)
		if v /= 10; v == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// AppendDecision appends a decision record to dst. Text longer than
// [MaxText] is cut before the character that crosses the limit, so valid
// UTF-8 stays valid (the host refuses a decision whose text is not).
func AppendDecision(dst []byte, verdict uint8, code int32, text string) []byte {
	dst = append(dst, verdict, 0, 0, 0)
	dst = appendU32(dst, uint32(code))
	return append(dst, cutText(text)...)
}

// cutText cuts text at MaxText bytes, before the character that crosses it.
func cutText(text string) string {
	if len(text) > MaxText {
		n := MaxText
		for n > 0 && text[n]&0xC0 == 0x80 { // text[n] continues a character: back up to its start
			n--
		}
		text = text[:n]
	}
	return text
}

// AppendHeaderDecision is [AppendDecision] with response headers: hdrs
// holds name, value pairs (an odd last name is ignored). With no pairs it
// is AppendDecision.
func AppendHeaderDecision(dst []byte, verdict uint8, code int32, text string, hdrs ...string) []byte {
	if len(hdrs) < 2 {
		return AppendDecision(dst, verdict, code, text)
	}
	start := len(dst)
	dst = AppendDecision(dst, verdict, code, "")
	dst[start+1] = DecisionHeaders
	mark := len(dst)
	dst = appendU32(dst, 0)
	for i := 0; i+1 < len(hdrs); i += 2 {
		dst = appendString(dst, hdrs[i])
		dst = appendString(dst, hdrs[i+1])
	}
	putU32(dst[mark:], uint32(len(dst)-mark-4))
	return append(dst, cutText(text)...)
}

// Decision is a parsed decision record. Text and Headers alias the
// record's bytes.
type Decision struct {
	Verdict uint8
	Code    int32
	Text    []byte
	// Headers is the header block, nil when the record has none: walk it
	// with [NextHeader].
	Headers []byte
}

// NextHeader splits the first (name, value) pair off a header block.
func NextHeader(b []byte) (name, value, rest []byte, ok bool) {
	if name, b, ok = cutString(b); !ok {
		return nil, nil, b, false
	}
	if value, b, ok = cutString(b); !ok {
		return nil, nil, b, false
	}
	return name, value, b, true
}

// Errors from parsing; the host reports them as a plugin fault.
var (
	ErrShort   = errors.New("abi: message shorter than its layout")
	ErrVerdict = errors.New("abi: unknown verdict")
	ErrText    = errors.New("abi: text longer than MaxText")
	ErrCode    = errors.New("abi: deny code outside the plugin ranges " + DenyRanges(0))
	ErrHeaders = errors.New("abi: header block longer than MaxHeaderBlock")
)

// ParseDecision parses and checks a decision record.
func ParseDecision(b []byte) (Decision, error) {
	if len(b) < DecisionHeader {
		return Decision{}, ErrShort
	}
	d := Decision{Verdict: b[0], Code: int32(u32(b[4:])), Text: b[DecisionHeader:]}
	if b[1]&DecisionHeaders != 0 {
		var ok bool
		if d.Headers, d.Text, ok = cutString(d.Text); !ok {
			return Decision{}, ErrShort
		}
		if len(d.Headers) > MaxHeaderBlock {
			return Decision{}, ErrHeaders
		}
		for rest := d.Headers; len(rest) > 0; {
			if _, _, rest, ok = NextHeader(rest); !ok {
				return Decision{}, ErrShort
			}
		}
	}
	if len(d.Text) > MaxText {
		return Decision{}, ErrText
	}
	switch d.Verdict {
	case VerdictAllow, VerdictFault:
	case VerdictDeny:
		if !ValidDenyCode(d.Code) {
			return Decision{}, ErrCode
		}
	default:
		return Decision{}, ErrVerdict
	}
	return d, nil
}

package http_test

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
	"time"
)

// hostileCase is one hostile request: a body and headers, and the exact
// status and body the gateway must answer.
type hostileCase struct {
	name   string
	body   string
	ct     string            // Content-Type; "" = application/json, "-" = none
	auth   []string          // Authorization fields; nil = the writer's bearer credential
	header map[string]string // extra headers
	status int
	want   string
}

const (
	tooBigMsg = "id must be between -9223372036854775808 and 9223372036854775807, got "
	notIntMsg = "id must be an integer, got "
	eofMsg    = "malformed JSON: unexpected end of input"
)

func gz(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// hostileBodies are hostile JSON bodies sent with every header right. Ids of
// the accepted ones are unique so the cases can run in parallel.
func hostileBodies() []hostileCase {
	bad := errorBody
	ok := func(name, body, resp string) hostileCase {
		return hostileCase{name: name, body: body, status: 200, want: resp}
	}
	no := func(name, body string, code int32, msg string) hostileCase {
		return hostileCase{name: name, body: body, status: int(code / 100), want: bad(code, msg)}
	}
	deep := func(n int, open, close string) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	return []hostileCase{
		// Truncated and invalid JSON.
		no("truncated after brace", `{`, 40001, eofMsg),
		no("truncated in key", `{"i`, 40001, eofMsg),
		no("truncated after colon", `{"id":`, 40001, eofMsg),
		no("truncated in number", `{"id":1`, 40001, eofMsg),
		no("truncated in exponent", `{"id":1e`, 40001, eofMsg),
		no("truncated in escape", `{"id":1,"name":"a\`, 40001, eofMsg),
		no("truncated in unicode escape", `{"id":1,"name":"\u00`, 40001, eofMsg),
		no("truncated UTF-8 sequence", "{\"id\":1,\"name\":\"\xe2\x98", 40008, "request body is not valid UTF-8 (first invalid byte at offset 16)"),
		no("single quotes", `{'id':1,'name':'a'}`, 40001, "malformed JSON at byte 1"),
		no("unquoted key", `{id:1,"name":"a"}`, 40001, "malformed JSON at byte 1"),
		no("trailing comma", `{"id":1,"name":"a",}`, 40001, "malformed JSON at byte 19"),
		no("missing comma", `{"id":1 "name":"a"}`, 40001, "malformed JSON at byte 8"),
		no("comment", `{"id":1,/*c*/"name":"a"}`, 40001, "malformed JSON at byte 8"),
		no("leading zero", `{"id":01,"name":"a"}`, 40001, "malformed JSON at byte 7"),
		no("plus sign", `{"id":+1,"name":"a"}`, 40001, "malformed JSON at byte 6"),
		no("hex number", `{"id":0x1,"name":"a"}`, 40001, "malformed JSON at byte 7"),
		no("dot without digits", `{"id":1.,"name":"a"}`, 40001, "malformed JSON at byte 8"),
		no("leading dot", `{"id":.5,"name":"a"}`, 40001, "malformed JSON at byte 6"),
		no("NaN token", `{"id":NaN,"name":"a"}`, 40001, "malformed JSON at byte 6"),
		no("Infinity token", `{"id":Infinity,"name":"a"}`, 40001, "malformed JSON at byte 6"),
		no("-Infinity token", `{"id":-Infinity,"name":"a"}`, 40001, "malformed JSON at byte 7"),
		no("TRUE uppercase", `{"id":1,"name":"a","x":TRUE}`, 40001, "malformed JSON at byte 23"),
		no("raw tab in string", "{\"id\":1,\"name\":\"a\tb\"}", 40001, "malformed JSON at byte 17"),
		no("raw newline in string", "{\"id\":1,\"name\":\"a\nb\"}", 40001, "malformed JSON at byte 17"),
		no("raw NUL byte", "{\"id\":1,\"name\":\"a\x00b\"}", 40001, "malformed JSON at byte 17"),
		no("invalid escape", `{"id":1,"name":"\x41"}`, 40001, "malformed JSON at byte 16"),
		no("lone low surrogate", `{"id":1,"name":"\udc00"}`, 40001, "malformed JSON at byte 16"),
		no("high surrogate then letter", `{"id":1,"name":"\ud83dx"}`, 40001, "malformed JSON at byte 16"),
		no("trailing garbage", `{"id":1,"name":"a"}}`, 40001, "malformed JSON at byte 19"),
		no("two objects", `{"id":1,"name":"a"}{"id":2,"name":"b"}`, 40001, "malformed JSON: unexpected data after the top-level value at byte 19"),
		no("only whitespace", " \r\n\t", 40001, eofMsg),
		no("form-encoded body", `id=1&name=a`, 40001, "malformed JSON at byte 0"),
		no("BOM before object", "\ufeff{\"id\":1,\"name\":\"a\"}", 40001, "malformed JSON at byte 0"),
		no("BOM inside whitespace", " \ufeff{\"id\":1,\"name\":\"a\"}", 40001, "malformed JSON at byte 1"),
		no("UTF-16LE BOM", "\xff\xfe{\x00", 40008, "request body is not valid UTF-8 (first invalid byte at offset 0)"),
		no("form feed whitespace", "\f{\"id\":1,\"name\":\"a\"}", 40001, "malformed JSON at byte 0"),
		no("non-breaking space whitespace", "\u00a0{\"id\":1,\"name\":\"a\"}", 40001, "malformed JSON at byte 0"),

		// Nesting: depth is refused by the decoder's limit, never a stack overflow.
		no("100k open brackets", strings.Repeat("[", 100000), 40001, "malformed JSON at byte 10000"),
		no("100k balanced brackets", deep(100000, "[", "]"), 40001, "malformed JSON at byte 10000"),
		no("100k nested objects in a field", `{"id":1,"name":"a","x":`+deep(100000, `{"a":`, `}`), 40001, "malformed JSON at byte 50018"),
		ok("nesting of 500 in an extra field", `{"id":901,"name":"a","x":`+deep(500, "[", "]")+`}`, `{"name":"a"}`),

		// Numbers.
		no("-0 is zero, below plant-rules' id_min", `{"id":-0,"name":"a"}`, 40050, "id must be at least 1, got 0"),
		ok("1.0", `{"id":902.0,"name":"a"}`, `{"name":"a"}`),
		ok("9.02e2", `{"id":9.02e2,"name":"a"}`, `{"name":"a"}`),
		ok("1e3 style", `{"id":9030e-1,"name":"a"}`, `{"name":"a"}`),
		ok("exponent with plus", `{"id":9.04E+2,"name":"a"}`, `{"name":"a"}`),
		ok("max int64", `{"id":9223372036854775807,"name":"a"}`, `{"name":"a"}`),
		ok("max int64 as 9.223372036854775807e18", `{"id":9.223372036854775806e18,"name":"a"}`, `{"name":"a"}`),
		no("max int64 + 1", `{"id":9223372036854775808,"name":"a"}`, 40002, tooBigMsg+"9223372036854775808"),
		no("min int64 is below id_min", `{"id":-9223372036854775808,"name":"a"}`, 40050, "id must be at least 1, got -9223372036854775808"),
		no("min int64 - 1", `{"id":-9223372036854775809,"name":"a"}`, 40002, tooBigMsg+"-9223372036854775809"),
		no("1e400", `{"id":1e400,"name":"a"}`, 40002, tooBigMsg+"1e400"),
		no("-1e400", `{"id":-1e400,"name":"a"}`, 40002, tooBigMsg+"-1e400"),
		no("1e-400", `{"id":1e-400,"name":"a"}`, 40002, notIntMsg+"1e-400"),
		no("huge exponent", `{"id":1e99999999999999999999,"name":"a"}`, 40002, tooBigMsg+"1e99999999999999999999"),
		no("100k digits", `{"id":`+strings.Repeat("7", 100000)+`,"name":"a"}`, 40002, tooBigMsg+strings.Repeat("7", 40)+"…"),
		no("fraction 0.5", `{"id":0.5,"name":"a"}`, 40002, notIntMsg+"0.5"),
		no("fraction past int64 precision", `{"id":9223372036854775806.5,"name":"a"}`, 40002, notIntMsg+"9223372036854775806.5"),
		no("tiny fraction", `{"id":1.0000000000000000000001,"name":"a"}`, 40002, notIntMsg+"1.0000000000000000000001"),
		no("float64-rounded max+1", `{"id":9.223372036854775808e18,"name":"a"}`, 40002, tooBigMsg+"9.223372036854775808e18"),
		no("zero id", `{"id":0e5,"name":"a"}`, 40050, "id must be at least 1, got 0"),
		no("negative id", `{"id":-1,"name":"a"}`, 40050, "id must be at least 1, got -1"),
		no("id as boolean", `{"id":true,"name":"a"}`, 40002, "id must be an integer, got boolean"),
		no("id as array", `{"id":[1],"name":"a"}`, 40002, "id must be an integer, got array"),
		no("id as object", `{"id":{},"name":"a"}`, 40002, "id must be an integer, got object"),
		no("id as numeric string", `{"id":"905","name":"a"}`, 40002, "id must be an integer, got string"),

		// Strings.
		ok("100-character name", `{"id":906,"name":"`+strings.Repeat("n", 100)+`"}`, `{"name":"`+strings.Repeat("n", 100)+`"}`),
		no("101-character name", `{"id":907,"name":"`+strings.Repeat("n", 101)+`"}`, 40051, "name must be 1–100 characters after trimming, got 101"),
		no("64 KiB name", `{"id":907,"name":"`+strings.Repeat("n", 64<<10)+`"}`, 40051, "name must be 1–100 characters after trimming, got 65536"),
		no("500 KiB unknown field, name too long", `{"id":907,"x":"`+strings.Repeat("x", 500<<10)+`","name":"`+strings.Repeat("n", 101)+`"}`, 40051, "name must be 1–100 characters after trimming, got 101"),
		ok("500 KiB unknown field", `{"id":908,"x":"`+strings.Repeat("x", 500<<10)+`","name":"big"}`, `{"name":"big"}`),
		no("escaped NUL in name", `{"id":909,"name":"a\u0000b"}`, 40052, "name must not contain control characters, found U+0000 at character 2"),
		no("escaped ESC in name", `{"id":909,"name":"\u001b[31m"}`, 40052, "name must not contain control characters, found U+001B at character 1"),
		no("escaped newline in name", `{"id":909,"name":"a\nb"}`, 40052, "name must not contain control characters, found U+000A at character 2"),
		no("DEL in name", "{\"id\":909,\"name\":\"a\x7fb\"}", 40052, "name must not contain control characters, found U+007F at character 2"),
		no("C1 control in name", `{"id":909,"name":"a\u0085b"}`, 40052, "name must not contain control characters, found U+0085 at character 2"),
		no("escaped NUL in tag", `{"id":909,"name":"a","tag":"\u0000"}`, 40054, "tag must not contain control characters, found U+0000 at character 1"),
		ok("escaped NUL in an unknown field", `{"id":910,"name":"a","x":"\u0000"}`, `{"name":"a"}`),
		ok("surrogate pair escape", `{"id":911,"name":"\ud83c\udf31"}`, `{"name":"🌱"}`),
		ok("escaped solidus and unicode", `{"id":912,"name":"a\/b\u00e9"}`, `{"name":"a/bé"}`),
		ok("right-to-left override is not a control character", `{"id":913,"name":"a\u202eb"}`, "{\"name\":\"a\u202eb\"}"),
		no("name null", `{"id":914,"name":null}`, 40002, "name must be a string, got null"),
		no("name array", `{"id":914,"name":["a"]}`, 40002, "name must be a string, got array"),
		no("name object", `{"id":914,"name":{"a":1}}`, 40002, "name must be a string, got object"),
		no("name false", `{"id":914,"name":false}`, 40002, "name must be a string, got boolean"),
		no("tag number", `{"id":914,"name":"a","tag":1}`, 40002, "tag must be a string, got number"),
		no("empty name", `{"id":914,"name":""}`, 40051, "name must be 1–100 characters after trimming, got 0"),
		no("empty tag", `{"id":914,"name":"a","tag":""}`, 40053, "tag must be 1–50 characters after trimming, got 0"),

		// Duplicate keys at depths that matter.
		no("duplicate id", `{"id":915,"id":916,"name":"a"}`, 40007, "malformed JSON: duplicate key in object at byte 10"),
		no("duplicate name, second benign", `{"id":915,"name":"a\u0000","name":"a"}`, 40007, "malformed JSON: duplicate key in object at byte 27"),
		no("duplicate tag", `{"id":915,"name":"a","tag":"x","tag":"y"}`, 40007, "malformed JSON: duplicate key in object at byte 31"),
		no("duplicate via escaped key", `{"id":915,"name":"a","n\u0061me":"b"}`, 40007, "malformed JSON: duplicate key in object at byte 21"),
		no("duplicate after 500 KiB", `{"id":915,"x":"`+strings.Repeat("x", 500<<10)+`","name":"a","id":1}`, 40007, "malformed JSON: duplicate key in object at byte 512028"),
		no("duplicate in a nested object", `{"id":915,"name":"a","x":{"k":1,"k":2}}`, 40007, "malformed JSON: duplicate key in object at byte 32"),
		no("duplicate deep in arrays", `{"id":915,"name":"a","x":[[{"a":{"b":1,"b":1}}]]}`, 40007, "malformed JSON: duplicate key in object at byte 39"),
		ok("same key in sibling objects", `{"id":917,"name":"a","x":[{"k":1},{"k":2}]}`, `{"name":"a"}`),
		ok("keys differing in case", `{"id":918,"name":"a","Name":"b","ID":1}`, `{"name":"a"}`),

		// UTF-8.
		no("invalid byte in name", "{\"id\":919,\"name\":\"\xff\"}", 40008, "request body is not valid UTF-8 (first invalid byte at offset 18)"),
		no("overlong slash", "{\"id\":919,\"name\":\"\xc0\xaf\"}", 40008, "request body is not valid UTF-8 (first invalid byte at offset 18)"),
		no("overlong NUL", "{\"id\":919,\"name\":\"\xe0\x80\x80\"}", 40008, "request body is not valid UTF-8 (first invalid byte at offset 18)"),
		no("encoded surrogate", "{\"id\":919,\"name\":\"\xed\xa0\x80\"}", 40008, "request body is not valid UTF-8 (first invalid byte at offset 18)"),
		no("beyond U+10FFFF", "{\"id\":919,\"name\":\"\xf4\x90\x80\x80\"}", 40008, "request body is not valid UTF-8 (first invalid byte at offset 18)"),
		no("invalid byte in an unknown key", "{\"id\":919,\"\xfe\":1,\"name\":\"a\"}", 40008, "request body is not valid UTF-8 (first invalid byte at offset 11)"),
		no("latin-1 é", "{\"id\":919,\"name\":\"caf\xe9\"}", 40008, "request body is not valid UTF-8 (first invalid byte at offset 21)"),

		// Bodies that are not objects.
		no("array body", `[]`, 40002, "request body must be a JSON object, got array"),
		no("array of plants", `[{"id":920,"name":"a"}]`, 40002, "request body must be a JSON object, got array"),
		no("string body", `"{\"id\":920,\"name\":\"a\"}"`, 40002, "request body must be a JSON object, got string"),
		no("null body", `null`, 40002, "request body must be a JSON object, got null"),
		no("true body", `true`, 40002, "request body must be a JSON object, got boolean"),
		no("number body", `920`, 40002, "request body must be a JSON object, got number"),
		no("empty object", `{}`, 40002, "id is required"),
		no("empty body", ``, 40006, "request body is empty; want a JSON NewPlant object"),
	}
}

// hostileHeaders are hostile headers around a valid body.
func hostileHeaders() []hostileCase {
	bad := errorBody
	const body = `{"id":930,"name":"a"}`
	const mal = "bearer credential must be one token of letters, digits and -._~+/ followed by optional ="
	ct := func(name, ct string, status int, want string) hostileCase {
		return hostileCase{name: name, body: body, ct: ct, status: status, want: want}
	}
	auth := func(name string, status int, want string, values ...string) hostileCase {
		return hostileCase{name: name, body: body, auth: append([]string{}, values...), status: status, want: want}
	}
	ctWrong := bad(40004, "Content-Type must be application/json")
	ctParam := bad(40004, "Content-Type application/json takes no parameter but charset=utf-8")
	missing := bad(40101, "a bearer credential is required")
	return []hostileCase{
		ct("no Content-Type", "-", 400, bad(40004, "Content-Type is required: application/json")),
		ct("text/plain", "text/plain", 400, ctWrong),
		ct("application/jsonx", "application/jsonx", 400, ctWrong),
		ct("application/json-patch+json", "application/json-patch+json", 400, ctWrong),
		ct("application/x-www-form-urlencoded", "application/x-www-form-urlencoded", 400, ctWrong),
		ct("charset=latin1", "application/json; charset=latin1", 400, ctParam),
		ct("charset=utf-16", "application/json; charset=utf-16", 400, ctParam),
		ct("unknown parameter", "application/json; v=1", 400, ctParam),
		ct("malformed parameter", "application/json; charset", 400, ctWrong),
		ct("wildcard", "*/*", 400, ctWrong),
		ct("uppercase type is fine", "APPLICATION/JSON", 200, `{"name":"a"}`),
		ct("charset=utf-8 quoted is fine", `application/json; charset="utf-8"`, 200, `{"name":"a"}`),
		{name: "gzip body refused, never decompressed", body: gz(body), header: map[string]string{"Content-Encoding": "gzip"}, status: 400, want: bad(40009, "Content-Encoding is not supported; send the body uncompressed")},
		{name: "gzip label on a plain body", body: body, header: map[string]string{"Content-Encoding": "gzip"}, status: 400, want: bad(40009, "Content-Encoding is not supported; send the body uncompressed")},
		{name: "deflate", body: body, header: map[string]string{"Content-Encoding": "deflate"}, status: 400, want: bad(40009, "Content-Encoding is not supported; send the body uncompressed")},
		{name: "br", body: body, header: map[string]string{"Content-Encoding": "br"}, status: 400, want: bad(40009, "Content-Encoding is not supported; send the body uncompressed")},
		{name: "gzip bomb refused before decoding", body: gz(strings.Repeat("[", 10<<20)), header: map[string]string{"Content-Encoding": "gzip"}, status: 400, want: bad(40009, "Content-Encoding is not supported; send the body uncompressed")},

		auth("no Authorization", 401, missing),
		auth("empty Authorization", 401, missing, ""),
		auth("whitespace Authorization", 401, missing, "   "),
		auth("Bearer alone", 400, bad(40010, "bearer credential is empty"), "Bearer"),
		auth("Bearer and a space", 400, bad(40010, "bearer credential is empty"), "Bearer "),
		auth("two spaces are valid (RFC 6750 1*SP)", 200, `{"name":"a"}`, "Bearer  "+writerToken),
		auth("lower-case scheme", 200, `{"name":"a"}`, "bearer "+writerToken),
		auth("tab separator", 400, bad(40010, "bearer credential is empty"), "Bearer\t"+writerToken),
		auth("two credentials", 400, bad(40010, mal), "Bearer "+writerToken+" "+writerToken),
		auth("comma-separated credentials", 400, bad(40010, mal), "Bearer "+writerToken+", Bearer "+writerToken),
		auth("two Authorization headers", 400, bad(40010, "more than one Authorization header"), "Bearer "+writerToken, "Bearer "+writerToken),
		auth("Basic scheme", 401, missing, "Basic dXNlcjpwYXNz"),
		auth("Token scheme", 401, missing, "Token "+writerToken),
		auth("Bearerx scheme", 401, missing, "Bearerx "+writerToken),
		auth("token without scheme", 401, missing, writerToken),
		auth("quoted token", 400, bad(40010, mal), `Bearer "`+writerToken+`"`),
		auth("token with a comma", 400, bad(40010, mal), "Bearer a,b"),
		auth("token with a semicolon", 400, bad(40010, mal), "Bearer a;b"),
		auth("padding in the middle", 400, bad(40010, mal), "Bearer ab=cd"),
		auth("padding only", 400, bad(40010, mal), "Bearer =="),
		auth("non-ASCII token", 400, bad(40010, mal), "Bearer tökén"),
		auth("scheme of symbols", 400, bad(40010, "Authorization header does not start with an authentication scheme"), "@@ "+writerToken),
		auth("unknown token", 401, bad(40151, "invalid token"), "Bearer "+strings.Repeat("A", 64)),
		auth("8 KiB token", 401, bad(40151, "invalid token"), "Bearer "+strings.Repeat("A", 6000)),
		auth("token plus padding is another token", 401, bad(40151, "invalid token"), "Bearer "+writerToken+"=="),
		auth("token of another case", 401, bad(40151, "invalid token"), "Bearer "+strings.ToUpper(writerToken)),
	}
}

// TestHostileRequests sends every hostile case through the real stack
// (Fiber's app.Test, the bundled plugins, miniredis). do checks each answer
// against the OpenAPI document.
func TestHostileRequests(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	cases := append(hostileBodies(), hostileHeaders()...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ct := c.ct
			switch ct {
			case "":
				ct = "application/json"
			case "-":
				ct = ""
			}
			req := newPost(c.body, "", ct)
			auth := c.auth
			if auth == nil {
				auth = []string{"Bearer " + writerToken}
			}
			for _, v := range auth {
				req.Header.Add("Authorization", v)
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			got := g.do(req)
			if got.status != c.status || (c.want != "" && got.body != c.want) {
				t.Fatalf("got %d %.300s\nwant %d %.300s", got.status, got.body, c.status, c.want)
			}
			if got.status != 200 && got.header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", got.header.Get("Content-Type"))
			}
		})
	}
	if n := len(cases); n < 100 {
		t.Fatalf("only %d hostile cases", n)
	}
	if t.Failed() {
		for _, l := range strings.Split(g.logText(), "\n") {
			if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
				t.Log(l)
			}
		}
	}
	if strings.Contains(g.logText(), writerToken) {
		t.Fatal("a log line holds the credential")
	}
}

// TestHostileRaw sends what net/http's client cannot: lying framing,
// oversized headers, slow and incomplete bodies, malformed lines, on a real
// listener. Every refusal fasthttp or the screen makes closes the
// connection; a refusal by a handler keeps it. TestSmuggling has the
// ambiguous framings.
func TestHostileRaw(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{bodyLimit: 4096, readTimeout: 500 * time.Millisecond})
	addr := g.serve(t)
	const body = `{"id":950,"name":"raw"}`
	head := "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writerToken + "\r\nContent-Type: application/json\r\n"
	big := `{"id":951,"name":"` + strings.Repeat("x", 5000) + `"}`
	malformed := errorBody(40011, "malformed HTTP request")
	slow := errorBody(40013, "request was not received in time")
	tooLarge := errorBody(40012, "request headers are too large")
	notNumber := errorBody(40014, "Content-Length is not a decimal number")
	cases := []struct {
		name, raw string
		status    int
		body      string
		after     string
	}{
		{name: "well-formed", raw: head + "Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body, status: 200, body: `{"name":"raw"}`, after: healthy},
		{name: "multipart is not JSON and is never parsed", raw: "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writerToken +
			"\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 5\r\n\r\nhello", status: 400, body: errorBody(40004, "Content-Type must be application/json"), after: healthy},
		{name: "over the limit with Content-Length", raw: head + "Content-Length: " + itoa(len(big)) + "\r\n\r\n" + big, status: 400, body: errorBody(40005, "request body is larger than the limit"), after: "closed"},
		{name: "over the limit, Content-Length only", raw: head + "Content-Length: 100000000\r\n\r\n", status: 400, body: errorBody(40005, "request body is larger than the limit"), after: "closed"},
		{name: "over the limit, chunked", raw: head + "Transfer-Encoding: chunked\r\n\r\n" + chunk(big) + "0\r\n\r\n", status: 400, body: errorBody(40005, "request body is larger than the limit"), after: "closed"},
		{name: "over the limit, no framing, close-delimited", raw: head + "Connection: close\r\n\r\n" + big, status: 400, body: errorBody(40006, "request body is empty; want a JSON NewPlant object"), after: "closed"},
		{name: "negative Content-Length", raw: head + "Content-Length: -1\r\n\r\n" + body, status: 400, body: notNumber, after: "closed"},
		{name: "non-numeric Content-Length", raw: head + "Content-Length: 1x\r\n\r\n" + body, status: 400, body: notNumber, after: "closed"},
		// The rest of the body is read as the next request, whose request
		// line is garbage: refused, and the connection closed.
		{name: "Content-Length shorter than the body", raw: head + "Content-Length: 10\r\n\r\n" + body, status: 400, body: errorBody(40001, eofMsg), after: "400 " + malformed},
		{name: "bad chunk size", raw: head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + "\r\n0\r\n\r\n", status: 400, body: errorBody(40014, "malformed chunked body"), after: "closed"},
		{name: "incomplete body: read timeout", raw: head + "Content-Length: 1000\r\n\r\n" + body, status: 400, body: slow, after: "closed"},
		{name: "incomplete chunked body: read timeout", raw: head + "Transfer-Encoding: chunked\r\n\r\n" + chunk(body), status: 400, body: slow, after: "closed"},
		{name: "incomplete headers: read timeout", raw: head, status: 400, body: slow, after: "closed"},
		{name: "oversized header", raw: head + "X-Big: " + strings.Repeat("a", 10000) + "\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body, status: 400, body: tooLarge, after: "closed"},
		{name: "many headers", raw: head + strings.Repeat("X-A: b\r\n", 2000) + "Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body, status: 400, body: tooLarge, after: "closed"},
		{name: "huge Authorization", raw: "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + strings.Repeat("A", 9000) + "\r\n\r\n", status: 400, body: tooLarge, after: "closed"},
		{name: "header without colon", raw: head + "NoColon\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body, status: 400, body: malformed, after: "closed"},
		{name: "NUL in a header value", raw: head + "X-A: a\x00b\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body, status: 400, body: malformed, after: "closed"},
		{name: "NUL in the Authorization value", raw: "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\x00b\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body,
			status: 400, body: malformed, after: "closed"},
		// RFC 9112 §5.2 lets a server refuse obs-fold; a proxy might keep
		// the folded line as a header of its own.
		{name: "obsolete line folding", raw: head + "X-A: a\r\n b\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body, status: 400, body: errorBody(40011, "obsolete line folding in a header"), after: "closed"},
		// fasthttp waits for a CRLF CRLF that never comes.
		{name: "bare LF line endings", raw: strings.ReplaceAll(head, "\r\n", "\n") + "Content-Length: " + itoa(len(body)) + "\n\n" + body, status: 400, body: slow, after: "closed"},
		{name: "request line without a version", raw: "POST /plants\r\n\r\n", status: 400, body: malformed, after: "closed"},
		{name: "garbage request line", raw: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", status: 400, body: malformed, after: "closed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := rawExchange(t, addr, c.raw)
			if r.status != c.status || r.body != c.body || r.after != c.after {
				t.Fatalf("got %d %.200s, then %.100s\nwant %d %s, then %s", r.status, r.body, r.after, c.status, c.body, c.after)
			}
		})
	}
}

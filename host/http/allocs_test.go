package http

import (
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// TestDecodePlantAllocs: a create's body costs the name and tag strings the
// plant keeps, and nothing else (the decoder is reused, the id parsed in
// place), so allocations per create do not grow with the decoder's state.
// Allocation counts are deterministic, unlike times.
func TestDecodePlantAllocs(t *testing.T) {
	body := []byte(`{"id":12345,"name":"Monstera deliciosa","tag":"tropical"}`)
	if p, err := DecodePlant(body); err != nil || p.ID != 12345 || p.Name != "Monstera deliciosa" || p.Tag != "tropical" || !p.HasTag {
		t.Fatalf("DecodePlant = %+v, %v", p, err)
	}
	escaped := []byte(`{"id":1.0e1,"name":"a\u00e9","x":{"y":[1,{"z":null}]}}`)
	if p, err := DecodePlant(escaped); err != nil || p.ID != 10 || p.Name != "aé" || p.HasTag {
		t.Fatalf("DecodePlant(escaped) = %+v, %v", p, err)
	}
	if raceEnabled {
		t.Skip("under the race detector sync.Pool drops items at random: the counts below hold in normal builds only")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodePlant(body) }); n > 2 {
		t.Errorf("DecodePlant: %.0f allocations, want at most 2 (name and tag)", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodePlant(escaped) }); n > 2 {
		t.Errorf("DecodePlant(escaped): %.0f allocations, want at most 2", n)
	}
}

// TestRepresentationAllocs: the usual Content-Type of a create is checked
// without allocating; any other spelling takes the full parse.
func TestRepresentationAllocs(t *testing.T) {
	app := fiber.New()
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		var fctx fasthttp.RequestCtx
		fctx.Request.Header.SetContentType(ct)
		c := app.AcquireCtx(&fctx)
		if err := checkRepresentation(c); err != nil {
			t.Fatalf("%q: %v", ct, err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = checkRepresentation(c) }); n != 0 {
			t.Errorf("checkRepresentation(%q): %.0f allocations, want 0", ct, n)
		}
		app.ReleaseCtx(c)
	}
}

// TestRequestIDAllocs: the response carries a request id (the client's when
// sane, else a generated one), and without the access log, which is the
// only reader of the id as a string, setting it allocates nothing.
func TestRequestIDAllocs(t *testing.T) {
	app := fiber.New()
	for _, tc := range []struct{ incoming, want string }{
		{"abc-123.x_y:z", "abc-123.x_y:z"},
		{"", idPrefix},
		{"bad id\r\n", idPrefix},
	} {
		var fctx fasthttp.RequestCtx
		if tc.incoming != "" {
			fctx.Request.Header.Set(HeaderRequestID, tc.incoming)
		}
		c := app.AcquireCtx(&fctx)
		if got := setRequestID(c, true); !strings.HasPrefix(got, tc.want) || string(fctx.Response.Header.Peek(HeaderRequestID)) != got {
			t.Fatalf("incoming %q: id %q, header %q; want %q…", tc.incoming, got, fctx.Response.Header.Peek(HeaderRequestID), tc.want)
		}
		if got := setRequestID(c, false); got != "" || !strings.HasPrefix(string(fctx.Response.Header.Peek(HeaderRequestID)), tc.want) {
			t.Fatalf("incoming %q, not kept: id %q, header %q", tc.incoming, got, fctx.Response.Header.Peek(HeaderRequestID))
		}
		if n := testing.AllocsPerRun(100, func() { setRequestID(c, false) }); n != 0 {
			t.Errorf("incoming %q: %.0f allocations, want 0", tc.incoming, n)
		}
		app.ReleaseCtx(c)
	}
}

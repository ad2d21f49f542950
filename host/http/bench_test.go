package http_test

import (
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	gatehttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/wasm"
)

// BenchmarkCreatePlant measures POST /plants through Fiber's handler
// without a network: the full path (credential, bearer-auth with its token
// lookup, decode, plant-rules, the Redis create) against the same path with
// the plugin chain empty, on a real redis-server and on miniredis, so the
// ratio in one run shows what the policies cost.
//
//	go test -run '^$' -bench CreatePlant -benchmem ./host/http/
func BenchmarkCreatePlant(b *testing.B) {
	for _, store := range []string{"redis-server", "miniredis"} {
		for _, chain := range []bool{false, true} {
			name := store + "/no-plugins-baseline"
			if chain {
				name = store + "/bearer-auth+plant-rules"
			}
			b.Run(name, func(b *testing.B) {
				o := gatewayOptions{}
				if store == "redis-server" {
					o.redisURL = redistest.Start(b).URL()
				}
				g := newGateway(b, o)
				srv := g.srv
				if !chain {
					var err error
					if srv, err = gatehttp.New(gatehttp.Config{Store: g.store, Policy: wasm.Empty(), InsecureNoAuth: true}); err != nil {
						b.Fatal(err)
					}
				}
				benchHandler(b, srv)
			})
		}
	}
}

func benchHandler(b *testing.B, srv *gatehttp.Server) {
	h := srv.App().Handler()
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/plants")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.Header.Set("Authorization", "Bearer "+writerToken)
		ctx.Request.SetBodyString(`{"id":` + strconv.Itoa(i+1) + `,"name":"Monstera","tag":"tropical"}`)
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}

// BenchmarkDecodePlant is the strict body decoder alone.
func BenchmarkDecodePlant(b *testing.B) {
	body := []byte(`{"id":12345,"name":"Monstera deliciosa","tag":"tropical"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := gatehttp.DecodePlant(body); err != nil {
			b.Fatal(err)
		}
	}
}

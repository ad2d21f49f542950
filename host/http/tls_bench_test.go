package http_test

import (
	"crypto/tls"
	"io"
	"net"
	nethttp "net/http"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/plantgate/plantgate/host/tlscert/tlstest"
)

// BenchmarkTransport measures GET /healthz over a real loopback connection
// (client and server in this process, so ns/op is both sides' time): plain
// HTTP, TLS on a kept-alive connection, and TLS with a new connection (a
// full handshake) per request, so the ratios in one run show what TLS
// costs.
//
//	go test -run '^$' -bench Transport -benchmem ./host/http/
func BenchmarkTransport(b *testing.B) {
	ca := tlstest.NewCA(b, "bench CA")
	for _, mode := range []string{"plain-keepalive", "tls-keepalive", "tls-handshake-per-request"} {
		b.Run(mode, func(b *testing.B) {
			g := newGateway(b, gatewayOptions{authOnly: true})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			tr := &nethttp.Transport{DisableKeepAlives: mode == "tls-handshake-per-request"}
			url := "http://" + ln.Addr().String() + "/healthz"
			served := ln
			if mode != "plain-keepalive" {
				dir := b.TempDir()
				certFile, keyFile := ca.Server(b, "bench").Write(b, dir)
				served = tls.NewListener(ln, reloaderConfig(b, certFile, keyFile))
				tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
				url = "https://" + ln.Addr().String() + "/healthz"
			}
			go g.srv.Serve(served)
			b.Cleanup(func() { g.srv.App().Shutdown() })
			c := &nethttp.Client{Transport: tr}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				resp, err := c.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatal(resp.StatusCode)
				}
			}
		})
	}
}

// BenchmarkCORS measures POST /plants through Fiber's handler from an
// allowed origin with CORS on, against the same request with CORS off.
//
//	go test -run '^$' -bench CORS -benchmem ./host/http/
func BenchmarkCORS(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off-baseline"
		o := gatewayOptions{}
		if on {
			name, o.corsOrigins = "on", []string{appOrigin}
		}
		b.Run(name, func(b *testing.B) {
			g := newGateway(b, o)
			h := g.srv.App().Handler()
			var ctx fasthttp.RequestCtx
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ctx.Request.Reset()
				ctx.Response.Reset()
				ctx.Request.Header.SetMethod("GET")
				ctx.Request.SetRequestURI("/plants/1")
				ctx.Request.Header.Set("Origin", appOrigin)
				ctx.Request.Header.Set("Authorization", "Bearer "+readerToken)
				h(&ctx)
				if ctx.Response.StatusCode() != 404 {
					b.Fatal(ctx.Response.StatusCode(), string(ctx.Response.Body()))
				}
			}
		})
	}
}

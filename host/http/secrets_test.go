package http_test

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPluginSandbox runs a Go plugin that tries the filesystem, the
// environment and the network: each attempt is refused or sees nothing,
// and the plugin says so in its deny message. The host process has HOME,
// PATH and a real /etc/passwd; the guest must see none of them.
func TestPluginSandbox(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{extra: []string{"30-hostile.wasm=" + hostilePlugin}})
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a host port the plugin tries to reach
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	got := g.post(`{"id":1,"name":"sandbox","tag":"` + ln.Addr().String() + `"}`)
	want := errorBody(40099, `passwd=refused rootdir=refused cwd=refused write=refused environ=0 HOME="" PATH="" dial=refused listen=in-guest`)
	if got.status != 400 || got.body != want {
		t.Fatalf("got %d %s\nwant 400 %s", got.status, got.body, want)
	}
	select {
	case <-accepted:
		t.Fatal("the plugin reached a host socket")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := os.Stat("/tmp/plantgate-hostile"); err == nil {
		t.Fatal("the plugin wrote a host file")
	}
}

// TestNoCredentialInLogs fails authentication in every way the gateway
// knows, each with a distinct secret-looking credential, and checks that
// no log line holds any of them.
func TestNoCredentialInLogs(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	secrets := map[string][]string{
		"unknown token":          {"Bearer secretUnknown0123456789"},
		"malformed token":        {"Bearer secretMalformed0123,456789"},
		"two credentials":        {"Bearer secretTwoA0123456789 secretTwoB0123456789"},
		"two headers":            {"Bearer secretHeaderA0123456789", "Bearer secretHeaderB0123456789"},
		"other scheme":           {"Basic secretBasic0123456789"},
		"token68 with padding":   {"Bearer secretPadded0123456789=="},
		"no scheme":              {"secretNoScheme0123456789"},
		"non-ASCII":              {"Bearer secretNonASCII0123456789é"},
		"reader token (403)":     {"Bearer " + readerToken},
		"valid, invalid body":    {"Bearer " + writerToken},
		"valid, plugin denial":   {"Bearer " + writerToken},
		"writer in a bad header": {"Bearer " + writerToken + " x"},
	}
	bodies := map[string]string{"valid, invalid body": `{"id":1,`, "valid, plugin denial": `{"id":1,"name":""}`}
	for name, auth := range secrets {
		body := bodies[name]
		if body == "" {
			body = `{"id":1,"name":"a"}`
		}
		req := newPost(body, "", "application/json")
		for _, v := range auth {
			req.Header.Add("Authorization", v)
		}
		if got := g.do(req); got.status == 200 {
			t.Fatalf("%s: %d %s", name, got.status, got.body)
		}
	}
	// fasthttp refuses a control character in a header before any handler
	// runs: only a raw socket can send it.
	const control = "secretControl0123456789\x01x"
	addr := g.serve(t)
	head := "POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
	if status, _ := rawRequest(t, addr, head+"Authorization: Bearer "+control+"\r\n\r\n{}"); status != 400 {
		t.Fatalf("control char in token: %d", status)
	}
	secrets["control char in token"] = []string{"Bearer " + control[:len(control)-2]}
	g.mr.Close() // and with the token store down
	if got := g.post(`{"id":2,"name":"a"}`); got.status != 503 {
		t.Fatalf("store down: %d %s", got.status, got.body)
	}
	logs := g.logText()
	if !strings.Contains(logs, "status=401") || !strings.Contains(logs, "status=403") || !strings.Contains(logs, "status=503") {
		t.Fatalf("the access log lacks the failures:\n%s", logs)
	}
	for name, auth := range secrets {
		for _, v := range auth {
			for _, part := range strings.Fields(v) {
				if len(part) >= 16 && strings.Contains(logs, part) {
					t.Errorf("%s: a log line holds %q", name, part)
				}
			}
		}
	}
}

//go:build wasip1

// Command hostile is a host/http test fixture built on the SDK: a validate
// plugin that misbehaves on demand, chosen by the plant's name, and allows
// every other plant.
//
//	panic    the handler panics (the SDK turns it into a fault)
//	crash    a goroutine panics: the Go runtime exits the instance
//	loop     never returns (the host's deadline stops it)
//	bomb     allocates past the memory limit (the Go runtime dies)
//	sandbox  tries the filesystem, the environment and the network (it
//	         dials the plant's tag as host:port), and denies 40099 with
//	         what it saw
//
// host/http's TestMain builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/plantgate/plantgate/sdk"
)

var sink [][]byte

func init() {
	sdk.HandleValidate(func(p sdk.Plant) sdk.Decision {
		switch p.Name {
		case "panic":
			panic("hostile fixture panic")
		case "crash":
			go func() { panic("hostile fixture crash") }()
			runtime.Gosched()
		case "loop":
			for i := 0; ; i++ {
				if i < 0 {
					return sdk.Allow()
				}
			}
		case "bomb":
			for {
				sink = append(sink, make([]byte, 1<<20))
			}
		case "sandbox":
			return sdk.Deny(40099, sandbox(p.Tag))
		}
		return sdk.Allow()
	})
}

// sandbox reports, in one line, what each escape attempt returned. It
// dials addr, a host:port the test listens on.
func sandbox(addr string) string {
	var out []string
	seen := func(what string, v any, err error) {
		if err != nil {
			out = append(out, what+"=refused")
			return
		}
		out = append(out, fmt.Sprintf("%s=%v", what, v))
	}
	b, err := os.ReadFile("/etc/passwd")
	seen("passwd", len(b), err)
	ents, err := os.ReadDir("/")
	seen("rootdir", len(ents), err)
	ents, err = os.ReadDir(".")
	seen("cwd", len(ents), err)
	err = os.WriteFile("/tmp/plantgate-hostile", []byte("x"), 0o644)
	seen("write", "ok", err)
	out = append(out, fmt.Sprintf("environ=%d", len(os.Environ())))
	out = append(out, fmt.Sprintf("HOME=%q", os.Getenv("HOME")))
	out = append(out, fmt.Sprintf("PATH=%q", os.Getenv("PATH")))
	c, err := net.DialTimeout("tcp", addr, 50*time.Millisecond)
	if c != nil {
		c.Close()
	}
	seen("dial", "ok", err)
	// Go's wasip1 net package simulates loopback listeners inside the
	// guest (net_fake.go); what matters is that no host socket exists.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if ln != nil {
		ln.Close()
	}
	seen("listen", "in-guest", err)
	return strings.Join(out, " ")
}

func main() {}

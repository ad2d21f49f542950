package http_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCompressionBomb sends a gzip of 100 MB of zeros (about 100 KB on the
// wire, under the 1 MiB body limit) on a raw socket, labelled so that a
// check of the first Content-Encoding value alone would pass it: every
// coding but identity, in any field, any list position and any case, is
// refused with 40009 before a byte is decoded, and the process's peak RSS
// does not move.
//
// Not parallel: it measures this process's peak RSS, which parallel tests
// would move too.
func TestCompressionBomb(t *testing.T) {
	g := newGateway(t, gatewayOptions{})
	addr := g.serve(t)
	bomb := gzipZeros(t, 100<<20)
	const plain = `{"id":960,"name":"plain"}`
	refused := errorBody(40009, "Content-Encoding is not supported; send the body uncompressed")
	cases := []struct {
		name     string
		encoding []string // one Content-Encoding field each
		body     string
		status   int
		want     string
	}{
		{"identity field then gzip field", []string{"identity", "gzip"}, bomb, 400, refused},
		{"identity, gzip in one field", []string{"identity, gzip"}, bomb, 400, refused},
		{"gzip", []string{"gzip"}, bomb, 400, refused},
		{"GZIP upper case", []string{"identity", "GZIP"}, bomb, 400, refused},
		{"x-gzip", []string{"Identity", "x-gzip"}, bomb, 400, refused},
		{"gzip, identity", []string{"gzip, identity"}, bomb, 400, refused},
		{"spaces and empty list elements", []string{" identity , , gzip "}, bomb, 400, refused},
		{"br after identity", []string{"identity", "br"}, plain, 400, refused},
		{"deflate after identity", []string{"identity,deflate"}, plain, 400, refused},
		{"zstd after identity", []string{"identity", "zstd"}, plain, 400, refused},
		{"compress", []string{"compress"}, plain, 400, refused},
		{"unknown coding", []string{"identity", "x-unknown"}, plain, 400, refused},
		{"identity is the absence of a coding", []string{"identity"}, plain, 200, `{"name":"plain"}`},
		{"IDENTITY twice", []string{"IDENTITY", "identity, identity"}, `{"id":961,"name":"plain"}`, 200, `{"name":"plain"}`},
	}
	clearPeakRSS(t)
	before := procStatusKB(t, "VmHWM")
	var bombTook time.Duration
	for _, c := range cases {
		raw := "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writerToken + "\r\nContent-Type: application/json\r\n"
		for _, e := range c.encoding {
			raw += "Content-Encoding: " + e + "\r\n"
		}
		raw += "Content-Length: " + itoa(len(c.body)) + "\r\n\r\n" + c.body
		start := time.Now()
		status, got := rawRequest(t, addr, raw)
		if took := time.Since(start); c.body == bomb && took > bombTook {
			bombTook = took
		}
		if status != c.status || got != c.want {
			t.Errorf("%s: got %d %.200q, want %d %s", c.name, status, got, c.status, c.want)
		}
	}
	after := procStatusKB(t, "VmHWM")
	t.Logf("bomb of %d bytes: slowest answer %v; peak RSS %d KiB before, %d KiB after", len(bomb), bombTook, before, after)
	// The bomb decoded would be 100 MiB at least; the raw bodies, their
	// buffers and the response are well under a tenth of that.
	if grew := after - before; grew > 10<<10 {
		t.Fatalf("peak RSS grew by %d KiB while answering the bombs", grew)
	}
}

// gzipZeros is a gzip stream of n zero bytes.
func gzipZeros(t *testing.T, n int) string {
	t.Helper()
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for ; n > 0; n -= len(zeros) {
		if _, err := w.Write(zeros[:min(n, len(zeros))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// clearPeakRSS resets this process's VmHWM to its current RSS (Linux 4.0+),
// so that a later VmHWM is the peak of what ran in between.
func clearPeakRSS(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak RSS: %v", err)
	}
}

// procStatusKB reads one "Name: N kB" line of /proc/self/status.
func procStatusKB(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", name)
	return 0
}

package http_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/plantgate/plantgate/host"
	gatehttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// shadowSeen collects shadow decisions.
type shadowSeen struct {
	mu   sync.Mutex
	seen []wasm.ShadowDecision
	drop int
}

func (s *shadowSeen) Shadow(d wasm.ShadowDecision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, d)
}

func (s *shadowSeen) ShadowDropped(string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop++
}

func (s *shadowSeen) count() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen), s.drop
}

// TestShadowSeesItsOwnCopy serves requests through Fiber's real stack while
// a deny-everything shadow judges each one after its answer: every answer
// is the live chain's, and each shadow decision carries its own request's
// input, intact, although the HTTP layer reuses its buffers for the next
// requests (under -race, a shadow reading borrowed bytes is a data race).
func TestShadowSeesItsOwnCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	st, err := redis.Open(ctx, "redis://"+mr.Addr(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutToken(ctx, host.Token{Digest: sha256.Sum256([]byte(writerToken)), Name: "writer", Scopes: host.AllScopes(), Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyFile(t, filepath.Join(bundledDir, "10-bearer-auth.wasm"), filepath.Join(dir, "10-bearer-auth.wasm"))
	copyFile(t, filepath.Join(bundledDir, "20-plant-rules.wasm"), filepath.Join(dir, "20-plant-rules.wasm"))
	copyFile(t, filepath.Join(moduleRoot, "testdata", "abi", "deny.wasm"), filepath.Join(dir, "20-plant-rules.shadow.wasm"))
	if err := os.WriteFile(filepath.Join(dir, "20-plant-rules.shadow.json"), []byte(`{"limits": {"timeout_ms": 1000}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	seen := &shadowSeen{}
	chain, err := wasm.Load(ctx, wasm.Dir(dir), wasm.Options{CacheDir: cacheDir, Tokens: st, KV: st, Shadows: seen,
		Limits: wasm.Limits{Instances: 2, Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close(ctx)
	srv, err := gatehttp.New(gatehttp.Config{Store: st, Policy: chain, RequestTimeout: 2 * time.Second, CursorKey: st.CursorKey})
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{t: t, srv: srv}
	const n = 20
	for i := range n {
		if r := g.post(fmt.Sprintf(`{"id":%d,"name":"plant-%02d"}`, i+1, i)); r.status != 200 {
			t.Fatalf("plant %d: %d %s, want the live chain's 200", i, r.status, r.body)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, dropped := seen.count()
		if got+dropped == 2*n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d shadow decisions and %d dropped, want %d in all", got, dropped, 2*n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	for _, d := range seen.seen {
		if d.Outcome != wasm.ShadowWouldDeny || d.Principal != "writer" {
			t.Errorf("decision %+v", d)
		}
		switch d.Phase {
		case "authorize":
			if d.Method != "POST" || d.Path != "/plants" || d.Route != "POST /plants" {
				t.Errorf("authorize input %+v", d)
			}
		case "validate":
			if d.Plant == nil || d.Plant.Name != fmt.Sprintf("plant-%02d", d.Plant.ID-1) {
				t.Errorf("validate input %+v", d.Plant)
			}
		}
	}
}

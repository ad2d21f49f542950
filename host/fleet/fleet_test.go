package fleet

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "abi", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publish stores the modules and publishes them as the next version.
func publish(t *testing.T, st *redis.Store, files map[string][]byte) uint64 {
	t.Helper()
	ctx := context.Background()
	var entries []redis.PluginEntry
	for _, name := range []string{"10-a.wasm", "20-b.wasm", "30-c.wasm"} {
		mod, ok := files[name]
		if !ok {
			continue
		}
		d, err := st.PutPluginModule(ctx, mod)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, redis.PluginEntry{File: name, Module: d})
	}
	m, err := st.PluginManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.PublishPlugins(ctx, m, redis.PluginManifest{Plugins: entries})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMemberFollowsAndReports: a Member loads each new version, keeps the
// old chain when one fails, and Read tells converged from lagging.
func TestMemberFollowsAndReports(t *testing.T) {
	mr := miniredis.RunT(t)
	st, err := redis.Open(context.Background(), "redis://"+mr.Addr(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	publish(t, st, map[string][]byte{"10-a.wasm": fixture(t, "principal")})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := wasm.NewReloader(ctx, StoreSource{st}, wasm.Options{Logger: log, Limits: wasm.Limits{Instances: 1}}, wasm.ReloadOptions{RequireAuthorize: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	m := NewMember(st, r, "127.0.0.1:1", log)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()

	s := waitRead(t, st, "converged on version 1", func(s Status) bool { return s.Converged })
	if len(s.Gateways) != 1 || s.Gateways[0].ID != m.ID() || s.Version != 1 || s.Gateways[0].Digest != s.Digest {
		t.Fatalf("status %+v", s)
	}

	v := publish(t, st, map[string][]byte{"10-a.wasm": fixture(t, "principal"), "20-b.wasm": fixture(t, "deny")})
	s = waitRead(t, st, "converged on version 2", func(s Status) bool { return s.Converged && s.Version == v })
	if got := len(r.Plugins()); got != 2 {
		t.Fatalf("chain of %d plugins after version 2", got)
	}

	// A module that traps at instantiation: refused here, version 2 kept.
	publish(t, st, map[string][]byte{"10-a.wasm": fixture(t, "principal"), "30-c.wasm": fixture(t, "inittrap")})
	s = waitRead(t, st, "refused", func(s Status) bool { return len(s.Gateways) == 1 && s.Gateways[0].State == StateRefused })
	g := s.Gateways[0]
	if s.Converged || g.Converged || g.Version != 2 || g.Refused != 3 || !strings.HasPrefix(g.Lag, "refused version 3, serves version 2: plugin 30-c.wasm:") {
		t.Fatalf("status %+v", s)
	}
	if got := len(r.Plugins()); got != 2 {
		t.Fatalf("chain of %d plugins after the refusal", got)
	}

	cancel()
	<-done
	if s, err := Read(context.Background(), st); err != nil || len(s.Gateways) != 0 || s.Converged {
		t.Fatalf("after leaving: %+v %v", s, err)
	}
}

func waitRead(t *testing.T, st *redis.Store, what string, cond func(Status) bool) Status {
	t.Helper()
	var s Status
	eventually(t, what, func() bool {
		var err error
		s, err = Read(context.Background(), st)
		return err == nil && cond(s)
	})
	return s
}

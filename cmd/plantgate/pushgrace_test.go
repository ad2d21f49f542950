package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestPushExpiresReplacedModule: pushing another module under a file name
// the chain has replaces its entry; the module it replaced stays while its
// chain is the one a rollback returns to, and expires ModuleGrace after the
// next push, while the new one stays. The CLI edits a copy of the chain it
// read: edited in place, the chain it hands PublishPlugins as the one
// replaced would already name the new module, and the old one would never
// expire.
func TestPushExpiresReplacedModule(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	url := srv.URL()
	first, second := fixtureAs(t, "allow", "10-auth.wasm"), fixtureAs(t, "deny", "10-auth.wasm")
	fleetCLI(t, 0, "plugin", "push", first, "--redis-url", url)
	fleetCLI(t, 0, "plugin", "push", second, "--redis-url", url)

	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer raw.Close()
	ttl := func(file string) time.Duration {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		left, err := raw.PTTL(context.Background(), "plantgate:{plugins}:module:"+hex.EncodeToString(sum[:])).Result()
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	if left := ttl(first); left != -1 {
		t.Fatalf("the replaced module, the rollback target's, has TTL %v, want none (-1)", left)
	}
	fleetCLI(t, 0, "plugin", "push", fixtureAs(t, "echo", "20-other.wasm"), "--redis-url", url)
	if left := ttl(first); left <= redis.ModuleGrace-time.Minute || left > redis.ModuleGrace {
		t.Fatalf("the replaced module's TTL is %v, want about %v", left, redis.ModuleGrace)
	}
	if left := ttl(second); left != -1 {
		t.Fatalf("the module in the chain has TTL %v, want none (-1)", left)
	}
}

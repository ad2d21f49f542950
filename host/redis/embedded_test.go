package redis

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestEmbeddedIsNobodyElses: the embedded store listens on loopback, where
// any local process can connect; without the random password it gets
// NOAUTH for every command, so it can neither read nor forge a token, while
// the gateway's own client works.
func TestEmbeddedIsNobodyElses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, closeFn, err := Embedded(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if s.Addr() == "" || !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr = %q, want the loopback address it listens on", s.Addr())
	}
	if created, err := s.CreatePlant(ctx, plant(1, "Fern")); !created || err != nil {
		t.Fatalf("the store's own client: created=%v err=%v", created, err)
	}

	stranger := goredis.NewClient(&goredis.Options{Addr: s.Addr(), Protocol: 2, MaxRetries: -1})
	defer stranger.Close()
	for _, cmd := range [][]any{
		{"ping"},
		{"keys", "*"},
		{"hset", "plantgate:{tokens}:token:0000000000000000", "name", "forged"},
	} {
		err := stranger.Do(ctx, cmd...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "NOAUTH ") {
			t.Errorf("%v without the password: %v, want NOAUTH", cmd, err)
		}
	}
	for _, guess := range []string{"", "plantgate", "password"} {
		err := stranger.Do(ctx, "auth", guess).Err()
		if err == nil {
			t.Errorf("AUTH %q accepted", guess)
		}
	}
}

package redis

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// The plugins' KV (host.KV). A key is
//
//	<prefix>kv:<len(ns)>:<ns>:{<key>}           a value
//	<prefix>kv:<len(ns)>:<ns>:{<key>}:w<window>  a window's counter
//	<prefix>kv:<len(ns)>:<ns>:{<key>}:s<slotMs>  a sliding window's slot counters (a hash)
//
// The namespace's length makes the split between namespace and key
// unambiguous whatever bytes the key holds, and the key is its own hash
// tag, so a plugin's keys spread over a Cluster while a key and its window
// counters share a slot. (A key holding '}' ends its tag early: still one
// slot per key, as every command here touches one key.)

var (
	//go:embed kv_lease.lua
	kvLeaseLua    string
	kvLeaseScript = goredis.NewScript(kvLeaseLua)

	//go:embed kv_lease_sliding.lua
	kvLeaseSlidingLua    string
	kvLeaseSlidingScript = goredis.NewScript(kvLeaseSlidingLua)

	//go:embed kv_incr.lua
	kvIncrLua    string
	kvIncrScript = goredis.NewScript(kvIncrLua)
)

var _ host.KV = (*Store)(nil)

func (s *Store) kvKey(ns, key string) string {
	return s.opts.KeyPrefix + "kv:" + strconv.Itoa(len(ns)) + ":" + ns + ":{" + key + "}"
}

func (s *Store) kvWindowKey(ns, key string, window int64) string {
	return s.kvKey(ns, key) + ":w" + strconv.FormatInt(window, 10)
}

// windowTTL keeps a window's counter a window past its end, so a gateway
// whose clock is a little behind still finds it.
func windowTTL(size time.Duration) int64 { return 2 * size.Milliseconds() }

// KVGet implements host.KV.
func (s *Store) KVGet(ctx context.Context, ns, key string) ([]byte, bool, error) {
	v, err := s.client.Get(ctx, s.kvKey(ns, key)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, storeError("kv get", err)
	}
	return v, true, nil
}

// KVSet implements host.KV.
func (s *Store) KVSet(ctx context.Context, ns, key string, value []byte, ttl time.Duration) error {
	if err := s.client.Set(ctx, s.kvKey(ns, key), value, ttl).Err(); err != nil {
		return storeError("kv set", err)
	}
	return nil
}

// KVDelete implements host.KV.
func (s *Store) KVDelete(ctx context.Context, ns, key string) (bool, error) {
	n, err := s.client.Del(ctx, s.kvKey(ns, key)).Result()
	if err != nil {
		return false, storeError("kv delete", err)
	}
	return n > 0, nil
}

// KVIncr implements host.KV in one script call on the window's counter.
func (s *Store) KVIncr(ctx context.Context, ns, key string, delta, window int64, size time.Duration) (int64, error) {
	n, err := kvIncrScript.Run(ctx, s.client, []string{s.kvWindowKey(ns, key, window)}, delta, windowTTL(size)).Int64()
	if err != nil {
		return 0, storeError("kv incr", err)
	}
	return n, nil
}

// KVLease implements host.KV in one script call on the window's counter.
func (s *Store) KVLease(ctx context.Context, ns, key string, limit, share, window int64, size time.Duration) (granted, taken int64, err error) {
	r, err := kvLeaseScript.Run(ctx, s.client, []string{s.kvWindowKey(ns, key, window)}, limit, share, windowTTL(size)).Int64Slice()
	if err == nil && len(r) != 2 {
		err = errors.New("lease script answered " + strconv.Itoa(len(r)) + " values, want 2")
	}
	if err != nil {
		return 0, 0, storeError("kv lease", err)
	}
	return r[0], r[1], nil
}

// KVLeaseSliding implements host.KV in one script call on the key's hash of
// slot counters.
func (s *Store) KVLeaseSliding(ctx context.Context, ns, key string, limit, share, slot, slots int64, slotSize time.Duration) (granted, taken, oldest int64, err error) {
	slotMs := slotSize.Milliseconds()
	hash := s.kvKey(ns, key) + ":s" + strconv.FormatInt(slotMs, 10)
	// Kept a slot past the last one that can still count.
	ttl := (slots + 2) * slotMs
	r, err := kvLeaseSlidingScript.Run(ctx, s.client, []string{hash}, limit, share, slot, slots, ttl).Int64Slice()
	if err == nil && len(r) != 3 {
		err = errors.New("sliding lease script answered " + strconv.Itoa(len(r)) + " values, want 3")
	}
	if err != nil {
		return 0, 0, 0, storeError("kv lease sliding", err)
	}
	return r[0], r[1], r[2], nil
}

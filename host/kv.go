package host

import (
	"context"
	"time"
)

// KV is the store behind the plugins' KV host functions. ns is the plugin's
// namespace, chosen by the host and never by the plugin, so that one plugin
// cannot reach another's keys; every key of a namespace is apart from every
// key of another. Errors are store failures: a plugin sees them as "store
// unavailable".
type KV interface {
	// KVGet returns key's value, or found=false when it has none.
	KVGet(ctx context.Context, ns, key string) (value []byte, found bool, err error)
	// KVSet stores value under key for ttl (0: until deleted).
	KVSet(ctx context.Context, ns, key string, value []byte, ttl time.Duration) error
	// KVDelete deletes key and reports whether it had a value.
	KVDelete(ctx context.Context, ns, key string) (bool, error)
	// KVIncr adds delta to key's counter for the window numbered window
	// (windows of length size) and returns the counter after the addition.
	KVIncr(ctx context.Context, ns, key string, delta int64, window int64, size time.Duration) (int64, error)
	// KVLease takes up to a share of what is left of key's budget of limit
	// in the window numbered window (of length size), atomically across
	// every gateway: it grants max(1, left/share) units when any are left.
	// It returns the units granted (0 when the budget is spent) and the
	// units taken in the window after the grant.
	KVLease(ctx context.Context, ns, key string, limit, share, window int64, size time.Duration) (granted, taken int64, err error)
	// KVLeaseSliding is KVLease over a sliding window of slots of length
	// slotSize: the budget counts the units granted in slot number slot and
	// in the slots slots before it (and any after it, granted by a gateway
	// whose clock is ahead), and grants into slot. It also returns the
	// number of the oldest slot holding a counted unit (slot when none), so
	// the caller can tell when a unit frees.
	KVLeaseSliding(ctx context.Context, ns, key string, limit, share, slot, slots int64, slotSize time.Duration) (granted, taken, oldest int64, err error)
}

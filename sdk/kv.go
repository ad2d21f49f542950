package sdk

import (
	"errors"
	"time"
	"unsafe"

	"github.com/plantgate/plantgate/sdk/abi"
)

// The plugin's key-value store: a few functions over the KV host functions
// (abi.ImportKVGet and its siblings). The host keeps the keys in the
// gateway's store, so on Redis every gateway of a fleet sees the same
// values, and in a namespace of the plugin's own: a plugin never sees
// another plugin's keys, and never names its namespace.
//
// Keys are 1 to abi.MaxKVKey bytes, values at most abi.MaxKVValue bytes. A
// phase call may make abi.KVBudget KV calls; more answer [ErrKVBudget].
// Every call but [Take] costs a store round trip, bounded by the plugin's
// timeout.
//
// A store failure is [ErrUnavailable]: fail closed, with a 503 the client
// may retry,
//
//	n, err := sdk.Incr("calls:"+r.Caller.Name, 1, time.Minute)
//	if err != nil {
//		return sdk.Unavailable("quota store unavailable")
//	}
//	if n > 1000 {
//		return sdk.Deny(sdk.CodeTooManyRequests, "1000 calls a minute")
//	}

// Errors of the KV functions, besides [ErrUnavailable].
var (
	// ErrNotFound: [Get] found no value for the key.
	ErrNotFound = errors.New("sdk: key not found")
	// ErrKVBudget: the call already made abi.KVBudget KV calls.
	ErrKVBudget = errors.New("sdk: KV budget of this call spent")
	// ErrKVArgument: a key, value, TTL, window or limit is out of range.
	ErrKVArgument = errors.New("sdk: KV argument out of range")
	errKVResult   = errors.New("sdk: KV: the host answered outside the ABI")
)

func kvError(n int64) error {
	switch n {
	case abi.KVNotFound:
		return ErrNotFound
	case abi.KVUnavailable:
		return ErrUnavailable
	case abi.KVBadArgument:
		return ErrKVArgument
	case abi.KVOverBudget:
		return ErrKVBudget
	}
	return errKVResult
}

// kvValue receives values; it grows when one does not fit.
var kvValue = make([]byte, 256)

// Get returns key's value. It aliases an SDK buffer, valid until the next
// Get or until the handler returns; copy it to keep it. [ErrNotFound] when
// the key has none.
//
//	v, err := sdk.Get("allow:" + r.Caller.Name)
func Get(key string) ([]byte, error) {
	n := int64(kvGet(key, kvValue))
	if n > int64(len(kvValue)) && n <= abi.MaxKVValue {
		kvValue = make([]byte, n)
		n = int64(kvGet(key, kvValue))
	}
	if n < 0 {
		return nil, kvError(n)
	}
	if n > int64(len(kvValue)) {
		return nil, errKVResult
	}
	return kvValue[:n], nil
}

// Set stores value under key for ttl (0: until deleted; at most a day,
// counted in milliseconds).
func Set(key string, value []byte, ttl time.Duration) error {
	if n := kvSet(key, value, ttl.Milliseconds()); n != 0 {
		return kvError(int64(n))
	}
	return nil
}

// Delete deletes key and reports whether it had a value.
func Delete(key string) (bool, error) {
	n := kvDelete(key)
	if n < 0 || n > 1 {
		return false, kvError(int64(n))
	}
	return n == 1, nil
}

// Incr adds delta to key's counter in the current fixed window (windows
// of length window, at most a day, aligned to the Unix epoch so every
// gateway agrees, as [TakeFixed]'s) and returns the counter after the addition, atomically across the
// fleet. Each call is a store round trip: for a per-request limit use
// [Take].
func Incr(key string, delta int64, window time.Duration) (int64, error) {
	n := kvIncr(key, delta, window.Milliseconds())
	if n < 0 {
		return 0, kvError(n)
	}
	return n, nil
}

// Taken is what [Take] answers.
type Taken struct {
	// Allowed reports whether a unit was taken: false once the window's
	// budget is spent.
	Allowed bool
	// Remaining estimates the units left in the window, fleet-wide.
	Remaining int64
	// Reset is how long until more budget is available: until the oldest
	// unit counted now frees ([Take]), or until the window ends
	// ([TakeFixed]).
	Reset time.Duration
}

// Take takes one unit of key's budget of limit per sliding window of
// length window (at most a day), shared by every gateway of the fleet: in
// no span of window does the fleet allow more than limit, whatever the
// span's start. The host leases parts of the budget from the store and
// spends them locally, so most calls cost no round trip; it may allow a
// little less than limit, never more. A unit taken frees between window
// and window + window/20 after it was taken; Taken.Reset says when the
// next one frees. See docs/abi.md#windows-fixed-and-sliding.
//
//	t, err := sdk.Take("token:"+r.Caller.Name, 100, time.Second)
//	if err != nil {
//		return sdk.Unavailable("rate limit store unavailable")
//	}
//	if !t.Allowed {
//		return sdk.Deny(sdk.CodeTooManyRequests, "rate limit reached")
//	}
//
// Use one limit and window per key: the budget is kept per key and window.
func Take(key string, limit int64, window time.Duration) (Taken, error) {
	return taken(kvTakeSliding(key, limit, window.Milliseconds()))
}

// TakeFixed is [Take] over fixed windows aligned to the Unix epoch (a
// minute window runs from :00 to :59): no window allows more than limit,
// but a burst at the end of one window and another at the start of the
// next both pass, up to 2×limit in a short span. Taken.Reset is the time
// until the window ends. Take is the safer default; TakeFixed counts the
// way a quota per calendar minute, hour or day does.
func TakeFixed(key string, limit int64, window time.Duration) (Taken, error) {
	return taken(kvTake(key, limit, window.Milliseconds()))
}

func taken(n int64) (Taken, error) {
	if n < 0 {
		return Taken{}, kvError(n)
	}
	denied, remaining, reset := abi.UnpackTake(n)
	return Taken{Allowed: !denied, Remaining: remaining, Reset: time.Duration(reset) * time.Millisecond}, nil
}

// stringPtr is s's address for a host call; "" may have none.
func stringPtr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

// The plugin's key-value store and counters, kept by the gateway (on Redis
// shared by the fleet), in a namespace of the plugin's own. Keys are 1 to
// 256 bytes (UTF-8), values at most 4096 bytes; a phase call may make 8 KV
// calls, later ones answer KVError.OVER_BUDGET. Every call but kvTake costs
// a store round trip. On KVError.UNAVAILABLE fail closed:
// `return unavailable("quota store unavailable")`.

import { hostKVGet, hostKVSet, hostKVDelete, hostKVIncr, hostKVTake, hostKVTakeSliding } from "./host";
import { MAX_KV_KEY, MAX_KV_VALUE } from "./abi";
import { Utf8, writeUtf8, full } from "./utf8";

/** KV results below zero. */
export enum KVError {
  OK = 0,
  /** kvGet: the key has no value. */
  NOT_FOUND = -1,
  /** The store could not be asked: deny with a 503. */
  UNAVAILABLE = -2,
  /** A key, value, TTL, window or limit is out of range. */
  BAD_ARGUMENT = -3,
  /** The call already made 8 KV calls. */
  OVER_BUDGET = -4,
  /** The host answered outside the ABI. */
  BROKEN = -5,
}

const keyBuf = memory.data(MAX_KV_KEY);
const valueBuf = memory.data(MAX_KV_VALUE);
const scratchBuf = memory.data(MAX_KV_VALUE);
const scratchView = new Utf8();

// key encodes k into keyBuf and returns its length, or -1 when it is
// empty or over MAX_KV_KEY bytes.
function key(k: string): i32 {
  const n = writeUtf8(k, keyBuf, MAX_KV_KEY);
  if (full || n == 0) return -1;
  return n;
}

function kvError(n: i64): KVError {
  if (n >= -4 && n <= -1) return <KVError>(<i32>n);
  return KVError.BROKEN;
}

/** What kvGet answers: err, and when it is OK the value. */
@final
export class Got {
  err: KVError = KVError.OK;
  /** The value; a view of a kit buffer valid until the next kvGet. */
  value: Utf8 = new Utf8();
}

const got = new Got();

/** kvGet reads key's value. err is NOT_FOUND when it has none. */
export function kvGet(k: string): Got {
  got.value.set(valueBuf, 0);
  const kn = key(k);
  if (kn < 0) {
    got.err = KVError.BAD_ARGUMENT;
    return got;
  }
  const n = hostKVGet(keyBuf, <usize>kn, valueBuf, <usize>MAX_KV_VALUE);
  if (n < 0) {
    got.err = kvError(n);
    return got;
  }
  if (n > MAX_KV_VALUE) {
    got.err = KVError.BROKEN;
    return got;
  }
  got.err = KVError.OK;
  got.value.set(valueBuf, n);
  return got;
}

/** kvSet stores value (as UTF-8) under key for ttlMs milliseconds (0:
 * until deleted; at most a day). */
export function kvSet(k: string, value: string, ttlMs: i64 = 0): KVError {
  const n = writeUtf8(value, scratchBuf, MAX_KV_VALUE);
  if (full) return KVError.BAD_ARGUMENT;
  return kvSetBytes(k, scratchView.set(scratchBuf, n), ttlMs);
}


/** kvSetBytes stores the bytes of a view under key. */
export function kvSetBytes(k: string, value: Utf8, ttlMs: i64 = 0): KVError {
  const kn = key(k);
  if (kn < 0 || value.len > MAX_KV_VALUE) return KVError.BAD_ARGUMENT;
  const r = hostKVSet(keyBuf, <usize>kn, value.ptr, <usize>value.len, ttlMs);
  return r == 0 ? KVError.OK : kvError(r);
}

/** kvDelete deletes key: 1 when it had a value, 0 when not, else a
 * (negative) KVError. */
export function kvDelete(k: string): i32 {
  const kn = key(k);
  if (kn < 0) return KVError.BAD_ARGUMENT;
  const r = hostKVDelete(keyBuf, <usize>kn);
  if (r == 0 || r == 1) return r;
  return kvError(r);
}

/** kvIncr adds delta to key's counter in the current window of windowMs
 * milliseconds (aligned to the Unix epoch, at most a day) and returns the
 * counter after the addition, fleet-wide; below zero, a KVError. For a
 * per-request limit use kvTake. */
export function kvIncr(k: string, delta: i64, windowMs: i64): i64 {
  const kn = key(k);
  if (kn < 0) return KVError.BAD_ARGUMENT;
  const r = hostKVIncr(keyBuf, <usize>kn, delta, windowMs);
  return r < 0 ? <i64>kvError(r) : r;
}

/** What kvTake answers. */
@final
export class Taken {
  err: KVError = KVError.OK;
  /** A unit was taken; false once the window's budget is spent. */
  allowed: bool = false;
  /** An estimate of the units left in the window, fleet-wide. */
  remaining: i64 = 0;
  /** Milliseconds until the window ends and the budget refills. */
  resetMs: i64 = 0;
}

const taken = new Taken();

/** kvTake takes one unit of key's budget of limit per sliding window of
 * windowMs milliseconds, shared by the fleet: never more than limit in any
 * span of windowMs. Most calls cost no store round trip. It is the Go SDK's
 * sdk.Take (plantgate.kv_take_sliding); kvTakeFixed is sdk.TakeFixed.
 *
 *     const t = kvTake("token:" + name, 100, 1000);
 *     if (t.err != KVError.OK) return unavailable("rate limit store unavailable");
 *     if (!t.allowed) return tooManyRequests("rate limit reached").header("Retry-After", "1");
 *
 * resetMs is how long until a unit frees. Use one limit and window per key.
 */
export function kvTake(k: string, limit: i64, windowMs: i64): Taken {
  return takeWith(k, limit, windowMs, true);
}

/** kvTakeFixed is kvTake over fixed windows aligned to the Unix epoch
 * (plantgate.kv_take): a burst at the end of one window and another at the
 * start of the next pass together; resetMs is until the window ends. */
export function kvTakeFixed(k: string, limit: i64, windowMs: i64): Taken {
  return takeWith(k, limit, windowMs, false);
}

function takeWith(k: string, limit: i64, windowMs: i64, sliding: bool): Taken {
  taken.allowed = false;
  taken.remaining = 0;
  taken.resetMs = 0;
  const kn = key(k);
  if (kn < 0) {
    taken.err = KVError.BAD_ARGUMENT;
    return taken;
  }
  const r = sliding
    ? hostKVTakeSliding(keyBuf, <usize>kn, limit, windowMs)
    : hostKVTake(keyBuf, <usize>kn, limit, windowMs);
  if (r < 0) {
    taken.err = kvError(r);
    return taken;
  }
  taken.err = KVError.OK;
  taken.allowed = (r & (1 << 62)) == 0;
  taken.remaining = (r >> 32) & ((1 << 30) - 1);
  taken.resetMs = r & 0xffffffff;
  return taken;
}

// Token lookup: the host's token store, by the SHA-256 digest of a token.

import { hostTokenLookup, wasiClockTimeGet } from "./host";
import { DIGEST_SIZE, LOOKUP_NOT_FOUND, LOOKUP_UNAVAILABLE } from "./abi";
import { Utf8 } from "./utf8";
import { hasScope } from "./request";

/** The outcome of lookupToken. */
export enum TokenStatus {
  /** The token exists: check revoked and expires, and compare digest. */
  FOUND = 0,
  /** No token has this digest: deny with a 401. */
  NOT_FOUND = -1,
  /** The store could not be asked: deny with a 503 (unavailable()). */
  UNAVAILABLE = -2,
  /** The host refused the digest (not 32 bytes) or answered outside the
   * ABI: fail closed with a fault. */
  ERROR = -3,
}

/** A token's record. Its views alias a kit buffer, valid until the next
 * lookupToken or until the handler returns. */
@final
export class Token {
  status: TokenStatus = TokenStatus.ERROR;
  /** SHA-256 of the token (32 bytes): compare it with the digest you
   * looked up before trusting the record. */
  digest: Utf8 = new Utf8();
  name: Utf8 = new Utf8();
  /** Space-separated, "plants:read plants:write". */
  scopes: Utf8 = new Utf8();
  /** Unix milliseconds; 0 when unknown. */
  created: i64 = 0;
  /** Unix milliseconds; 0 when it never expires. */
  expires: i64 = 0;
  revoked: bool = false;

  /** hasScope reports whether scope is one of the token's scopes. */
  hasScope(scope: string): bool {
    return hasScope(this.scopes.ptr, this.scopes.len, scope);
  }

  /** expired reports whether the token has an expiry and nowMs (Unix
   * milliseconds, see now()) is at or past it. */
  expired(nowMs: i64): bool {
    return this.expires != 0 && nowMs >= this.expires;
  }

  /** valid reports whether the lookup found the token, it is not revoked
   * and not expired at nowMs. */
  valid(nowMs: i64): bool {
    return this.status == TokenStatus.FOUND && !this.revoked && !this.expired(nowMs);
  }
}

/** The record of the last lookupToken. */
export const token = new Token();

const MAX_RECORD: i32 = 1 << 20;
let recordCap: i32 = 512;
let record: usize = heap.alloc(512);

/** lookupToken asks the host's token store for the token whose SHA-256
 * digest is digest (Request.digest). It returns the kit's one Token, with
 * status saying whether it was found. It does not allocate unless a record
 * is larger than any seen before. */
export function lookupToken(digest: Utf8): Token {
  const t = token;
  t.status = TokenStatus.ERROR;
  if (digest.len != DIGEST_SIZE) return t;
  let n = hostTokenLookup(digest.ptr, <usize>digest.len, record, <usize>recordCap);
  if (n > recordCap && n <= MAX_RECORD) {
    heap.free(record);
    record = heap.alloc(<usize>n);
    recordCap = n;
    n = hostTokenLookup(digest.ptr, <usize>digest.len, record, <usize>recordCap);
  }
  if (n == LOOKUP_NOT_FOUND) {
    t.status = TokenStatus.NOT_FOUND;
    return t;
  }
  if (n == LOOKUP_UNAVAILABLE) {
    t.status = TokenStatus.UNAVAILABLE;
    return t;
  }
  if (n < 52 || n > recordCap) return t;
  const r = record;
  const end = r + <usize>n;
  t.created = load<i64>(r);
  t.expires = load<i64>(r, 8);
  t.revoked = (load<u32>(r, 16) & 1) != 0;
  t.digest.set(r + 20, DIGEST_SIZE);
  let p = r + 52;
  const nameLen = load<u32>(p);
  if (<u64>nameLen + 4 > <u64>(end - p)) return t;
  t.name.set(p + 4, <i32>nameLen);
  p += 4 + <usize>nameLen;
  if (end - p < 4) return t;
  const scopesLen = load<u32>(p);
  if (<u64>scopesLen + 4 > <u64>(end - p)) return t;
  t.scopes.set(p + 4, <i32>scopesLen);
  t.status = TokenStatus.FOUND;
  return t;
}

/** now returns the wall-clock time in Unix milliseconds (WASI's realtime
 * clock, which the host provides). */
export function now(): i64 {
  const out = memory.data(8, 8);
  if (wasiClockTimeGet(0, 1_000_000, out) != 0) return 0;
  return load<i64>(out) / 1_000_000;
}

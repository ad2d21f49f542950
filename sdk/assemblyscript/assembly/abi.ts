// The wire contract with the Plantgate host, as constants. They mirror the
// Go package sdk/abi (the host's own definition); docs/abi.md describes
// them for every language. A Go test (sdk/assemblyscript/kit_test.go) checks
// that every value here equals sdk/abi's, so the two cannot drift.

/** The ABI version this kit speaks; plantgate_abi_version returns it. */
export const ABI_VERSION: i32 = 2;

/** Phase bits of plantgate_phases. */
export const PHASE_AUTHORIZE: i32 = 1;
export const PHASE_VALIDATE: i32 = 2;

/** Verdicts of a decision record. */
export const VERDICT_ALLOW: u8 = 0;
export const VERDICT_DENY: u8 = 1;
export const VERDICT_FAULT: u8 = 2;

/** Decision record: the flag of a record that carries response headers. */
export const DECISION_HEADERS: u8 = 1;
/** Bytes of a decision record before its header block and text. */
export const DECISION_HEADER: i32 = 8;
/** The largest header block, text (deny message, principal, fault reason)
 * and decision record, in bytes. */
export const MAX_HEADER_BLOCK: i32 = 2048;
export const MAX_TEXT: i32 = 1024;
export const MAX_DECISION: i32 = DECISION_HEADER + 4 + MAX_HEADER_BLOCK + MAX_TEXT;
/** The longest log line the host keeps; longer lines are cut. */
export const MAX_LOG: i32 = 4096;
/** The longest response header value. */
export const MAX_HEADER_VALUE: i32 = 1024;

/** Plugin deny codes: hundreds are the HTTP status, last two digits 50-99. */
export const PLUGIN_CODE_MIN: i32 = 50;

/** Log levels, log/slog's numbering. */
export const LOG_DEBUG: i32 = -4;
export const LOG_INFO: i32 = 0;
export const LOG_WARN: i32 = 4;
export const LOG_ERROR: i32 = 8;

/** SHA-256 digest size: the key of a token lookup. */
export const DIGEST_SIZE: i32 = 32;

/** token_lookup results below zero. */
export const LOOKUP_NOT_FOUND: i32 = -1;
export const LOOKUP_UNAVAILABLE: i32 = -2;
export const LOOKUP_BAD_ARGUMENT: i32 = -3;

/** KV bounds. */
export const MAX_KV_KEY: i32 = 256;
export const MAX_KV_VALUE: i32 = 4096;
export const KV_BUDGET: i32 = 8;
export const MAX_KV_TTL: i64 = 86_400_000;

/** The response headers a decision may carry, canonical form. */
export const RESPONSE_HEADERS: StaticArray<string> = ["Retry-After", "RateLimit", "RateLimit-Policy"];

/** validDenyCode reports whether a plugin may deny with code: status 400,
 * 401, 403, 429 or 503 and last two digits 50-99. */
export function validDenyCode(code: i32): bool {
  const status = code / 100;
  if (status != 400 && status != 401 && status != 403 && status != 429 && status != 503) return false;
  return code % 100 >= PLUGIN_CODE_MIN;
}

/** phaseDenies reports whether a plugin serving phase may deny with code:
 * authorize may not use 400 (it runs before the body is read), validate may
 * not use 401 (the credential was accepted already). */
export function phaseDenies(phase: i32, code: i32): bool {
  if (!validDenyCode(code)) return false;
  if (phase == PHASE_AUTHORIZE) return code / 100 != 400;
  if (phase == PHASE_VALIDATE) return code / 100 != 401;
  return false;
}

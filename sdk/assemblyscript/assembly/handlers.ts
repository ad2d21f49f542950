// Registering a plugin's handlers, and the bodies of the exports the host
// calls (exports.ts). Register handlers in the entry file's top level: it
// runs in the module's start function, before the host asks which phases
// the module serves.

import { Decision, Kind, decision, fault } from "./decision";
import { Request, Plant, parseAuthorize, parseValidate } from "./request";
import { Utf8 } from "./utf8";
import { PHASE_AUTHORIZE, PHASE_VALIDATE } from "./abi";

/** A configure handler gets the sidecar's "config" as JSON bytes and
 * returns "" to accept it, or what is wrong: the host then refuses the
 * plugin and logs the text. The view is valid only during the call. */
export type ConfigureHandler = (config: Utf8) => string;
export type AuthorizeHandler = (r: Request) => Decision;
export type ValidateHandler = (p: Plant) => Decision;

let configureFn: ConfigureHandler | null = null;
let configRequired = false;
let authorizeFn: AuthorizeHandler | null = null;
let validateFn: ValidateHandler | null = null;

/** handleConfigure registers f to receive the plugin's config, once per
 * instance before any request, and only when the sidecar has one: keep
 * defaults in force from the start. Without a handler the plugin accepts
 * only an empty, null or {} config. */
export function handleConfigure(f: ConfigureHandler): void { configureFn = f; }
/** requireConfig makes the plugin refuse to load without a config
 * (plantgate_config_required answers 1), for a plugin with no sensible
 * defaults; plugin check shows it. */
export function requireConfig(): void { configRequired = true; }

/** configIsRequired is what plantgate_config_required answers. */
export function configIsRequired(): i32 { return configRequired ? 1 : 0; }

/** handleAuthorize registers f as the authorize phase (before the body is
 * read). */
export function handleAuthorize(f: AuthorizeHandler): void { authorizeFn = f; }
/** handleValidate registers f as the validate phase (the canonical plant). */
export function handleValidate(f: ValidateHandler): void { validateFn = f; }

/** phases is the plantgate_phases bit set of the registered handlers. */
export function phases(): i32 {
  let b = 0;
  if (authorizeFn != null) b |= PHASE_AUTHORIZE;
  if (validateFn != null) b |= PHASE_VALIDATE;
  return b;
}

/** The request and plant every call refills. */
export const request = new Request();
export const plant = new Plant();
const configView = new Utf8();

export function callConfigure(ptr: usize, len: i32): u64 {
  const f = configureFn;
  configView.set(ptr, len);
  if (f == null) {
    if (emptyConfig(ptr, len)) return 0;
    return fault("the plugin takes no config, got ").utf8(configView).text(': remove "config" from its sidecar, or handle it with handleConfigure').encode(0);
  }
  const e = f(configView);
  if (e.length == 0) return 0;
  return fault(e).encode(0);
}

export function callAuthorize(ptr: usize, len: i32): u64 {
  const f = authorizeFn;
  if (f == null) return fault("sdk: authorize called but the plugin registered no authorize handler").encode(PHASE_AUTHORIZE);
  if (!parseAuthorize(request, ptr, <usize>len)) {
    return fault("sdk: authorize request: message shorter than its layout").encode(PHASE_AUTHORIZE);
  }
  decision.reset(Kind.UNSET, 0); // a handler that returns it without deciding faults
  return f(request).encode(PHASE_AUTHORIZE);
}

export function callValidate(ptr: usize, len: i32): u64 {
  const f = validateFn;
  if (f == null) return fault("sdk: validate called but the plugin registered no validate handler").encode(PHASE_VALIDATE);
  if (!parseValidate(plant, ptr, <usize>len)) {
    return fault("sdk: validate request: message shorter than its layout").encode(PHASE_VALIDATE);
  }
  decision.reset(Kind.UNSET, 0);
  return f(plant).encode(PHASE_VALIDATE);
}

// emptyConfig: only white space, null or {} (with white space inside).
function emptyConfig(ptr: usize, len: i32): bool {
  let s = ptr;
  let e = ptr + <usize>len;
  while (s < e && isJSONSpace(load<u8>(s))) s++;
  while (e > s && isJSONSpace(load<u8>(e - 1))) e--;
  const n = e - s;
  if (n == 0) return true;
  if (n == 4 && load<u32>(s) == 0x6c6c756e) return true; // "null"
  if (load<u8>(s) != 0x7b || load<u8>(e - 1) != 0x7d) return false;
  s++;
  while (s < e - 1 && isJSONSpace(load<u8>(s))) s++;
  return s == e - 1;
}

function isJSONSpace(c: u8): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d;
}

// What the phases see: Request (authorize) and Plant (validate), parsed
// from the host's message in place. Every text field is a Utf8 view of the
// request buffer, valid until the handler returns. The kit keeps one
// Request and one Plant and refills them on every call: no allocation.

import { Utf8, equalString } from "./utf8";
import { DIGEST_SIZE } from "./abi";

/** Who a request is from: a valid token's name and scopes, empty when
 * no token lookup (by this plugin or an earlier one of the chain) found
 * the request's credential valid. */
@final
export class Principal {
  /** The token's name; empty when no principal is established. */
  name: Utf8 = new Utf8();
  /** Space-separated scopes. */
  scopes: Utf8 = new Utf8();

  /** hasScope reports whether scope is one of the scopes. It does not
   * allocate. */
  hasScope(scope: string): bool {
    return hasScope(this.scopes.ptr, this.scopes.len, scope);
  }
}

/** hasScope reports whether scope is one of the space-separated scopes in
 * len bytes at ptr. */
export function hasScope(ptr: usize, len: i32, scope: string): bool {
  if (scope.length == 0) return false;
  const end = ptr + <usize>len;
  let p = ptr;
  while (p <= end) {
    let q = p;
    while (q < end && load<u8>(q) != 0x20) q++;
    if (equalString(p, <i32>(q - p), scope, false)) return true;
    p = q + 1;
  }
  return false;
}

/** The authorize phase's request: the request line, the operation and the
 * bearer credential, before the host reads the body. */
@final
export class Request {
  /** "DELETE" */
  method: Utf8 = new Utf8();
  /** "/plants/42" */
  path: Utf8 = new Utf8();
  /** The bearer token as sent, empty when there is none. Never log it. */
  credential: Utf8 = new Utf8();
  /** The SHA-256 digest of credential (32 bytes) that lookupToken takes,
   * sent by the host; empty when there is no credential. */
  digest: Utf8 = new Utf8();
  /** The operation: "GET /plants", "POST /plants", "GET /plants/{id}" or
   * "DELETE /plants/{id}" (HEAD names the GET route). Key a policy on it
   * rather than on path. */
  route: Utf8 = new Utf8();
  /** The plant id of a /plants/{id} path, when hasPathID. */
  pathID: i64 = 0;
  hasPathID: bool = false;
  /** The X-Request-ID the gateway gave the request: log it. */
  requestID: Utf8 = new Utf8();
  /** The client's IP address, "192.0.2.7" or "2001:db8::1". */
  client: Utf8 = new Utf8();
  /** Who the request is from, once a token lookup found its credential
   * valid; empty before that. */
  caller: Principal = new Principal();
  // The header block: the headers the sidecar asks for.
  headers: Utf8 = new Utf8();
  private value: Utf8 = new Utf8();

  /** header returns the value of request header name (any case), or null
   * when the request lacks it. The plugin sees only the headers its sidecar
   * asks for ({"headers": ["X-Tenant"]}). The view returned is reused by
   * the next header() call. */
  header(name: string): Utf8 | null {
    let p = this.headers.ptr;
    const end = p + <usize>this.headers.len;
    while (end - p >= 4) {
      const n = load<u32>(p);
      if (<u64>n + 4 > <u64>(end - p)) return null;
      const np = p + 4;
      p = np + n;
      if (end - p < 4) return null;
      const v = load<u32>(p);
      if (<u64>v + 4 > <u64>(end - p)) return null;
      const vp = p + 4;
      p = vp + v;
      if (equalString(np, <i32>n, name, true)) return this.value.set(vp, <i32>v);
    }
    return null;
  }
}

/** The validate phase's plant: the host's canonical decoding of the body,
 * never the raw bytes. */
@final
export class Plant {
  id: i64 = 0;
  name: Utf8 = new Utf8();
  tag: Utf8 = new Utf8();
  /** The body had a tag; an empty tag is a tag, so presence is explicit. */
  hasTag: bool = false;
  /** The text the authorize chain allowed with (allowAs), empty when
   * none; for who the request is from use caller. */
  allowedAs: Utf8 = new Utf8();
  /** Deprecated: allowedAs under its old name (the same bytes). */
  principal: Utf8 = new Utf8();
  /** Who the request is from: a valid token's name and scopes. */
  caller: Principal = new Principal();
}

// A cursor over a message: cut* read the next field and fail (ok = false)
// when the message is shorter than its layout.
let cur: usize = 0;
let end: usize = 0;
let ok = true;

function cutString(v: Utf8): void {
  if (!ok || end - cur < 4) {
    ok = false;
    return;
  }
  const n = load<u32>(cur);
  if (<u64>n > <u64>(end - cur - 4)) {
    ok = false;
    return;
  }
  v.set(cur + 4, <i32>n);
  cur += 4 + <usize>n;
}

/** parseValidate fills p from a validate message; false when it is
 * shorter than its layout. */
export function parseValidate(p: Plant, ptr: usize, len: usize): bool {
  if (len < 12) return false;
  p.id = load<i64>(ptr);
  p.hasTag = (load<u32>(ptr, 8) & 1) != 0;
  cur = ptr + 12;
  end = ptr + len;
  ok = true;
  cutString(p.name);
  cutString(p.tag);
  cutString(p.allowedAs);
  p.principal.set(p.allowedAs.ptr, p.allowedAs.len);
  p.caller.name.set(0, 0);
  p.caller.scopes.set(0, 0);
  if (ok && cur < end) {
    cutString(p.caller.name);
    cutString(p.caller.scopes);
  }
  return ok;
}

/** parseAuthorize fills r from an authorize message; false when it is
 * shorter than its layout or its digest is neither empty nor 32 bytes. */
export function parseAuthorize(r: Request, ptr: usize, len: usize): bool {
  cur = ptr;
  end = ptr + len;
  ok = true;
  cutString(r.method);
  cutString(r.path);
  cutString(r.credential);
  r.digest.set(0, 0);
  r.route.set(0, 0);
  r.pathID = 0;
  r.hasPathID = false;
  r.requestID.set(0, 0);
  r.client.set(0, 0);
  r.headers.set(0, 0);
  r.caller.name.set(0, 0);
  r.caller.scopes.set(0, 0);
  if (!ok || cur == end) return ok;
  cutString(r.digest);
  if (ok && r.digest.len != 0 && r.digest.len != DIGEST_SIZE) return false;
  if (!ok || cur == end) return ok;
  cutString(r.route);
  if (!ok || end - cur < 12) return false;
  r.hasPathID = (load<u32>(cur) & 1) != 0;
  if (r.hasPathID) r.pathID = load<i64>(cur, 4);
  cur += 12;
  if (cur == end) return true;
  cutString(r.requestID);
  cutString(r.client);
  cutString(r.headers);
  cutString(r.caller.name);
  cutString(r.caller.scopes);
  return ok;
}

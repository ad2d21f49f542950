// Decisions: allow, deny with a code and message, fault. A handler builds
// one with allow(), allowAs(), deny() (or a named deny such as
// unauthorized()) or fault(), optionally adds response headers and text,
// and returns it. There is one decision record per module, reused by every
// call: building one never allocates, and the kit encodes it into a static
// buffer the host reads. So build exactly one decision per call, the one you
// return; calling deny() again starts it over.

import {
  VERDICT_ALLOW, VERDICT_DENY, VERDICT_FAULT, DECISION_HEADERS, MAX_TEXT, MAX_DECISION,
  MAX_HEADER_VALUE, RESPONSE_HEADERS, validDenyCode, phaseDenies,
} from "./abi";
import { Utf8, writeUtf8, writeValid, writeRune, full } from "./utf8";

/** First plugin code of each status a plugin may deny with; pick your own
 * codes in the same hundred, up to 99 (CODE_UNAUTHORIZED + 1 is 40151). */
export const CODE_BAD_REQUEST: i32 = 40050; // 400: the request breaks a rule (validate only)
export const CODE_UNAUTHORIZED: i32 = 40150; // 401: no valid credential (authorize only)
export const CODE_FORBIDDEN: i32 = 40350; // 403: valid credential, not allowed
export const CODE_TOO_MANY_REQUESTS: i32 = 42950; // 429: rate limited
export const CODE_UNAVAILABLE: i32 = 50350; // 503: a dependency is down; retryable

/** What a decision says. UNSET is a decision nobody built: a fault. */
export enum Kind { UNSET = 0, ALLOW = 1, DENY = 2, FAULT = 3 }

// The text (deny message, principal or fault reason) as UTF-8, cut at
// MAX_TEXT bytes before the character that crosses it.
const textBuf = memory.data(MAX_TEXT);
// The encoded record the phase export returns the address of.
const recordBuf = memory.data(MAX_DECISION, 8);

/** A decision. Do not construct one: use allow(), deny() and the others,
 * which return the module's single decision record. */
@final
export class Decision {
  kind: Kind = Kind.UNSET;
  code: i32 = 0;
  textLen: i32 = 0;
  private cut: bool = false;
  // Response headers, by index into RESPONSE_HEADERS, in the order set.
  private hdrValues: StaticArray<string> = new StaticArray<string>(3);
  private hdrOrder: StaticArray<u8> = new StaticArray<u8>(3);
  private nhdr: i32 = 0;

  /** reset starts the record over as kind with code. */
  reset(kind: Kind, code: i32): Decision {
    this.kind = kind;
    this.code = code;
    this.textLen = 0;
    this.cut = false;
    this.nhdr = 0;
    return this;
  }

  /** text appends s to the decision's text (UTF-8 on the wire). Text past
   * MAX_TEXT bytes is cut before the character that crosses it. */
  text(s: string): Decision {
    if (this.cut) return this;
    this.textLen += writeUtf8(s, textBuf + <usize>this.textLen, MAX_TEXT - this.textLen);
    this.cut = full;
    return this;
  }

  /** utf8 appends a view's bytes (a request field, say) to the text;
   * invalid UTF-8 becomes U+FFFD. */
  utf8(v: Utf8): Decision {
    if (this.cut) return this;
    this.textLen += writeValid(v.ptr, v.len, textBuf + <usize>this.textLen, MAX_TEXT - this.textLen);
    this.cut = full;
    return this;
  }

  /** int appends n in decimal, as Go's %d. */
  int(n: i64): Decision {
    if (this.cut) return this;
    // 20 digits and a sign, written backwards into a scratch area.
    const scratch = memory.data(24);
    let p = scratch + 24;
    let u: u64 = n < 0 ? <u64>(-(n + 1)) + 1 : <u64>n; // |i64.MIN| without overflow
    do {
      p--;
      store<u8>(p, <u8>(0x30 + u % 10));
      u /= 10;
    } while (u != 0);
    if (n < 0) {
      p--;
      store<u8>(p, 0x2d);
    }
    return this.ascii(p, <i32>(scratch + 24 - p));
  }

  /** codePoint appends c in Go's %U form: "U+0007", "U+1F33F". */
  codePoint(c: u32): Decision {
    if (this.cut) return this;
    const scratch = memory.data(12);
    let p = scratch + 12;
    let digits = 0;
    do {
      p--;
      const d = c & 0xf;
      store<u8>(p, <u8>(d < 10 ? 0x30 + d : 0x37 + d));
      c >>= 4;
      digits++;
    } while (c != 0 || digits < 4);
    p -= 2;
    store<u8>(p, 0x55); // U
    store<u8>(p, 0x2b, 1); // +
    return this.ascii(p, <i32>(scratch + 12 - p));
  }

  /** rune appends the character with code point c. */
  rune(c: u32): Decision {
    if (this.cut) return this;
    const w = writeRune(c, textBuf + <usize>this.textLen, MAX_TEXT - this.textLen);
    if (w == 0) this.cut = true;
    this.textLen += w;
    return this;
  }

  private ascii(p: usize, n: i32): Decision {
    if (n > MAX_TEXT - this.textLen) {
      n = MAX_TEXT - this.textLen;
      this.cut = true;
    }
    memory.copy(textBuf + <usize>this.textLen, p, <usize>n);
    this.textLen += n;
    return this;
  }

  /** header sets the response header name to value, for an allow or a
   * deny (a fault ignores it). name must be Retry-After, RateLimit or
   * RateLimit-Policy (any case), value 1 to 1024 bytes of printable ASCII:
   * anything else turns the decision into a fault, as the host would refuse
   * it. Setting a name again replaces its value. */
  header(name: string, value: string): Decision {
    if (this.kind != Kind.ALLOW && this.kind != Kind.DENY) return this;
    const h = responseHeader(name);
    if (h < 0) {
      return fault("sdk: response header \"").text(name).text("\" is not allowed (allowed: Retry-After, RateLimit, RateLimit-Policy)");
    }
    if (!headerValue(value)) {
      return fault("sdk: response header ").text(RESPONSE_HEADERS[h]).text(" value must be 1 to 1024 bytes of printable ASCII");
    }
    for (let i = 0; i < this.nhdr; i++) {
      if (<i32>this.hdrOrder[i] == h) {
        this.hdrValues[h] = value;
        return this;
      }
    }
    this.hdrOrder[this.nhdr++] = <u8>h;
    this.hdrValues[h] = value;
    return this;
  }

  /** headerValue returns the value set for name, or "". */
  headerValue(name: string): string {
    const h = responseHeader(name);
    for (let i = 0; i < this.nhdr; i++) {
      if (<i32>this.hdrOrder[i] == h) return this.hdrValues[h];
    }
    return "";
  }

  /** allowed, denied and faulted tell the kind; an unset decision is a
   * fault. */
  allowed(): bool { return this.kind == Kind.ALLOW; }
  denied(): bool { return this.kind == Kind.DENY; }
  faulted(): bool { return this.kind == Kind.FAULT || this.kind == Kind.UNSET; }

  /** message returns the text: the deny message, fault reason or allow
   * principal (it allocates). */
  message(): string {
    if (this.kind == Kind.UNSET) return UNSET_TEXT;
    return String.UTF8.decodeUnsafe(textBuf, <usize>this.textLen);
  }

  /** encode writes the record for the host and returns the phase export's
   * result: 0 for a plain allow, else address << 32 | length. phase is the
   * phase being decided (0 for configure, where only allow and fault
   * exist). */
  encode(phase: i32): u64 {
    let kind = this.kind;
    const code = this.code;
    if (kind == Kind.DENY && phase != 0 && !phaseDenies(phase, code)) {
      // fault() resets this record: code was read before.
      fault("sdk: ").text(phase == 1 ? "authorize" : "validate").text(" may not deny with ").int(code)
        .text("; a phase may deny with status 403, 429 or 503, authorize also 401, validate also 400");
      kind = Kind.FAULT;
    }
    if (kind == Kind.UNSET) {
      fault(UNSET_TEXT);
      kind = Kind.FAULT;
    }
    if (kind == Kind.ALLOW && this.textLen == 0 && this.nhdr == 0) return 0;
    let verdict = VERDICT_ALLOW;
    if (kind == Kind.DENY) verdict = VERDICT_DENY;
    else if (kind != Kind.ALLOW) verdict = VERDICT_FAULT;
    const r = recordBuf;
    store<u8>(r, verdict);
    store<u8>(r, 0, 1);
    store<u16>(r, 0, 2);
    store<i32>(r, kind == Kind.DENY ? this.code : 0, 4);
    let o: usize = 8;
    if (kind != Kind.FAULT && this.nhdr > 0) {
      store<u8>(r, DECISION_HEADERS, 1);
      const mark = o;
      o += 4;
      for (let i = 0; i < this.nhdr; i++) {
        const h = <i32>this.hdrOrder[i];
        o += putASCII(r + o, RESPONSE_HEADERS[h]);
        o += putASCII(r + o, this.hdrValues[h]);
      }
      store<u32>(r + mark, <u32>(o - mark - 4));
    }
    memory.copy(r + o, textBuf, <usize>this.textLen);
    o += <usize>this.textLen;
    return (<u64>r << 32) | <u64>o;
  }
}

const UNSET_TEXT = "sdk: handler returned a decision it never set (call allow, deny or fault)";

/** The module's one decision record. */
export const decision = new Decision();

/** allow allows the request; free: the host reads no memory for it. */
export function allow(): Decision {
  return decision.reset(Kind.ALLOW, 0);
}

/** allowAs allows and names the principal the request acts for (a token's
 * name): the host logs it and hands it to the validate phase. */
export function allowAs(principal: string): Decision {
  return decision.reset(Kind.ALLOW, 0).text(principal);
}

/** deny denies with code and a message the client sees; the HTTP status is
 * code / 100. A code outside the plugin range (status 400, 401, 403, 429 or
 * 503; last two digits 50-99) makes it a fault instead, so a typo fails
 * closed. Append to the message with text(), int() and the like. */
export function deny(code: i32, message: string = ""): Decision {
  if (!validDenyCode(code)) {
    return fault("sdk: deny code ").int(code)
      .text(" is outside the plugin range (status 400, 401, 403, 429 or 503; last two digits 50–99)");
  }
  return decision.reset(Kind.DENY, code).text(message);
}

/** badRequest is deny(CODE_BAD_REQUEST, message): 400, validate only. */
export function badRequest(message: string): Decision { return deny(CODE_BAD_REQUEST, message); }
/** unauthorized is deny(CODE_UNAUTHORIZED, message): 401, authorize only. */
export function unauthorized(message: string): Decision { return deny(CODE_UNAUTHORIZED, message); }
/** forbidden is deny(CODE_FORBIDDEN, message): 403. */
export function forbidden(message: string): Decision { return deny(CODE_FORBIDDEN, message); }
/** tooManyRequests is deny(CODE_TOO_MANY_REQUESTS, message): 429. */
export function tooManyRequests(message: string): Decision { return deny(CODE_TOO_MANY_REQUESTS, message); }
/** unavailable is deny(CODE_UNAVAILABLE, message): 503, which clients may retry. */
export function unavailable(message: string): Decision { return deny(CODE_UNAVAILABLE, message); }

/** fault says the plugin cannot decide: the host fails closed (a 5xx the
 * client sees without this text) and logs reason. */
export function fault(reason: string): Decision {
  return decision.reset(Kind.FAULT, 0).text(reason);
}

/** responseHeader returns the index in RESPONSE_HEADERS of name (any
 * case), or -1. */
function responseHeader(name: string): i32 {
  for (let i = 0; i < RESPONSE_HEADERS.length; i++) {
    const h = RESPONSE_HEADERS[i];
    if (h.length != name.length) continue;
    let same = true;
    for (let j = 0; j < h.length; j++) {
      let a = h.charCodeAt(j);
      let b = name.charCodeAt(j);
      if (a >= 0x41 && a <= 0x5a) a += 0x20;
      if (b >= 0x41 && b <= 0x5a) b += 0x20;
      if (a != b) {
        same = false;
        break;
      }
    }
    if (same) return i;
  }
  return -1;
}

function headerValue(v: string): bool {
  if (v.length == 0 || v.length > MAX_HEADER_VALUE) return false;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// putASCII writes s (printable ASCII, checked by header) as a u32 length
// and its bytes; it returns the bytes written.
function putASCII(dst: usize, s: string): usize {
  const n = s.length;
  store<u32>(dst, <u32>n);
  for (let i = 0; i < n; i++) store<u8>(dst + 4 + <usize>i, <u8>s.charCodeAt(i));
  return 4 + <usize>n;
}

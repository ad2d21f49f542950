// Reading a plugin's config: the "config" value of its sidecar file, as
// JSON. configure runs once per instance, so this reader allocates freely;
// it checks the whole document like Go's encoding/json and reports the
// first error with Go's wording where the bundled plugins' messages depend
// on it.

import { Utf8 } from "./utf8";

/** The kind of a JSON value. */
export enum JSONKind { NULL, TRUE, FALSE, NUMBER, STRING, ARRAY, OBJECT }

/** One member of a JSON object: its key (decoded) and its value as the raw
 * JSON bytes of the document. */
@final
export class Member {
  key: string = "";
  raw: Utf8 = new Utf8();
  kind: JSONKind = JSONKind.NULL;

  /** isInt reports whether the value is a JSON integer that fits an i64
   * (what Go's json.Unmarshal accepts for an int64: no fraction, no
   * exponent). */
  isInt(): bool {
    return this.kind == JSONKind.NUMBER && parseI64(this.raw);
  }

  /** int returns the value of an isInt member. */
  int(): i64 {
    parseI64(this.raw);
    return parsed;
  }

  /** rawString returns the raw JSON bytes as a string ("5", "\"x\""), for
   * messages. */
  rawString(): string {
    return this.raw.toString();
  }
}

/** A parsed config: the members of its top-level object in document order
 * (a key may repeat: the last wins in Go), or error. */
@final
export class ConfigObject {
  /** The config was empty, only white space, or null: keep the defaults. */
  empty: bool = false;
  members: Member[] = [];
  /** "" when the config is a valid JSON object, else what is wrong, like
   * Go's encoding/json says it. */
  error: string = "";

  /** get returns the last member named key, or null. */
  get(key: string): Member | null {
    for (let i = this.members.length - 1; i >= 0; i--) {
      if (this.members[i].key == key) return this.members[i];
    }
    return null;
  }

  /** sortedKeys returns the distinct keys, sorted by their UTF-16 code
   * units (which for the BMP is Go's byte order). */
  sortedKeys(): string[] {
    const keys: string[] = [];
    for (let i = 0; i < this.members.length; i++) {
      const k = this.members[i].key;
      if (!keys.includes(k)) keys.push(k);
    }
    keys.sort((a: string, b: string): i32 => (a < b ? -1 : a > b ? 1 : 0));
    return keys;
  }
}

let p: usize = 0;
let end: usize = 0;
let err = "";

/** parseConfig parses config, which must be empty, null or a JSON
 * object. */
export function parseConfig(config: Utf8): ConfigObject {
  const c = new ConfigObject();
  p = config.ptr;
  end = config.ptr + <usize>config.len;
  err = "";
  skipSpace();
  if (p == end) {
    c.empty = true;
    return c;
  }
  const first = load<u8>(p);
  if (first != 0x7b) { // {
    const kind = value();
    if (err == "") {
      skipSpace();
      if (p != end) syntax("after top-level value");
    }
    if (err != "") {
      c.error = err;
    } else if (kind == JSONKind.NULL) {
      c.empty = true;
    } else {
      c.error = "json: cannot unmarshal " + kindName(kind) + " into Go value of type map[string]json.RawMessage";
    }
    return c;
  }
  p++;
  skipSpace();
  if (p < end && load<u8>(p) == 0x7d) {
    p++;
  } else {
    while (err == "") {
      skipSpace();
      if (p == end) { unexpectedEnd(); break; }
      if (load<u8>(p) != 0x22) { syntax("looking for beginning of object key string"); break; }
      const m = new Member();
      m.key = stringValue();
      if (err != "") break;
      skipSpace();
      if (p == end) { unexpectedEnd(); break; }
      if (load<u8>(p) != 0x3a) { syntax("after object key"); break; }
      p++;
      skipSpace();
      const start = p;
      m.kind = value();
      if (err != "") break;
      m.raw.set(start, <i32>(p - start));
      c.members.push(m);
      skipSpace();
      if (p == end) { unexpectedEnd(); break; }
      const ch = load<u8>(p);
      p++;
      if (ch == 0x7d) break;
      if (ch != 0x2c) { p--; syntax("after object key:value pair"); break; }
    }
  }
  if (err == "") {
    skipSpace();
    if (p != end) syntax("after top-level value");
  }
  c.error = err;
  if (err != "") c.members = [];
  return c;
}

function kindName(k: JSONKind): string {
  switch (k) {
    case JSONKind.TRUE:
    case JSONKind.FALSE: return "bool";
    case JSONKind.NUMBER: return "number";
    case JSONKind.STRING: return "string";
    case JSONKind.ARRAY: return "array";
  }
  return "object";
}

function skipSpace(): void {
  while (p < end) {
    const c = load<u8>(p);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) return;
    p++;
  }
}

function unexpectedEnd(): void {
  if (err == "") err = "unexpected end of JSON input";
}

// syntax reports the character at p as Go's scanner does:
// "invalid character 'x' after object key".
function syntax(context: string): void {
  if (err != "") return;
  if (p >= end) {
    unexpectedEnd();
    return;
  }
  const c = load<u8>(p);
  let shown: string;
  if (c == 0x27) shown = "'\\''";
  else if (c == 0x22) shown = "'\"'";
  else if (c >= 0x20 && c < 0x7f) shown = "'" + String.fromCharCode(c) + "'";
  else shown = "'\\x" + (c < 16 ? "0" : "") + c.toString(16) + "'";
  err = "invalid character " + shown + " " + context;
}

function literal(word: string, kind: JSONKind): JSONKind {
  for (let i = 0; i < word.length; i++) {
    if (p == end) { unexpectedEnd(); return kind; }
    if (<i32>load<u8>(p) != word.charCodeAt(i)) { syntax("in literal " + word + " (expecting '" + word.charAt(i) + "')"); return kind; }
    p++;
  }
  return kind;
}

function value(): JSONKind {
  if (p == end) { unexpectedEnd(); return JSONKind.NULL; }
  const c = load<u8>(p);
  if (c == 0x7b) { // {
    p++;
    skipSpace();
    if (p < end && load<u8>(p) == 0x7d) { p++; return JSONKind.OBJECT; }
    while (err == "") {
      skipSpace();
      if (p == end) { unexpectedEnd(); break; }
      if (load<u8>(p) != 0x22) { syntax("looking for beginning of object key string"); break; }
      stringValue();
      skipSpace();
      if (err != "") break;
      if (p == end) { unexpectedEnd(); break; }
      if (load<u8>(p) != 0x3a) { syntax("after object key"); break; }
      p++;
      skipSpace();
      value();
      skipSpace();
      if (err != "") break;
      if (p == end) { unexpectedEnd(); break; }
      const ch = load<u8>(p);
      if (ch == 0x7d) { p++; break; }
      if (ch != 0x2c) { syntax("after object key:value pair"); break; }
      p++;
    }
    return JSONKind.OBJECT;
  }
  if (c == 0x5b) { // [
    p++;
    skipSpace();
    if (p < end && load<u8>(p) == 0x5d) { p++; return JSONKind.ARRAY; }
    while (err == "") {
      skipSpace();
      value();
      skipSpace();
      if (err != "") break;
      if (p == end) { unexpectedEnd(); break; }
      const ch = load<u8>(p);
      if (ch == 0x5d) { p++; break; }
      if (ch != 0x2c) { syntax("after array element"); break; }
      p++;
    }
    return JSONKind.ARRAY;
  }
  if (c == 0x22) { stringValue(); return JSONKind.STRING; }
  if (c == 0x74) return literal("true", JSONKind.TRUE);
  if (c == 0x66) return literal("false", JSONKind.FALSE);
  if (c == 0x6e) return literal("null", JSONKind.NULL);
  if (c == 0x2d || (c >= 0x30 && c <= 0x39)) { number(); return JSONKind.NUMBER; }
  syntax("looking for beginning of value");
  return JSONKind.NULL;
}

function isDigit(): bool {
  return p < end && load<u8>(p) >= 0x30 && load<u8>(p) <= 0x39;
}

function number(): void {
  if (load<u8>(p) == 0x2d) {
    p++;
    if (!isDigit()) { syntax("in numeric literal"); return; }
  }
  if (load<u8>(p) == 0x30) p++;
  else while (isDigit()) p++;
  if (p < end && load<u8>(p) == 0x2e) {
    p++;
    if (!isDigit()) { syntax("after decimal point in numeric literal"); return; }
    while (isDigit()) p++;
  }
  if (p < end && (load<u8>(p) | 0x20) == 0x65) {
    p++;
    if (p < end && (load<u8>(p) == 0x2b || load<u8>(p) == 0x2d)) p++;
    if (!isDigit()) { syntax("in exponent of numeric literal"); return; }
    while (isDigit()) p++;
  }
}

function hex(c: u32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  c |= 0x20;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

function hex4(): i32 {
  let v = 0;
  for (let i = 0; i < 4; i++) {
    if (p == end) { unexpectedEnd(); return -1; }
    const h = hex(load<u8>(p));
    if (h < 0) { syntax("in \\u hexadecimal character escape"); return -1; }
    v = v << 4 | h;
    p++;
  }
  return v;
}

// stringValue reads the string at p (at its quote) and returns it decoded.
function stringValue(): string {
  p++;
  const start = p;
  let simple = true;
  while (p < end) {
    const c = load<u8>(p);
    if (c == 0x22) break;
    if (c < 0x20) { syntax("in string literal"); return ""; }
    if (c == 0x5c) {
      simple = false;
      p++;
      if (p == end) break;
      const e = load<u8>(p);
      if (e == 0x75) { p++; if (hex4() < 0) return ""; continue; }
      if (e != 0x22 && e != 0x5c && e != 0x2f && e != 0x62 && e != 0x66 && e != 0x6e && e != 0x72 && e != 0x74) {
        syntax("in string escape code");
        return "";
      }
    }
    p++;
  }
  if (p == end) { unexpectedEnd(); return ""; }
  const stop = p;
  p++;
  if (simple) return String.UTF8.decodeUnsafe(start, stop - start);
  // Decode the escapes: rare in config keys, so the slow way.
  let out = "";
  let q = start;
  while (q < stop) {
    let c = <u32>load<u8>(q);
    if (c != 0x5c) {
      let r = q + 1;
      while (r < stop && load<u8>(r) != 0x5c) r++;
      out += String.UTF8.decodeUnsafe(q, r - q);
      q = r;
      continue;
    }
    q++;
    c = load<u8>(q);
    q++;
    if (c == 0x75) {
      let v: u32 = 0;
      for (let i = 0; i < 4; i++) v = v << 4 | <u32>hex(load<u8>(q + i));
      q += 4;
      if (v >= 0xd800 && v <= 0xdbff && stop - q >= 6 && load<u8>(q) == 0x5c && load<u8>(q, 1) == 0x75) {
        let w: u32 = 0;
        for (let i = 0; i < 4; i++) w = w << 4 | <u32>hex(load<u8>(q + 2 + i));
        if (w >= 0xdc00 && w <= 0xdfff) {
          out += String.fromCharCodes([<i32>v, <i32>w]);
          q += 6;
          continue;
        }
      }
      if (v >= 0xd800 && v <= 0xdfff) v = 0xfffd;
      out += String.fromCharCode(v);
      continue;
    }
    if (c == 0x62) out += "\b";
    else if (c == 0x66) out += "\f";
    else if (c == 0x6e) out += "\n";
    else if (c == 0x72) out += "\r";
    else if (c == 0x74) out += "\t";
    else out += String.fromCharCode(c);
  }
  return out;
}

let parsed: i64 = 0;

// parseI64 parses a JSON integer into parsed; false when it has a
// fraction or exponent or does not fit an i64.
function parseI64(raw: Utf8): bool {
  let q = raw.ptr;
  const e = raw.ptr + <usize>raw.len;
  if (q == e) return false;
  const neg = load<u8>(q) == 0x2d;
  if (neg) q++;
  if (q == e) return false;
  let v: u64 = 0;
  const limit: u64 = neg ? 9223372036854775808 : 9223372036854775807;
  while (q < e) {
    const c = load<u8>(q);
    if (c < 0x30 || c > 0x39) return false;
    const d = <u64>(c - 0x30);
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
    q++;
  }
  parsed = neg ? -(<i64>v) : <i64>v;
  return true;
}

/** quote quotes s as Go's %q does for the common cases: ASCII escapes,
 * other characters as they are. */
export function quote(s: string): string {
  let out = "\"";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) out += "\\\"";
    else if (c == 0x5c) out += "\\\\";
    else if (c == 0x07) out += "\\a";
    else if (c == 0x08) out += "\\b";
    else if (c == 0x0c) out += "\\f";
    else if (c == 0x0a) out += "\\n";
    else if (c == 0x0d) out += "\\r";
    else if (c == 0x09) out += "\\t";
    else if (c == 0x0b) out += "\\v";
    else if (c < 0x20 || c == 0x7f) out += "\\x" + (c < 16 ? "0" : "") + c.toString(16);
    else if (c >= 0x80 && c < 0xa0) out += "\\u00" + c.toString(16);
    else out += String.fromCharCode(c);
  }
  return out + "\"";
}

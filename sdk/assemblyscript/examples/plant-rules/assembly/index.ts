// plant-rules, the bundled validate-phase policy (plugins/plant-rules),
// written with the AssemblyScript kit: same rules in the same order, same
// codes, same messages, same config. testdata/expect/plant-rules.jsonl
// checks that both decide alike.
//
// The rules, checked in this order (the first that fails decides):
//
//   code   rule (defaults)
//   40050  id is at least id_min (1)
//   40052  name has no control characters (unless allow_control)
//   40051  name has name_min–name_max (1–100) characters after trimming spaces
//   40054  tag has no control characters (unless allow_control), when present
//   40053  tag has tag_min–tag_max (1–50) characters after trimming, when present
//
// Characters are Unicode code points; trimming removes leading and trailing
// white space (Go's strings.TrimSpace). Control characters (Go's
// unicode.IsControl) are looked for in the whole value, as it would be
// stored.
//
// Config, every key optional:
//
//   {"name_min": 1, "name_max": 100, "tag_min": 1, "tag_max": 50, "id_min": 1, "allow_control": false}

import {
  handleConfigure, handleValidate, Plant, Decision, Utf8, allow, deny,
  decodeRune, decodeLastRune, isControl, isSpace, parseConfig, quote,
} from "../../../assembly";
export * from "../../../assembly/exports";

// Deny codes, one per rule (status 400).
const CODE_ID: i32 = 40050;
const CODE_NAME_LENGTH: i32 = 40051;
const CODE_NAME_CONTROL: i32 = 40052;
const CODE_TAG_LENGTH: i32 = 40053;
const CODE_TAG_CONTROL: i32 = 40054;

// The config in force: defaults until configure replaces them. Every
// bound is inclusive. Scalars in globals: the per-call path reads them
// without touching the heap.
let nameMin: i64 = 1;
let nameMax: i64 = 100;
let tagMin: i64 = 1;
let tagMax: i64 = 50;
let idMin: i64 = 1;
let allowControl = false;

handleConfigure(configure);
handleValidate(validate);

// validate applies the rules. Nothing on any path allocates: the checks
// read the request buffer in place and a deny's message is written
// straight into the kit's decision record.
function validate(p: Plant): Decision {
  if (p.id < idMin) {
    return deny(CODE_ID, "id must be at least ").int(idMin).text(", got ").int(p.id);
  }
  if (!passes(p.name, nameMin, nameMax)) {
    return check("name", p.name, nameMin, nameMax, CODE_NAME_LENGTH, CODE_NAME_CONTROL);
  }
  if (p.hasTag && !passes(p.tag, tagMin, tagMax)) {
    return check("tag", p.tag, tagMin, tagMax, CODE_TAG_LENGTH, CODE_TAG_CONTROL);
  }
  return allow();
}

// passes is the usual field: printable ASCII (no control characters, one
// character per byte, only spaces to trim) of a length within bounds.
function passes(v: Utf8, lo: i64, hi: i64): bool {
  let i = v.ptr;
  let j = v.ptr + <usize>v.len;
  for (let q = i; q < j; q++) {
    const c = load<u8>(q);
    if (c < 0x20 || c > 0x7e) return false;
  }
  while (i < j && load<u8>(i) == 0x20) i++;
  while (j > i && load<u8>(j - 1) == 0x20) j--;
  const n = <i64>(j - i);
  return n >= lo && n <= hi;
}

// check decides a field that is not the usual one: the control-character
// rule, then the length rule; allow when both pass.
function check(field: string, v: Utf8, lo: i64, hi: i64, codeLength: i32, codeControl: i32): Decision {
  const start = v.ptr;
  const end = v.ptr + <usize>v.len;
  if (!allowControl) {
    let n: i64 = 0;
    for (let q = start; q < end;) {
      const r = decodeRune(q, end);
      n++;
      const cp = r & 0x1fffff;
      if (isControl(cp)) {
        return deny(codeControl, field).text(" must not contain control characters, found ")
          .codePoint(cp).text(" at character ").int(n);
      }
      q += r >>> 24;
    }
  }
  // strings.TrimSpace, then count code points (an invalid byte is one).
  let i = start;
  let j = end;
  while (i < j) {
    const r = decodeRune(i, j);
    if (!isSpace(r & 0x1fffff)) break;
    i += r >>> 24;
  }
  while (j > i) {
    const r = decodeLastRune(i, j);
    if (!isSpace(r & 0x1fffff)) break;
    j -= r >>> 24;
  }
  let n: i64 = 0;
  for (let q = i; q < j; n++) q += decodeRune(q, j) >>> 24;
  if (n < lo || n > hi) {
    if (lo == hi) {
      return deny(codeLength, field).text(" must be exactly ").int(lo).text(" characters after trimming, got ").int(n);
    }
    return deny(codeLength, field).text(" must be ").int(lo).text("–").int(hi).text(" characters after trimming, got ").int(n);
  }
  return allow();
}

// configure reads the config over the defaults and checks the bounds; it
// returns "" or what is wrong, worded as the Go plugin words it.
function configure(raw: Utf8): string {
  const e = parse(raw);
  return e.length == 0 ? "" : "plant-rules config: " + e;
}

function parse(raw: Utf8): string {
  const c = parseConfig(raw);
  if (c.empty) return "";
  if (c.error.length > 0) return "want a JSON object: " + c.error;
  let nMin: i64 = 1, nMax: i64 = 100, tMin: i64 = 1, tMax: i64 = 50, iMin: i64 = 1;
  let ctl = false;
  // Sorted, so the first error reported does not depend on key order.
  const keys = c.sortedKeys();
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k];
    const m = c.get(key)!;
    const v = m.rawString();
    if (key == "allow_control") {
      if (v != "true" && v != "false") return "allow_control must be true or false, got " + v;
      ctl = v == "true";
      continue;
    }
    if (key != "name_min" && key != "name_max" && key != "tag_min" && key != "tag_max" && key != "id_min") {
      return "unknown key " + quote(key) + " (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)";
    }
    if (!m.isInt() || m.int() < 0) return key + " must be an integer ≥ 0, got " + v;
    const n = m.int();
    if (key == "name_min") nMin = n;
    else if (key == "name_max") nMax = n;
    else if (key == "tag_min") tMin = n;
    else if (key == "tag_max") tMax = n;
    else iMin = n;
  }
  if (nMin > nMax) return "name_min (" + nMin.toString() + ") must not exceed name_max (" + nMax.toString() + ")";
  if (tMin > tMax) return "tag_min (" + tMin.toString() + ") must not exceed tag_max (" + tMax.toString() + ")";
  nameMin = nMin;
  nameMax = nMax;
  tagMin = tMin;
  tagMax = tMax;
  idMin = iMin;
  allowControl = ctl;
  return "";
}

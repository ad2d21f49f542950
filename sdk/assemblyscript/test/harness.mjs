// A host for tests: loads a plugin module with node's WebAssembly API,
// provides the plantgate imports (log, token lookup and KV against an
// in-memory store) and WASI's clock, encodes requests in the ABI layout
// and decodes and judges decisions as the gateway does (sdk/abi): a record
// inside memory, a known verdict, a deny code the phase may use, UTF-8
// text within 1024 bytes, allowed response headers.
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

export const PHASE_AUTHORIZE = 1;
export const PHASE_VALIDATE = 2;
export const MAX_TEXT = 1024;
const KV_BUDGET = 8;
const RESPONSE_HEADERS = ["Retry-After", "RateLimit", "RateLimit-Policy"];

/** A growable little-endian byte writer for messages. */
class Writer {
  constructor() { this.bytes = []; }
  u32(v) { for (let i = 0; i < 4; i++) this.bytes.push((v >>> (8 * i)) & 0xff); return this; }
  i64(v) { let b = BigInt.asUintN(64, BigInt(v)); for (let i = 0; i < 8; i++) { this.bytes.push(Number(b & 0xffn)); b >>= 8n; } return this; }
  raw(b) { for (const x of b) this.bytes.push(x); return this; }
  str(s) { const b = typeof s === "string" ? enc.encode(s) : s; return this.u32(b.length).raw(b); }
  done() { return Uint8Array.from(this.bytes); }
}

/** encodeValidate is abi.AppendValidate plus the version-2 caller. */
export function encodeValidate({ id, name = "", tag, principal = "", caller = "", scopes = "" }) {
  const w = new Writer().i64(id).u32(tag === undefined ? 0 : 1).str(name).str(tag ?? "").str(principal);
  return w.str(caller).str(scopes).done();
}

/** encodeAuthorize is abi.AppendAuthorize, AppendOperation and the
 * version-2 context. */
export function encodeAuthorize({ method = "GET", path = "/plants", credential = "", route = "GET /plants",
  pathID, requestID = "req-1", client = "192.0.2.7", headers = [], principal = "", scopes = "" }) {
  const w = new Writer().str(method).str(path).str(credential);
  w.str(credential ? createHash("sha256").update(credential).digest() : new Uint8Array(0));
  w.str(route).u32(pathID === undefined ? 0 : 1).i64(pathID ?? 0);
  w.str(requestID).str(client);
  const hb = new Writer();
  for (const [n, v] of headers) hb.str(n).str(v);
  w.str(hb.done());
  return w.str(principal).str(scopes).done();
}

/** encodeToken is abi.AppendTokenRecord. */
function encodeToken({ token, name, scopes = "", created = 0, expires = 0, revoked = false }) {
  const w = new Writer().i64(created).i64(expires).u32(revoked ? 1 : 0);
  w.raw(createHash("sha256").update(token).digest());
  return w.str(name).str(scopes).done();
}

/** Plugin is one instance of a module, with its host state. */
export class Plugin {
  constructor(file, { tokens = [], unavailable = false } = {}) {
    this.logs = [];
    this.kv = new Map();
    this.takes = new Map();
    this.kvCalls = 0;
    this.tokens = new Map(tokens.map((t) => [createHash("sha256").update(t.token).digest("hex"), encodeToken(t)]));
    this.unavailable = unavailable;
    const mem = () => new Uint8Array(this.exports.memory.buffer);
    const view = () => new DataView(this.exports.memory.buffer);
    const bytes = (p, n) => mem().slice(p, p + n);
    const budget = () => ++this.kvCalls > KV_BUDGET;
    const key = (p, n) => (n < 1 || n > 256 ? null : Buffer.from(bytes(p, n)).toString("latin1"));
    const imports = {
      plantgate: {
        log: (level, p, n) => { this.logs.push({ level, text: dec.decode(bytes(p, n)) }); },
        token_lookup: (hp, hn, op, oc) => {
          if (hn !== 32) return -3;
          if (this.unavailable) return -2;
          const rec = this.tokens.get(Buffer.from(bytes(hp, hn)).toString("hex"));
          if (!rec) return -1;
          if (rec.length <= oc) mem().set(rec, op);
          return rec.length;
        },
        kv_get: (kp, kn, op, oc) => {
          if (budget()) return -4;
          const k = key(kp, kn);
          if (k === null) return -3;
          const v = this.kv.get(k);
          if (!v) return -1;
          if (v.length <= oc) mem().set(v, op);
          return v.length;
        },
        kv_set: (kp, kn, vp, vn, ttl) => {
          if (budget()) return -4;
          const k = key(kp, kn);
          if (k === null || vn > 4096 || ttl < 0n) return -3;
          this.kv.set(k, bytes(vp, vn));
          return 0;
        },
        kv_delete: (kp, kn) => {
          if (budget()) return -4;
          const k = key(kp, kn);
          if (k === null) return -3;
          return this.kv.delete(k) ? 1 : 0;
        },
        kv_incr: (kp, kn, delta, windowMs) => {
          if (budget()) return -4n;
          const k = key(kp, kn);
          if (k === null || windowMs <= 0n) return -3n;
          const n = (this.takes.get("incr:" + k) ?? 0n) + delta;
          this.takes.set("incr:" + k, n);
          return n;
        },
        kv_take_sliding: (kp, kn, limit, windowMs) => imports.plantgate.kv_take(kp, kn, limit, windowMs, "sliding:"),
        kv_take: (kp, kn, limit, windowMs, kind = "fixed:") => {
          if (budget()) return -4n;
          const k = key(kp, kn) && kind + key(kp, kn);
          if (k === null || limit <= 0n || windowMs <= 0n) return -3n;
          const used = this.takes.get("take:" + k) ?? 0n;
          const denied = used >= limit;
          if (!denied) this.takes.set("take:" + k, used + 1n);
          const left = denied ? 0n : limit - used - 1n;
          return (denied ? 1n << 62n : 0n) | (left << 32n) | 1500n; // resets in 1.5 s
        },
      },
      wasi_snapshot_preview1: {
        clock_time_get: (id, precision, out) => { view().setBigInt64(out, BigInt(Date.now()) * 1000000n, true); return 0; },
      },
    };
    const mod = new WebAssembly.Module(readFileSync(file));
    for (const i of WebAssembly.Module.imports(mod)) {
      if (!imports[i.module] || !imports[i.module][i.name]) throw new Error(`imports ${i.module}.${i.name}, which the host does not provide`);
    }
    this.exports = new WebAssembly.Instance(mod, imports).exports;
    this.exports._initialize?.();
  }

  /** abiVersion and phases are the module's answers. */
  get abiVersion() { return this.exports.plantgate_abi_version(); }
  get phases() { return this.exports.plantgate_phases(); }

  /** send writes msg into the module's buffer as the host does. */
  send(msg) {
    const p = this.exports.plantgate_buffer(msg.length);
    if (p === 0) throw new Error(`plantgate_buffer(${msg.length}) returned 0`);
    new Uint8Array(this.exports.memory.buffer).set(msg, p);
    return p;
  }

  configure(json) { const m = enc.encode(json); return this.judge(0, this.exports.plantgate_configure(this.send(m), m.length)); }
  authorize(req) { const m = encodeAuthorize(req); this.kvCalls = 0; return this.judge(PHASE_AUTHORIZE, this.exports.plantgate_authorize(this.send(m), m.length)); }
  validate(plant) { const m = encodeValidate(plant); this.kvCalls = 0; return this.judge(PHASE_VALIDATE, this.exports.plantgate_validate(this.send(m), m.length)); }

  /** judge decodes a phase export's result as the gateway does and returns
   * it as `plantgate plugin run` prints it. It throws on a record the host
   * would refuse. */
  judge(phase, result) {
    const r = BigInt.asUintN(64, result);
    if (r === 0n) return { decision: "allow" };
    const ptr = Number(r >> 32n), len = Number(r & 0xffffffffn);
    const buf = this.exports.memory.buffer;
    if (ptr + len > buf.byteLength || len < 8) throw new Error(`decision record ${ptr}+${len} outside memory or short`);
    const b = new Uint8Array(buf, ptr, len);
    const v = new DataView(buf, ptr, len);
    const verdict = b[0], flags = b[1], code = v.getInt32(4, true);
    let o = 8;
    const headers = {};
    if (flags & 1) {
      const n = v.getUint32(o, true);
      o += 4;
      const endH = o + n;
      while (o < endH) {
        const nl = v.getUint32(o, true); const name = dec.decode(b.slice(o + 4, o + 4 + nl)); o += 4 + nl;
        const vl = v.getUint32(o, true); const value = dec.decode(b.slice(o + 4, o + 4 + vl)); o += 4 + vl;
        const canon = RESPONSE_HEADERS.find((h) => h.toLowerCase() === name.toLowerCase());
        if (!canon || !/^[\x20-\x7e]{1,1024}$/.test(value)) throw new Error(`header ${name}: ${value} refused`);
        headers[canon] = value;
      }
    }
    const textBytes = b.slice(o);
    if (textBytes.length > MAX_TEXT) throw new Error(`text of ${textBytes.length} bytes`);
    const text = dec.decode(textBytes); // throws on invalid UTF-8, as the host refuses it
    const out = {};
    if (verdict === 0) {
      out.decision = "allow";
      if (text) out.principal = text;
    } else if (verdict === 1) {
      const status = Math.trunc(code / 100);
      if (![400, 401, 403, 429, 503].includes(status) || code % 100 < 50) throw new Error(`deny code ${code} outside the plugin range`);
      if ((phase === PHASE_AUTHORIZE && status === 400) || (phase === PHASE_VALIDATE && status === 401) || phase === 0) {
        throw new Error(`phase ${phase} may not deny with ${code}`);
      }
      Object.assign(out, { decision: "deny", status, error: code, message: text });
    } else if (verdict === 2) {
      Object.assign(out, { decision: "fault", message: text });
    } else {
      throw new Error(`unknown verdict ${verdict}`);
    }
    if (Object.keys(headers).length) out.headers = headers;
    out.bytes = textBytes.length;
    return out;
  }
}

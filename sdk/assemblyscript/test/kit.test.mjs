// The kit through a module that uses every part of it (test/assembly/kit.ts),
// built with the default (incremental) runtime.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Plugin } from "./harness.mjs";

const wasm = new URL("../build/kit.wasm", import.meta.url).pathname;
const tokens = [
  { token: "secret-ci", name: "ci", scopes: "plants:read plants:write" },
  { token: "secret-old", name: "old", expires: 1000 },
  { token: "secret-gone", name: "gone", revoked: true },
];
const plugin = (opts) => new Plugin(wasm, { tokens, ...opts });
const strip = ({ bytes, ...d }) => d;

test("exports: ABI version 2, both phases", () => {
  const p = plugin();
  assert.equal(p.abiVersion, 2);
  assert.equal(p.phases, 3);
});

test("request fields, headers and caller reach the handler", () => {
  const p = plugin();
  const d = p.authorize({ method: "DELETE", path: "/fields", route: "DELETE /plants/{id}", pathID: 42, requestID: "r-9",
    client: "2001:db8::1", headers: [["X-Tenant", "acme"]], principal: "ci", scopes: "plants:read plants:write", credential: "c" });
  assert.deepEqual(strip(d), { decision: "allow", principal: "DELETE|DELETE /plants/{id}|42|r-9|2001:db8::1|acme|ci|writer|32" });
  const e = p.authorize({ path: "/fields" });
  assert.deepEqual(strip(e), { decision: "allow", principal: "GET|GET /plants|-1|req-1|192.0.2.7|no tenant||reader|0" });
});

test("token lookup and take: 401s, 503, principal, then 429 with Retry-After", () => {
  const p = plugin();
  assert.deepEqual(strip(p.authorize({})), { decision: "deny", status: 401, error: 40150, message: "missing bearer token" });
  assert.deepEqual(strip(p.authorize({ credential: "nope" })), { decision: "deny", status: 401, error: 40150, message: "invalid token" });
  assert.deepEqual(strip(p.authorize({ credential: "secret-old" })), { decision: "deny", status: 401, error: 40150, message: "token revoked or expired" });
  assert.deepEqual(strip(p.authorize({ credential: "secret-gone" })), { decision: "deny", status: 401, error: 40150, message: "token revoked or expired" });
  assert.deepEqual(strip(p.authorize({ credential: "secret-ci" })), { decision: "allow", principal: "ci plants:read plants:write left=1" });
  assert.deepEqual(strip(p.authorize({ credential: "secret-ci" })), { decision: "allow", principal: "ci plants:read plants:write left=0" });
  assert.deepEqual(strip(p.authorize({ credential: "secret-ci" })),
    { decision: "deny", status: 429, error: 42950, message: "rate limit reached", headers: { "Retry-After": "2" } });
  const down = plugin({ unavailable: true });
  assert.deepEqual(strip(down.authorize({ credential: "secret-ci" })), { decision: "deny", status: 503, error: 50350, message: "token store unavailable" });
});

test("KV: set, get, not found, incr, delete, bad key; the ninth call is over budget", () => {
  const p = plugin();
  assert.deepEqual(strip(p.authorize({ path: "/kv" })), { decision: "allow", principal: "välue|-1|5|1|0|-3" });
  assert.deepEqual(strip(p.authorize({ path: "/budget" })), { decision: "allow", principal: "ninth -4" });
});

test("take: fixed and sliding windows are two budgets", () => {
  assert.deepEqual(strip(plugin().authorize({ path: "/fixed" })), { decision: "allow", principal: "yes no yes 1500" });
});

test("validate: allowedAs and its deprecated twin principal", () => {
  assert.deepEqual(strip(plugin().validate({ id: 1, name: "allowedAs", principal: "ci" })), { decision: "allow", principal: "ci=ci" });
});

test("config_required: 0 unless requireConfig()", () => {
  assert.equal(plugin().exports.plantgate_config_required(), 0);
});

test("response headers: canonical names, replaced values, in order", () => {
  const d = plugin().authorize({ path: "/headers" });
  assert.deepEqual(strip(d), { decision: "deny", status: 403, error: 40350, message: "no",
    headers: { "Retry-After": "2", RateLimit: "\"default\";r=0;t=1" } });
});

test("mistakes become faults that say what is wrong", () => {
  const p = plugin();
  const cases = {
    "/bad-code": "sdk: deny code 40001 is outside the plugin range (status 400, 401, 403, 429 or 503; last two digits 50–99)",
    "/deny400": "sdk: authorize may not deny with 40050; a phase may deny with status 403, 429 or 503, authorize also 401, validate also 400",
    "/header-bad": "sdk: response header \"Set-Cookie\" is not allowed (allowed: Retry-After, RateLimit, RateLimit-Policy)",
    "/header-value": "sdk: response header Retry-After value must be 1 to 1024 bytes of printable ASCII",
    "/unset": "sdk: handler returned a decision it never set (call allow, deny or fault)",
    "/fault": "broken state",
  };
  for (const [path, message] of Object.entries(cases)) {
    assert.deepEqual(strip(p.authorize({ path })), { decision: "fault", message }, path);
  }
  assert.deepEqual(strip(p.validate({ id: 1, name: "unauthorized" })),
    { decision: "fault", message: "sdk: validate may not deny with 40150; a phase may deny with status 403, 429 or 503, authorize also 401, validate also 400" });
});

test("text: cut at 1024 bytes before a character, lone surrogates as U+FFFD, %U and i64 min", () => {
  const p = plugin();
  const long = p.authorize({ path: "/long" });
  assert.equal(long.bytes, 1023);
  assert.equal(long.message, "a" + "é".repeat(511));
  assert.equal(p.authorize({ path: "/surrogate" }).message, "x\uFFFDyU+1F33F🌿-9223372036854775808");
});

test("log: UTF-8 lines at their level", () => {
  const p = plugin();
  p.configure('{"greeting": "hi"}');
  p.authorize({ path: "/log", route: "GET /plants/{id}" });
  assert.deepEqual(p.logs, [{ level: 0, text: "\"hi\" é" }, { level: 4, text: "GET /plants/{id}" }]);
});

test("abort logs one line through plantgate.log and traps", () => {
  const p = plugin();
  assert.throws(() => p.authorize({ path: "/abort" }), WebAssembly.RuntimeError);
  assert.equal(p.logs.length, 1);
  assert.match(p.logs[0].text, /^abort: boom at .*kit\.ts:\d+:\d+$/);
  assert.equal(p.logs[0].level, 8);
});

test("configure: accepted, refused with the handler's text", () => {
  assert.deepEqual(strip(plugin().configure('{"greeting": "x"}')), { decision: "allow" });
  assert.deepEqual(strip(plugin().configure("{}")), { decision: "fault", message: 'kit config: want {"greeting": "..."}' });
  assert.deepEqual(strip(plugin().configure("[1")), { decision: "fault", message: "kit config: unexpected end of JSON input" });
});

test("validate: plant, principal and caller", () => {
  const p = plugin();
  assert.deepEqual(strip(p.validate({ id: 9, name: "Fern", tag: "", principal: "ci", caller: "ci", scopes: "plants:write" })),
    { decision: "allow", principal: "ci|ci|writer|9|" });
  assert.deepEqual(strip(p.validate({ id: 9, name: "Fern" })), { decision: "allow", principal: "||reader|9|no tag" });
  assert.deepEqual(strip(p.validate({ id: 9, name: "deny" })), { decision: "deny", status: 400, error: 40060, message: "no plant named deny" });
});

test("buffer: grows for a large request and stays put for smaller ones", () => {
  const p = plugin();
  const a = p.exports.plantgate_buffer(100);
  assert.equal(p.exports.plantgate_buffer(4096), a);
  const b = p.exports.plantgate_buffer(100_000);
  assert.notEqual(b, 0);
  assert.equal(p.exports.plantgate_buffer(50_000), b);
  assert.equal(p.exports.plantgate_buffer(16 << 20 | 1), 0);
  const big = "n".repeat(90_000);
  assert.equal(p.validate({ id: 1, name: big }).principal, "||reader|1|no tag");
});

test("10,000 calls, allocating ones included, do not grow memory", () => {
  const p = plugin();
  for (let i = 0; i < 200; i++) p.authorize({ path: "/fields", headers: [["X-Tenant", "acme"]] });
  const pages = p.exports.memory.buffer.byteLength;
  for (let i = 0; i < 10_000; i++) p.authorize({ path: "/fields", headers: [["X-Tenant", "acme"]] });
  assert.equal(p.exports.memory.buffer.byteLength, pages);
});

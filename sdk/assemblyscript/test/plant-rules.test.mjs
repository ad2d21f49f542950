// The plant-rules example against the table every plant-rules must pass
// (testdata/expect/plant-rules.jsonl), its config, and its memory.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Plugin } from "./harness.mjs";

const wasm = new URL("../examples/plant-rules/build/20-plant-rules.wasm", import.meta.url).pathname;
const table = new URL("../../../testdata/expect/plant-rules.jsonl", import.meta.url).pathname;
const strip = ({ bytes, ...d }) => d;

test("every row of testdata/expect/plant-rules.jsonl", () => {
  const rows = readFileSync(table, "utf8").split("\n").filter((l) => l.trim())
    // Ids as BigInt: JSON.parse would round 9223372036854775807.
    .map((l) => JSON.parse(l.replace(/"id": (-?\d+)/, '"id": "$1"')));
  assert.ok(rows.length >= 19);
  const p = new Plugin(wasm);
  for (const row of rows) {
    assert.equal(row.phase, "validate");
    const { id, name, tag, principal } = row.input;
    const got = strip(p.validate({ id: BigInt(id), name, tag, principal }));
    for (const [k, v] of Object.entries(row.want)) assert.deepEqual(got[k], v, `${row.name}: ${k}`);
  }
});

test("config changes the bounds; bad configs are refused with Go's messages", () => {
  const p = new Plugin(wasm);
  assert.deepEqual(strip(p.configure('{"name_max": 3, "tag_min": 2, "tag_max": 2, "id_min": 10}')), { decision: "allow" });
  assert.equal(p.validate({ id: 9, name: "Fern" }).message, "id must be at least 10, got 9");
  assert.equal(p.validate({ id: 10, name: "Fern" }).message, "name must be 1–3 characters after trimming, got 4");
  assert.equal(p.validate({ id: 10, name: "Fe", tag: "abc" }).message, "tag must be exactly 2 characters after trimming, got 3");
  assert.equal(p.validate({ id: 10, name: " \u00a0Fe\u2003\u3000", tag: "ab" }).decision, "allow");
  const q = new Plugin(wasm);
  q.configure('{"allow_control": true}');
  assert.equal(q.validate({ id: 1, name: "a\tb" }).decision, "allow");
  assert.equal(q.validate({ id: 1, name: "\u0085" }).message, "name must be 1–100 characters after trimming, got 0");
  const refused = {
    "[1]": "plant-rules config: want a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage",
    '{"name_max": 1.5}': "plant-rules config: name_max must be an integer ≥ 0, got 1.5",
    '{"tag_min": -1}': "plant-rules config: tag_min must be an integer ≥ 0, got -1",
    '{"id_min": null}': "plant-rules config: id_min must be an integer ≥ 0, got null",
    '{"allow_control": 1}': "plant-rules config: allow_control must be true or false, got 1",
    '{"zeta": 1, "name_min": "x"}': "plant-rules config: name_min must be an integer ≥ 0, got \"x\"",
    '{"colour": 1}': "plant-rules config: unknown key \"colour\" (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)",
    '{"name_min": 5, "name_max": 4}': "plant-rules config: name_min (5) must not exceed name_max (4)",
    '{"tag_min": 51}': "plant-rules config: tag_min (51) must not exceed tag_max (50)",
    '{"name_min": 1': "plant-rules config: want a JSON object: unexpected end of JSON input",
  };
  for (const [config, message] of Object.entries(refused)) {
    assert.deepEqual(strip(new Plugin(wasm).configure(config)), { decision: "fault", message }, config);
  }
  for (const config of ["", "  null ", "{}"]) assert.deepEqual(strip(new Plugin(wasm).configure(config)), { decision: "allow" }, config);
});

test("control characters anywhere, as code points: C1 and after trimming space", () => {
  const p = new Plugin(wasm);
  assert.equal(p.validate({ id: 1, name: "🌿é\u009f" }).message, "name must not contain control characters, found U+009F at character 3");
  assert.equal(p.validate({ id: 1, name: "Fern", tag: "x\u007f" }).message, "tag must not contain control characters, found U+007F at character 2");
  assert.equal(p.validate({ id: 1, name: "Fern\n" }).error, 40052);
});

test("10,000 calls (allows and denies) do not grow memory: the example allocates nothing per call", () => {
  const p = new Plugin(wasm);
  const pages = p.exports.memory.buffer.byteLength;
  for (let i = 0; i < 5_000; i++) {
    assert.equal(p.validate({ id: 1, name: "Monstera", tag: "tropical" }).decision, "allow");
    assert.equal(p.validate({ id: 1, name: "Mon\u0007stera 🌿" }).error, 40052);
  }
  assert.equal(p.exports.memory.buffer.byteLength, pages);
});

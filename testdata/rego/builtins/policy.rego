# The builtins differential fixture: each case is one builtin call on
# fixed arguments. TestOPABuiltinsMatchOPAEval compares the value every
# case has in the module (through the host's builtins where OPA does not
# compile one in) with opa eval's, case by case: validate with the plant
# named after a case denies with [value] as its message, or with no
# message when the case is undefined.
package plantgate

import rego.v1

validate := {"allow": false, "code": 40099, "message": json.marshal([cases[input.plant.name]])}

t0 := time.parse_rfc3339_ns("2026-11-27T11:24:50.123456789+01:00")

cases["sprintf %s %d"] := sprintf("%s has %d plants", ["ci", 42])
cases["sprintf %v"] := sprintf("%v|%v|%v|%v", [{"b": [1, 2.5], "a": null}, {3, 1, 2}, "str", true])
cases["sprintf %q %x %.2f %5d %-4s|"] := sprintf("%q %x %.2f %5d %-4s|", ["tag \"x\"", 255, 3.14159, 42, "ab"])
cases["sprintf %e %g %08.3f %t"] := sprintf("%e %g %08.3f %t", [123456.789, 0.000012, -3.5, false])
cases["sprintf big"] := sprintf("%d %v", [12345678901234567890, 1e400])
cases["sprintf missing"] := sprintf("%s %s", ["one"])
cases["time.parse_rfc3339_ns"] := t0
cases["time.parse_ns"] := time.parse_ns("2006-01-02 15:04 MST", "2026-11-27 11:24 CET")
cases["time.parse_duration_ns"] := time.parse_duration_ns("1h2m3.5s")
cases["time.date"] := time.date(t0)
cases["time.date tz"] := time.date([t0, "Asia/Tokyo"])
cases["time.clock"] := time.clock([t0, "America/New_York"])
cases["time.weekday"] := time.weekday(t0)
cases["time.add_date"] := time.add_date(t0, 1, 2, 3)
cases["time.diff"] := time.diff(t0, time.parse_rfc3339_ns("2024-02-29T00:00:00Z"))
cases["time.format"] := time.format([t0, "Europe/Paris", "Mon Jan 2 15:04:05 2006"])
cases["time.format default"] := time.format(t0)
cases["regex.split"] := regex.split(`[,;]\s*`, "a, b;c,d")
cases["regex.find_n"] := regex.find_n(`[0-9]+`, "a1b22c333", 2)
cases["regex.replace"] := regex.replace("plant-42-x", `[0-9]+`, "N")
cases["regex.find_all_string_submatch_n"] := regex.find_all_string_submatch_n(`(\w)(\d)`, "a1 b2 c3", -1)
cases["regex.template_match"] := regex.template_match("urn:foo:{.*}", "urn:foo:bar:baz", "{", "}")
cases["regex.globs_match"] := regex.globs_match("a.a.[0-9]+z", ".b.b2359825792*594823z")
cases["regex.is_valid"] := [regex.is_valid("a+"), regex.is_valid("a(")]
cases["regex.match"] := regex.match(`^pl[a-z]+$`, "plants")
cases["semver.compare"] := [semver.compare("1.2.3", "1.10.0"), semver.compare("2.0.0-rc.1", "2.0.0")]
cases["semver.is_valid"] := [semver.is_valid("1.2.3-beta+7"), semver.is_valid("1.2")]
cases["units.parse"] := [units.parse("10K"), units.parse("1.5Mi"), units.parse("200m")]
cases["units.parse_bytes"] := [units.parse_bytes("1KiB"), units.parse_bytes("2.5GB"), units.parse_bytes("7")]
cases["json.patch"] := json.patch({"a": {"b": 1}}, [{"op": "add", "path": "/a/c", "value": 2}, {"op": "remove", "path": "/a/b"}])
cases["json.filter"] := json.filter({"a": {"b": 1, "c": 2}, "d": 3}, ["a/b", "d"])
cases["json.remove"] := json.remove({"a": {"b": 1, "c": 2}, "d": 3}, ["a/b"])
cases["json.match_schema"] := json.match_schema({"id": "x"}, {"type": "object", "properties": {"id": {"type": "integer"}}})
cases["json.verify_schema"] := json.verify_schema({"type": "object"})
cases["json.is_valid"] := [json.is_valid("{\"a\":1}"), json.is_valid("{a")]
cases["hex"] := [hex.encode("plant🌿"), hex.decode("706c616e74")]
cases["base64url"] := [base64url.encode_no_pad("plant??>"), base64url.encode("plant??>"), base64url.decode("cGxhbnQ_Pz4")]
cases["base64"] := [base64.encode("plant"), base64.decode("cGxhbnQ="), base64.is_valid("@@")]
cases["urlquery"] := [urlquery.encode("a b&c=d/é"), urlquery.decode("a+b%26c%3Dd"), urlquery.encode_object({"b": ["2", "1"], "a": "x y"}), urlquery.decode_object("a=1&b=2&a=3")]
cases["crypto digests"] := [crypto.md5("plant"), crypto.sha1("plant"), crypto.sha256("plant")]
cases["crypto.hmac"] := [crypto.hmac.sha256("plant", "key"), crypto.hmac.sha512("plant", "key"), crypto.hmac.md5("plant", "key"), crypto.hmac.sha1("plant", "key"), crypto.hmac.equal("a", "a")]
cases["yaml"] := [yaml.marshal({"a": [1, "two"]}), yaml.unmarshal("a: [1, two]\nb: {c: true}"), yaml.is_valid(": :")]
cases["glob.match"] := [glob.match("*.example.com", ["."], "api.example.com"), glob.match("api.**", [], "api.a.b"), glob.quote_meta("*.a")]
cases["strings"] := [strings.replace_n({"a": "1", "b": "2"}, "abc"), strings.reverse("plänt"), strings.count("banana", "a"), strings.any_prefix_match("plants", ["pl", "x"])]
cases["strings native"] := [upper("plänt"), lower("ÉTÉ"), trim_space("  \u00a0x\t"), count("日本"), substring("plänts", 1, 3), indexof("日本語", "語"), split("a,b", ",")]
cases["indexof_n"] := indexof_n("banana", "an")
cases["object.union_n"] := object.union_n([{"a": 1}, {"b": 2}, {"a": 3}])
cases["object.subset"] := object.subset({"a": 1, "b": {"c": 2}}, {"b": {"c": 2}})
# Sets are sorted: JSON spells a set as an array in no given order.
cases["net.cidr_merge"] := sort(net.cidr_merge(["192.0.2.0/25", "192.0.2.128/25", "10.0.0.1"]))
cases["net.cidr_contains_matches"] := net.cidr_contains_matches(["10.0.0.0/8"], ["10.1.2.3", "11.0.0.1"])
cases["net.cidr_is_valid"] := [net.cidr_is_valid("10.0.0.0/8"), net.cidr_is_valid("10.0.0.0/33")]
cases["graph"] := [sort(graph.reachable({"a": ["b"], "b": ["c"], "c": []}, ["a"])), graph.reachable_paths({"a": ["b"], "b": ["c"], "c": []}, ["a"])]
cases["uuid.parse"] := uuid.parse("00000000-0000-4000-8000-000000000000")
cases["io.jwt.decode"] := io.jwt.decode("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjaSJ9.2Bv9hJ4sZ8IJo_KQs0Lhs9bLkVMdGjsI7E8X7Q5XhkU")
cases["io.jwt.verify_hs256"] := io.jwt.verify_hs256("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjaSJ9.2Bv9hJ4sZ8IJo_KQs0Lhs9bLkVMdGjsI7E8X7Q5XhkU", "secret")
cases["numbers"] := [numbers.range_step(1, 10, 4), format_int(255, 16), round(2.5), ceil(-1.5), abs(-3), 7 / 2, 10 % 4]
cases["aggregates"] := [sum([1, 2.5]), product([2, 3]), max({1, 9}), min([4, 2]), sort(["b", "a"])]
cases["arrays"] := [array.reverse([1, 2, 3]), array.slice([1, 2, 3, 4], 1, 3)]
cases["conversions"] := [to_number("42.5"), to_number(true), type_name({1})]
cases["units.parse error"] := units.parse("ten")

// A plugin that drives every part of the kit, for test/kit.test.mjs: each
// authorize path picks one behaviour.

import {
  handleConfigure, handleAuthorize, handleValidate, Request, Plant, Decision, Utf8,
  allow, allowAs, deny, fault, unauthorized, unavailable, tooManyRequests, forbidden,
  decision, log, logUtf8, Level, lookupToken, TokenStatus, now, kvGet, kvSet, kvDelete,
  kvIncr, kvTake, kvTakeFixed, KVError, parseConfig, requireConfig,
} from "../../assembly";
export * from "../../assembly/exports";

let greeting = "hello";

handleConfigure(configure);
handleAuthorize(authorize);
handleValidate(validate);

function configure(raw: Utf8): string {
  const c = parseConfig(raw);
  if (c.error.length > 0) return "kit config: " + c.error;
  const g = c.get("greeting");
  if (g == null) return "kit config: want {\"greeting\": \"...\"}";
  greeting = g.rawString();
  return "";
}

function authorize(r: Request): Decision {
  if (r.path.equals("/log")) {
    log(Level.INFO, greeting + " é");
    logUtf8(Level.WARN, r.route);
    return allow();
  }
  if (r.path.equals("/fields")) {
    const t = r.header("x-tenant");
    return allowAs(r.method.toString()).text("|").utf8(r.route).text("|").int(r.hasPathID ? r.pathID : -1)
      .text("|").utf8(r.requestID).text("|").utf8(r.client).text("|").text(t == null ? "no tenant" : t.toString())
      .text("|").utf8(r.caller.name).text("|").text(r.caller.hasScope("plants:write") ? "writer" : "reader")
      .text("|").int(r.digest.len);
  }
  if (r.path.equals("/bad-code")) return deny(40001, "host code");
  if (r.path.equals("/deny400")) return deny(40050, "authorize cannot say 400");
  if (r.path.equals("/header-bad")) return allow().header("Set-Cookie", "a=b");
  if (r.path.equals("/header-value")) return allow().header("Retry-After", "1\n2");
  if (r.path.equals("/headers")) {
    return forbidden("no").header("retry-after", "1").header("RateLimit", "\"default\";r=0;t=1").header("Retry-After", "2");
  }
  if (r.path.equals("/unset")) return decision;
  if (r.path.equals("/fault")) return fault("broken state");
  if (r.path.equals("/long")) return deny(40350, "a").text("é".repeat(600));
  if (r.path.equals("/surrogate")) return deny(40350, "x\uD800y").codePoint(0x1f33f).rune(0x1f33f).int(i64.MIN_VALUE);
  if (r.path.equals("/abort")) {
    assert(r.method.equals("NEVER"), "boom");
    return allow();
  }
  if (r.path.equals("/kv")) {
    if (kvSet("k", "välue", 1000) != KVError.OK) return fault("set");
    const g = kvGet("k");
    if (g.err != KVError.OK) return fault("get");
    const value = g.value.toString(); // the view is reused by the next kvGet
    const missing = kvGet("missing").err;
    const n = kvIncr("n", 5, 60000);
    const d1 = kvDelete("k");
    const d2 = kvDelete("k");
    const bad = kvGet("").err;
    return allowAs(value).text("|").int(missing).text("|").int(n).text("|").int(d1).text("|").int(d2).text("|").int(bad);
  }
  if (r.path.equals("/budget")) {
    for (let i = 0; i < 8; i++) kvGet("k");
    return allowAs("ninth ").int(kvGet("k").err);
  }
  if (r.path.equals("/fixed")) {
    // Each take refills one Taken: read it before the next.
    const a = kvTakeFixed("f", 1, 1000).allowed;
    const b = kvTakeFixed("f", 1, 1000);
    const bAllowed = b.allowed;
    const reset = b.resetMs;
    const c = kvTake("f", 1, 1000).allowed; // a sliding take of the same key is another budget
    return allowAs(a ? "yes" : "no").text(bAllowed ? " yes" : " no").text(c ? " yes" : " no").text(" ").int(reset);
  }
  if (r.path.equals("/now")) return now() > 1_700_000_000_000 ? allow() : fault("clock");
  // The default: a bearer token, looked up, rate limited per token.
  if (r.credential.isEmpty()) return unauthorized("missing bearer token");
  const t = lookupToken(r.digest);
  if (t.status == TokenStatus.NOT_FOUND) return unauthorized("invalid token");
  if (t.status == TokenStatus.UNAVAILABLE) return unavailable("token store unavailable");
  if (t.status != TokenStatus.FOUND) return fault("token lookup failed");
  if (!t.valid(now())) return unauthorized("token revoked or expired");
  const name = t.name.toString();
  const k = kvTake("token:" + name, 2, 60000);
  if (k.err != KVError.OK) return unavailable("rate limit store unavailable");
  if (!k.allowed) {
    return tooManyRequests("rate limit reached").header("Retry-After", (k.resetMs / 1000 + 1).toString());
  }
  return allowAs(name).text(" ").utf8(t.scopes).text(" left=").int(k.remaining);
}

function validate(p: Plant): Decision {
  if (p.name.equals("allowedAs")) return allowAs(p.allowedAs.toString()).text("=").utf8(p.principal);
  if (p.name.equals("deny")) return deny(40060, "no plant named deny");
  if (p.name.equals("unauthorized")) return unauthorized("validate cannot say 401");
  return allowAs(p.principal.toString()).text("|").utf8(p.caller.name).text("|")
    .text(p.caller.hasScope("plants:write") ? "writer" : "reader").text("|").int(p.id)
    .text("|").text(p.hasTag ? p.tag.toString() : "no tag");
}

/* The C kit's own tests: exact records and messages, natively. The plugin
 * under test is this file: its handlers answer what the test case asks. */
#include "plantgate_testing.h"

#include <string.h>

static int mode;

pg_decision pg_on_validate(const pg_plant *p) {
	switch (mode) {
	case 0: return pg_allow();
	case 1: return pg_allow_as(p->name);
	case 2: return pg_deny_str(40060, p->name);
	case 3: return pg_denyf(40061, "%s-%d-%05u-%x-%X-%lld-%zu-%.*s-%c%%", "a", -7, 42u, 255u, 255u, (long long)INT64_MIN, (size_t)3, 2, "xyz", 'q');
	case 4: return pg_deny(40049, "x");
	case 5: return pg_deny(40150, "x");
	case 6: return pg_fault("broken");
	case 7: return pg_with_header(pg_allow(), "Set-Cookie", "a=b");
	case 8: return pg_with_header(pg_allow(), "Retry-After", "1\n");
	case 9: return pg_with_header(pg_with_header(pg_deny(42950, "slow down"), "retry-after", "1"), "RateLimit", "\"default\";r=0;t=1");
	case 10: {
		pg_decision d = {0};
		return d;
	}
	case 11: return pg_deny(40060, "bad \xff\xfe byte");
	case 12: {
		static char big[1500];
		memset(big, 'a', 1);
		for (int i = 1; i + 1 < 1500; i += 2)
			big[i] = (char)0xC3, big[i + 1] = (char)0xA9; /* é */
		return pg_deny_str(40060, (pg_str){big, 1499});
	}
	case 14:
		return pg_with_headerf(pg_with_headerf(pg_with_headerf(pg_denyf(42950, "wait %d", 3), "retry-after", "%d", 3),
		                                       "RateLimit", "\"m\";r=%d;t=%d", 0, 3), "Retry-After", "%d", 4);
	case 15:
		return pg_with_headerf(pg_allow(), "RateLimit", "%300d", 1);
	case 13: {
		int ok = p->has_tag && p->tag.len == 0 && pg_str_eq(p->allowed_as, "ci") && pg_str_eq(p->caller.name, "ci") &&
		         pg_has_scope(p->caller.scopes, "plants:write") && !pg_has_scope(p->caller.scopes, "plants") && p->id == -3;
		return ok ? pg_allow() : pg_fault("fields");
	}
	}
	return pg_fault("no such mode");
}

pg_decision pg_on_authorize(const pg_request *r) {
	pg_str v;
	int ok = pg_str_eq(r->method, "DELETE") && pg_str_eq(r->path, "/plants/42") && pg_str_eq(r->credential, "tok") &&
	         pg_str_eq(r->route, "DELETE /plants/{id}") && r->has_path_id && r->path_id == 42 &&
	         pg_str_eq(r->request_id, "rid") && pg_str_eq(r->client, "192.0.2.7") &&
	         pg_header(r, "x-tenant", &v) && pg_str_eq(v, "blue") && !pg_header(r, "X-Other", &v) &&
	         r->digest && r->digest[0] == 7 && pg_str_eq(r->caller.name, "ci");
	if (mode == 1)
		return pg_deny(40050, "x");
	return ok ? pg_allow_as(PG_STR("ci")) : pg_fault("fields");
}

int main(void) {
	static const char *want[] = {
		"allow",
		"allow as Fern",
		"deny 40060: Fern",
		"deny 40061: a--7-00042-ff-FF--9223372036854775808-3-xy-q%",
		"fault: sdk: deny code 40049 is outside the plugin ranges 40050–40099, 40150–40199, 40350–40399, 42950–42999, 50350–50399",
		"fault: sdk: validate may not deny with 40150; it may use 40050–40099, 40350–40399, 42950–42999, 50350–50399",
		"fault: broken",
		"fault: sdk: response header \"Set-Cookie\" is not allowed; see docs/abi.md",
		"fault: sdk: response header Retry-After value must be 1 to 1024 bytes of printable ASCII",
		"deny 42950: slow down",
		"fault: sdk: handler returned an unset pg_decision",
		"deny 40060: bad \xef\xbf\xbd byte",
	};
	pg_plant fern = {.id = 1, .name = PG_STR("Fern")};
	for (mode = 0; mode < (int)(sizeof want / sizeof *want); mode++)
		PGT_EXPECT(pgt_validate(&fern), want[mode]);

	/* Response headers: canonical names, the record byte for byte. */
	mode = 9;
	pgt_outcome o = pgt_validate(&fern);
	const char rec[] = "\x01\x01\x00\x00\xc6\xa7\x00\x00" "\x36\x00\x00\x00"
	                   "\x0b\x00\x00\x00Retry-After\x01\x00\x00\x00" "1"
	                   "\x09\x00\x00\x00RateLimit\x11\x00\x00\x00\"default\";r=0;t=1" "slow down";
	PGT_CHECK(o.record_len == sizeof rec - 1 && memcmp(o.record, rec, sizeof rec - 1) == 0);
	PGT_CHECK(o.nhdr == 2 && strcmp(o.hdr[0][0], "Retry-After") == 0 && strcmp(o.hdr[1][1], "\"default\";r=0;t=1") == 0);

	/* Formatted header values. */
	mode = 14;
	o = pgt_validate(&fern);
	PGT_EXPECT(o, "deny 42950: wait 3");
	PGT_CHECK(o.nhdr == 2 && strcmp(o.hdr[0][0], "Retry-After") == 0 && strcmp(o.hdr[0][1], "4") == 0 &&
	          strcmp(o.hdr[1][0], "RateLimit") == 0 && strcmp(o.hdr[1][1], "\"m\";r=0;t=3") == 0);
	mode = 15;
	PGT_EXPECT(pgt_validate(&fern), "fault: sdk: formatted response header values exceed 256 bytes");

	/* Text over PG_MAX_TEXT is cut before the character that crosses it. */
	mode = 12;
	o = pgt_validate(&fern);
	PGT_CHECK(strlen(o.text) == 1023 && o.invalid == NULL);

	/* Every field of a validate message, and one without a caller (ABI 1). */
	mode = 13;
	pg_plant full = {.id = -3, .name = PG_STR("n"), .has_tag = 1, .tag = PG_STR(""), .allowed_as = PG_STR("ci"),
	                 .caller = {PG_STR("ci"), PG_STR("plants:read plants:write")}};
	PGT_EXPECT(pgt_validate(&full), "allow");
	uint8_t m[256];
	mode = 1;
	uint32_t n = pgt_encode_validate(&fern, m, sizeof m);
	PGT_EXPECT(pgt_validate_message(m, n - 8), "allow as Fern");
	PGT_EXPECT(pgt_validate_message(m, 13), "fault: sdk: validate request: message shorter than its layout");

	/* Authorize: every field, and a deny the phase may not use. */
	uint8_t digest[32];
	memset(digest, 7, sizeof digest);
	pgt_request r = {.method = "DELETE", .path = "/plants/42", .credential = "tok", .digest = digest, .route = "DELETE /plants/{id}",
	                 .has_path_id = 1, .path_id = 42, .request_id = "rid", .client = "192.0.2.7",
	                 .headers = {{"X-Tenant", "blue"}}, .principal = "ci", .scopes = "plants:write"};
	mode = 0;
	PGT_EXPECT(pgt_authorize(&r), "allow as ci");
	mode = 1;
	PGT_EXPECT(pgt_authorize(&r), "fault: sdk: authorize may not deny with 40050; it may use 40150–40199, 40350–40399, 42950–42999, 50350–50399");

	/* No configure handler: empty, null and {} only. */
	PGT_EXPECT(pgt_configure(" null "), "allow");
	PGT_EXPECT(pgt_configure("{}"), "allow");
	PGT_EXPECT(pgt_configure("{\"a\":1}"), "fault: the plugin takes no config, got {\"a\":1}: remove \"config\" from its sidecar, or handle it with pg_on_configure");
	PGT_CHECK(pg__phases() == (PG_PHASE_AUTHORIZE | PG_PHASE_VALIDATE));

	/* Token lookup. */
	uint8_t d9[32], buf[512], small[8];
	memset(d9, 9, sizeof d9);
	pgt_add_token(d9, 1, 2, 0, "ci", "plants:read plants:write");
	pg_token t;
	PGT_CHECK(pg_lookup_token(d9, buf, sizeof buf, &t) == 0 && pg_str_eq(t.name, "ci") && pg_str_eq(t.scopes, "plants:read plants:write") &&
	          t.created_ms == 1 && t.expires_ms == 2 && !t.revoked && memcmp(t.digest, d9, 32) == 0);
	PGT_CHECK(pg_lookup_token(d9, small, sizeof small, &t) == 52 + 4 + 2 + 4 + 24);
	PGT_CHECK(pg_lookup_token(digest, buf, sizeof buf, &t) == PG_NOT_FOUND);

	/* KV. */
	pgt_now_ms = 1500;
	uint8_t v[16];
	PGT_CHECK(pg_kv_set(PG_STR("k"), (const uint8_t *)"v", 1, 0) == 0);
	PGT_CHECK(pg_kv_get(PG_STR("k"), v, sizeof v) == 1 && v[0] == 'v');
	PGT_CHECK(pg_kv_get(PG_STR("nope"), v, sizeof v) == PG_NOT_FOUND);
	PGT_CHECK(pg_kv_get(PG_STR(""), v, sizeof v) == PG_BAD_ARGUMENT);
	PGT_CHECK(pg_kv_delete(PG_STR("k")) == 1 && pg_kv_delete(PG_STR("k")) == 0);
	PGT_CHECK(pg_kv_incr(PG_STR("c"), 5, 1000) == 5);
	pg_taken tk;
	PGT_CHECK(pg_kv_take_fixed(PG_STR("t"), 2, 1000, &tk) == 0 && tk.allowed && tk.remaining == 1 && tk.reset_ms == 500);
	PGT_CHECK(pg_kv_take_fixed(PG_STR("t"), 2, 1000, &tk) == 0 && tk.allowed && tk.remaining == 0);
	PGT_CHECK(pg_kv_take_fixed(PG_STR("t"), 2, 1000, &tk) == 0 && !tk.allowed);
	/* Sliding: 2 per 60 s in slots of 3 s; units taken at 1.5 s free at 63 s. */
	PGT_CHECK(pg_kv_take(PG_STR("s"), 2, 60000, &tk) == 0 && tk.allowed && tk.remaining == 1 && tk.reset_ms == 61500);
	PGT_CHECK(pg_kv_take(PG_STR("s"), 2, 60000, &tk) == 0 && tk.allowed && tk.remaining == 0);
	pgt_now_ms = 62999;
	PGT_CHECK(pg_kv_take(PG_STR("s"), 2, 60000, &tk) == 0 && !tk.allowed && tk.reset_ms == 1);
	pgt_now_ms = 63000;
	PGT_CHECK(pg_kv_take(PG_STR("s"), 2, 60000, &tk) == 0 && tk.allowed);
	pgt_down = 1;
	PGT_CHECK(pg_kv_take(PG_STR("t"), 2, 1000, &tk) == PG_UNAVAILABLE);
	PGT_CHECK(pg_lookup_token(d9, buf, sizeof buf, &t) == PG_UNAVAILABLE);

	/* Case-insensitive (ASCII) comparison and search: what authors wrote
	 * loops for (issue 33). Bytes past ASCII compare as they are. */
	PGT_CHECK(pg_str_eq_fold(PG_STR("WeEd"), "weed") && !pg_str_eq_fold(PG_STR("weeds"), "weed") && pg_str_eq_fold(PG_STR(""), ""));
	PGT_CHECK(pg_str_eq_fold(PG_STR("\xc3\xa9T\xc3\xa9"), "\xc3\xa9t\xc3\xa9") && !pg_str_eq_fold(PG_STR("\xc3\x89"), "\xc3\xa9"));
	PGT_CHECK(pg_str_index_fold(PG_STR("Common WEED, tall"), "weed") == 7);
	PGT_CHECK(pg_str_index_fold(PG_STR("weedweed"), "WEED") == 0);
	PGT_CHECK(pg_str_index_fold(PG_STR("wee"), "weed") == -1 && pg_str_index_fold(PG_STR("fern"), "weed") == -1);
	PGT_CHECK(pg_str_index_fold(PG_STR("abc"), "") == 0 && pg_str_index_fold((pg_str){0, 0}, "a") == -1);
	PGT_CHECK(pg_str_has_fold(PG_STR("Dandelion (a Weed)"), "weed") && !pg_str_has_fold(PG_STR("Fern"), "weed"));
	/* Only the given length is read: a view into a larger buffer. */
	PGT_CHECK(!pg_str_has_fold((pg_str){"fernWEED", 4}, "weed"));

	/* Log. */
	pg_logf(PG_LOG_WARN, "n=%d %s", 3, "x");
	PGT_CHECK(strcmp(pgt_last_log, "n=3 x") == 0 && pgt_last_level == PG_LOG_WARN);
	return pgt_done("sdk (C)");
}

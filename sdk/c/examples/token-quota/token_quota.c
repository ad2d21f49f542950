/*
 * token-quota in C: an authorize plugin that shows the kit's host calls
 * against a real gateway. It looks the bearer token up in the gateway's
 * token store, refuses a revoked or unknown one, and lets each token make
 * "limit" requests a minute (config {"limit": N}, default 2) through the
 * KV store, answering 429 with Retry-After once spent.
 */
#include "plantgate.h"

#include <string.h>

static long long limit = 2;

/* The token record's buffer is static: the allow names the token, and its
 * text must outlive the handler. */
static uint8_t token_buf[512];

const char *pg_on_configure(pg_str raw) {
	char s[64];
	uint32_t k = 0;
	for (uint32_t i = 0; i < raw.len && k < sizeof s - 1; i++)
		if (raw.ptr[i] != ' ' && raw.ptr[i] != '\t' && raw.ptr[i] != '\n' && raw.ptr[i] != '\r')
			s[k++] = raw.ptr[i];
	s[k] = 0;
	if (k == 0 || strcmp(s, "null") == 0 || strcmp(s, "{}") == 0)
		return NULL;
	long long n = 0;
	const char *p = s + strlen("{\"limit\":");
	if (strncmp(s, "{\"limit\":", strlen("{\"limit\":")) != 0 || *p < '1' || *p > '9')
		return pg_textf("token-quota config: want {\"limit\": N >= 1}, got %s", s);
	for (; *p >= '0' && *p <= '9' && n < 1000000; p++)
		n = n * 10 + (*p - '0');
	if (strcmp(p, "}") != 0)
		return pg_textf("token-quota config: want {\"limit\": N >= 1}, got %s", s);
	limit = n;
	return NULL;
}

pg_decision pg_on_authorize(const pg_request *r) {
	if (!r->digest)
		return pg_deny(40150, "missing bearer token");
	pg_token t;
	int32_t n = pg_lookup_token(r->digest, token_buf, sizeof token_buf, &t);
	if (n == PG_NOT_FOUND)
		return pg_deny(40151, "invalid token");
	if (n != 0)
		return pg_deny(PG_CODE_UNAVAILABLE, "token store unavailable");
	if (t.revoked || memcmp(t.digest, r->digest, PG_DIGEST_SIZE) != 0)
		return pg_deny(40151, "invalid token");
	/* The key is the token's digest prefix, not its name: a name is free text. */
	char key[17] = "tok:";
	for (int i = 0; i < 6; i++) {
		key[4 + 2 * i] = "0123456789abcdef"[r->digest[i] >> 4];
		key[5 + 2 * i] = "0123456789abcdef"[r->digest[i] & 15];
	}
	pg_taken tk;
	if (pg_kv_take_fixed((pg_str){key, 16}, limit, 60000, &tk) != 0)
		return pg_deny(PG_CODE_UNAVAILABLE, "quota store unavailable");
	long long secs = (tk.reset_ms + 999) / 1000;
	if (!tk.allowed)
		return pg_with_headerf(pg_denyf(42950, "%lld requests a minute; retry in %lld s", limit, secs), "Retry-After", "%lld", secs);
	return pg_with_headerf(pg_allow_as(t.name), "RateLimit", "\"minute\";r=%lld;t=%lld", (long long)tk.remaining, secs);
}

/* plantgate_testing.c: the host's side, natively, for unit tests. See
 * plantgate_testing.h. Uses stdio; never linked into a module. */
#include "plantgate_testing.h"

#include <stdio.h>
#include <string.h>

int pgt_down;
int64_t pgt_now_ms;
char pgt_last_log[PG_MAX_LOG + 1];
int32_t pgt_last_level;
int pgt_logs;
int pgt_failures;

enum { MAX_TOKENS = 8, MAX_KV = 64 };
static struct {
	uint8_t digest[32];
	uint8_t rec[512];
	uint32_t len;
} tokens[MAX_TOKENS];
static int ntokens;
static struct {
	char key[PG_MAX_KV_KEY];
	uint32_t key_len;
	uint8_t val[PG_MAX_KV_VALUE];
	uint32_t val_len;
	int64_t window; /* -1: a value, else a counter's window index */
	int64_t count;
} kv[MAX_KV];
static int nkv;
/* Sliding takes: when each unit counted frees, per key and window. */
enum { MAX_SLIDING = 8, MAX_UNITS = 64 };
static struct {
	char key[PG_MAX_KV_KEY];
	uint32_t key_len;
	int64_t window;
	int64_t frees[MAX_UNITS];
	int n;
} sliding[MAX_SLIDING];
static int nsliding;

void pgt_reset(void) {
	pgt_down = 0, pgt_now_ms = 0, pgt_logs = 0, ntokens = 0, nkv = 0, nsliding = 0;
	pgt_last_log[0] = 0;
}

static void put32(uint8_t *b, uint32_t v) { b[0] = (uint8_t)v, b[1] = (uint8_t)(v >> 8), b[2] = (uint8_t)(v >> 16), b[3] = (uint8_t)(v >> 24); }
static void put64(uint8_t *b, uint64_t v) { put32(b, (uint32_t)v), put32(b + 4, (uint32_t)(v >> 32)); }
static uint32_t get32(const uint8_t *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }

static uint32_t putstr(uint8_t *b, uint32_t n, const char *s, uint32_t len) {
	put32(b + n, len);
	if (len > 0) /* a zero pg_str has a NULL ptr, which memcpy may not take */
		memcpy(b + n + 4, s, len);
	return n + 4 + len;
}

void pgt_add_token(const uint8_t digest[32], int64_t created_ms, int64_t expires_ms, int revoked, const char *name, const char *scopes) {
	uint8_t *r = tokens[ntokens].rec;
	memcpy(tokens[ntokens].digest, digest, 32);
	put64(r, (uint64_t)created_ms);
	put64(r + 8, (uint64_t)expires_ms);
	put32(r + 16, revoked ? 1 : 0);
	memcpy(r + 20, digest, 32);
	uint32_t n = putstr(r, 52, name, (uint32_t)strlen(name));
	tokens[ntokens++].len = putstr(r, n, scopes, (uint32_t)strlen(scopes));
}

/* ---- host functions ---- */

void pg__host_log(int32_t level, const char *ptr, uint32_t len) {
	if (len > PG_MAX_LOG)
		len = PG_MAX_LOG;
	memcpy(pgt_last_log, ptr, len);
	pgt_last_log[len] = 0;
	pgt_last_level = level;
	pgt_logs++;
}

int32_t pg__host_token_lookup(const uint8_t *hash, uint32_t hash_len, uint8_t *out, uint32_t cap) {
	if (hash_len != 32)
		return PG_BAD_ARGUMENT;
	if (pgt_down)
		return PG_UNAVAILABLE;
	for (int i = 0; i < ntokens; i++)
		if (memcmp(tokens[i].digest, hash, 32) == 0) {
			if (tokens[i].len <= cap)
				memcpy(out, tokens[i].rec, tokens[i].len);
			return (int32_t)tokens[i].len;
		}
	return PG_NOT_FOUND;
}

static int find(const char *key, uint32_t len, int64_t window) {
	for (int i = 0; i < nkv; i++)
		if (kv[i].key_len == len && kv[i].window == window && memcmp(kv[i].key, key, len) == 0)
			return i;
	return -1;
}

static int add(const char *key, uint32_t len, int64_t window) {
	int i = find(key, len, window);
	if (i < 0 && nkv < MAX_KV) {
		i = nkv++;
		memcpy(kv[i].key, key, len);
		kv[i].key_len = len, kv[i].window = window, kv[i].count = 0, kv[i].val_len = 0;
	}
	return i;
}

static int bad_key(uint32_t len) { return len == 0 || len > PG_MAX_KV_KEY; }

int32_t pg__host_kv_get(const char *key, uint32_t key_len, uint8_t *out, uint32_t cap) {
	if (bad_key(key_len))
		return PG_BAD_ARGUMENT;
	if (pgt_down)
		return PG_UNAVAILABLE;
	int i = find(key, key_len, -1);
	if (i < 0)
		return PG_NOT_FOUND;
	if (kv[i].val_len <= cap)
		memcpy(out, kv[i].val, kv[i].val_len);
	return (int32_t)kv[i].val_len;
}

int32_t pg__host_kv_set(const char *key, uint32_t key_len, const uint8_t *val, uint32_t val_len, int64_t ttl_ms) {
	if (bad_key(key_len) || val_len > PG_MAX_KV_VALUE || ttl_ms < 0 || ttl_ms > PG_MAX_KV_TTL_MS)
		return PG_BAD_ARGUMENT;
	if (pgt_down)
		return PG_UNAVAILABLE;
	int i = add(key, key_len, -1);
	memcpy(kv[i].val, val, val_len);
	kv[i].val_len = val_len;
	return 0;
}

int32_t pg__host_kv_delete(const char *key, uint32_t key_len) {
	if (bad_key(key_len))
		return PG_BAD_ARGUMENT;
	if (pgt_down)
		return PG_UNAVAILABLE;
	int i = find(key, key_len, -1);
	if (i < 0)
		return 0;
	kv[i] = kv[--nkv];
	return 1;
}

int64_t pg__host_kv_incr(const char *key, uint32_t key_len, int64_t delta, int64_t window_ms) {
	if (bad_key(key_len) || window_ms < 1 || window_ms > PG_MAX_KV_TTL_MS)
		return PG_BAD_ARGUMENT;
	if (pgt_down)
		return PG_UNAVAILABLE;
	int i = add(key, key_len, pgt_now_ms / window_ms);
	return kv[i].count += delta;
}

int64_t pg__host_kv_take(const char *key, uint32_t key_len, int64_t limit, int64_t window_ms) {
	if (bad_key(key_len) || limit < 1 || window_ms < 1 || window_ms > PG_MAX_KV_TTL_MS)
		return PG_BAD_ARGUMENT;
	if (pgt_down)
		return PG_UNAVAILABLE;
	int64_t w = pgt_now_ms / window_ms, reset = (w + 1) * window_ms - pgt_now_ms;
	int i = add(key, key_len, w);
	if (kv[i].count >= limit)
		return 1LL << 62 | reset;
	kv[i].count++;
	return (limit - kv[i].count) << 32 | reset;
}

/* kv_take_sliding, exactly: a unit taken in slot s (of ceil(window/20)
 * ms) frees at the end of slot s + slots. */
int64_t pg__host_kv_take_sliding(const char *key, uint32_t key_len, int64_t limit, int64_t window_ms) {
	if (bad_key(key_len) || limit < 1 || window_ms < 1 || window_ms > PG_MAX_KV_TTL_MS)
		return PG_BAD_ARGUMENT;
	if (pgt_down)
		return PG_UNAVAILABLE;
	int i = 0;
	while (i < nsliding && !(sliding[i].key_len == key_len && sliding[i].window == window_ms && memcmp(sliding[i].key, key, key_len) == 0))
		i++;
	if (i == nsliding) {
		if (nsliding == MAX_SLIDING)
			return PG_UNAVAILABLE;
		memcpy(sliding[i].key, key, key_len);
		sliding[i].key_len = key_len, sliding[i].window = window_ms, sliding[i].n = 0;
		nsliding++;
	}
	int64_t slot = (window_ms + PG_KV_SLIDING_SLOTS - 1) / PG_KV_SLIDING_SLOTS, slots = (window_ms + slot - 1) / slot;
	int k = 0;
	for (int j = 0; j < sliding[i].n; j++)
		if (sliding[i].frees[j] > pgt_now_ms)
			sliding[i].frees[k++] = sliding[i].frees[j];
	sliding[i].n = k;
	int denied = k >= limit || k == MAX_UNITS;
	if (!denied)
		sliding[i].frees[sliding[i].n++] = (pgt_now_ms / slot + 1 + slots) * slot;
	int64_t first = sliding[i].frees[0];
	for (int j = 1; j < sliding[i].n; j++)
		if (sliding[i].frees[j] < first)
			first = sliding[i].frees[j];
	if (denied)
		return 1LL << 62 | (first - pgt_now_ms);
	return (limit - sliding[i].n) << 32 | (first - pgt_now_ms);
}

/* ---- messages and records ---- */

uint32_t pgt_encode_validate(const pg_plant *p, uint8_t *b, uint32_t cap) {
	(void)cap;
	put64(b, (uint64_t)p->id);
	put32(b + 8, p->has_tag ? 1 : 0);
	uint32_t n = putstr(b, 12, p->name.ptr, p->name.len);
	n = putstr(b, n, p->tag.ptr, p->tag.len);
	n = putstr(b, n, p->allowed_as.ptr, p->allowed_as.len);
	n = putstr(b, n, p->caller.name.ptr, p->caller.name.len);
	return putstr(b, n, p->caller.scopes.ptr, p->caller.scopes.len);
}

static uint8_t msg[1 << 16];
static uint8_t rec[PG_MAX_DECISION];

/* parse checks a record as the host does. */
static pgt_outcome parse(uint32_t n) {
	pgt_outcome o;
	memset(&o, 0, sizeof o);
	if (n == 0)
		return o; /* allow, no record */
	o.has_record = 1;
	o.record_len = n;
	memcpy(o.record, rec, n);
	if (n < 8) {
		o.invalid = "record shorter than its header";
		return o;
	}
	o.verdict = rec[0];
	o.code = (int32_t)get32(rec + 4);
	uint32_t t = 8;
	if (rec[1] & PG_DECISION_HEADERS) {
		uint32_t block = get32(rec + 8), i = 12;
		if (block > n - 12 || block > PG_MAX_HEADER_BLOCK) {
			o.invalid = "header block longer than the record or PG_MAX_HEADER_BLOCK";
			return o;
		}
		while (i < 12 + block && o.nhdr < 3) {
			for (int k = 0; k < 2; k++) {
				uint32_t l = get32(rec + i);
				memcpy(o.hdr[o.nhdr][k], rec + i + 4, l);
				o.hdr[o.nhdr][k][l] = 0;
				i += 4 + l;
			}
			o.nhdr++;
		}
		t = 12 + block;
	}
	if (n - t > PG_MAX_TEXT)
		o.invalid = "text longer than PG_MAX_TEXT";
	memcpy(o.text, rec + t, n - t);
	o.text[n - t] = 0;
	if (o.verdict > PG_VERDICT_FAULT)
		o.invalid = "unknown verdict";
	if (o.verdict == PG_VERDICT_DENY && !pg_is_valid_deny_code(o.code))
		o.invalid = "deny code outside the plugin range";
	return o;
}

pgt_outcome pgt_validate(const pg_plant *p) {
	uint32_t n = pgt_encode_validate(p, msg, sizeof msg);
	return parse(pg__validate(msg, n, rec));
}

pgt_outcome pgt_validate_message(const uint8_t *m, uint32_t len) {
	memcpy(msg, m, len);
	return parse(pg__validate(msg, len, rec));
}

static uint32_t putc_(uint8_t *b, uint32_t n, const char *s) { return putstr(b, n, s ? s : "", s ? (uint32_t)strlen(s) : 0); }

pgt_outcome pgt_authorize(const pgt_request *r) {
	uint32_t n = putc_(msg, 0, r->method);
	n = putc_(msg, n, r->path);
	n = putc_(msg, n, r->credential);
	n = putstr(msg, n, (const char *)r->digest, r->digest ? 32 : 0);
	n = putc_(msg, n, r->route);
	put32(msg + n, r->has_path_id ? 1 : 0);
	put64(msg + n + 4, r->has_path_id ? (uint64_t)r->path_id : 0);
	n += 12;
	n = putc_(msg, n, r->request_id);
	n = putc_(msg, n, r->client);
	uint32_t mark = n;
	n += 4;
	for (int i = 0; i < 16 && r->headers[i][0]; i++) {
		n = putc_(msg, n, r->headers[i][0]);
		n = putc_(msg, n, r->headers[i][1]);
	}
	put32(msg + mark, n - mark - 4);
	n = putc_(msg, n, r->principal);
	n = putc_(msg, n, r->scopes);
	return parse(pg__authorize(msg, n, rec));
}

pgt_outcome pgt_configure(const char *json) {
	uint32_t n = (uint32_t)strlen(json);
	memcpy(msg, json, n);
	return parse(pg__configure(msg, n, rec));
}

const char *pgt_string(const pgt_outcome *o) {
	static char s[PG_MAX_TEXT + 64];
	if (o->invalid)
		snprintf(s, sizeof s, "invalid: %s", o->invalid);
	else if (o->verdict == PG_VERDICT_ALLOW)
		snprintf(s, sizeof s, o->text[0] ? "allow as %s" : "allow", o->text);
	else if (o->verdict == PG_VERDICT_DENY)
		snprintf(s, sizeof s, "deny %d: %s", (int)o->code, o->text);
	else
		snprintf(s, sizeof s, "fault: %s", o->text);
	return s;
}

void pgt_expect(pgt_outcome o, const char *want, const char *file, int line) {
	const char *got = pgt_string(&o);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "%s:%d:\n  got  %s\n  want %s\n", file, line, got, want);
		pgt_failures++;
	}
}

void pgt_check(int ok, const char *what, const char *file, int line) {
	if (!ok) {
		fprintf(stderr, "%s:%d: %s\n", file, line, what);
		pgt_failures++;
	}
}

int pgt_done(const char *suite) {
	printf("%s: %s\n", suite, pgt_failures ? "FAIL" : "ok");
	return pgt_failures ? 1 : 0;
}

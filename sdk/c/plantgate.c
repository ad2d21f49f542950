/*
 * plantgate.c: the guest side of every export, the decision record, the
 * host functions and a small formatter. See plantgate.h and docs/abi.md.
 * Uses no libc function but memcpy and malloc (only to grow the request
 * buffer past 4 KiB), so a module stays small and imports nothing from WASI.
 */
#include "plantgate.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A phase is served when its handler is linked in. */
#pragma weak pg_on_validate
#pragma weak pg_on_authorize
#pragma weak pg_on_configure

static const char *const response_headers[3] = {"Retry-After", "RateLimit", "RateLimit-Policy"};

pg_str pg_cstr(const char *s) { return (pg_str){s, (uint32_t)strlen(s)}; }

int pg_str_eq(pg_str a, const char *b) {
	size_t n = strlen(b);
	return a.len == n && memcmp(a.ptr, b, n) == 0;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int fold_eq(const char *a, uint32_t an, const char *b, uint32_t bn) {
	if (an != bn)
		return 0;
	for (uint32_t i = 0; i < an; i++)
		if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
			return 0;
	return 1;
}

int pg_str_eq_fold(pg_str a, const char *b) { return fold_eq(a.ptr, a.len, b, (uint32_t)strlen(b)); }

int32_t pg_str_index_fold(pg_str s, const char *needle) {
	uint32_t n = (uint32_t)strlen(needle);
	if (n > s.len)
		return -1;
	for (uint32_t i = 0; i + n <= s.len; i++)
		if (fold_eq(s.ptr + i, n, needle, n))
			return (int32_t)i;
	return -1;
}

int pg_str_has_fold(pg_str s, const char *needle) { return pg_str_index_fold(s, needle) >= 0; }

/* ---- the formatter ---- */

static char text_buf[PG_MAX_TEXT + 1];

typedef struct {
	char *buf;
	uint32_t cap, len;
	int full;
} writer;

static void put(writer *w, const char *s, uint32_t n) {
	if (w->full)
		return;
	if (n > w->cap - w->len) {
		n = w->cap - w->len;
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) /* s[n] continues a character */
			n--;
		w->full = 1;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static void put_uint(writer *w, uint64_t v, unsigned base, int upper, int width, char pad) {
	char tmp[24];
	int n = 0;
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	do {
		tmp[n++] = digits[v % base];
		v /= base;
	} while (v);
	while (width-- > n)
		put(w, &pad, 1);
	while (n)
		put(w, &tmp[--n], 1);
}

static void vformat(writer *w, const char *f, va_list ap) {
	while (*f) {
		const char *p = f;
		while (*p && *p != '%')
			p++;
		put(w, f, (uint32_t)(p - f));
		if (!*p)
			break;
		f = p + 1;
		char pad = ' ';
		int width = 0, prec = -1, size = 0;
		if (*f == '0')
			pad = '0', f++;
		while (*f >= '0' && *f <= '9')
			width = width * 10 + (*f++ - '0');
		if (f[0] == '.' && f[1] == '*')
			prec = va_arg(ap, int), f += 2;
		while (*f == 'l' || *f == 'z' || *f == 'j')
			size += (*f++ == 'l') ? 1 : 2;
		switch (*f) {
		case 's': {
			const char *s = va_arg(ap, const char *);
			put(w, s, prec >= 0 ? (uint32_t)prec : (uint32_t)strlen(s));
			break;
		}
		case 'c': {
			char c = (char)va_arg(ap, int);
			put(w, &c, 1);
			break;
		}
		case 'd':
		case 'i': {
			int64_t v = size >= 2 ? va_arg(ap, long long) : size == 1 ? va_arg(ap, long) : va_arg(ap, int);
			uint64_t u = (uint64_t)v;
			if (v < 0) {
				put(w, "-", 1);
				u = 0 - u;
				width--;
			}
			put_uint(w, u, 10, 0, width, pad);
			break;
		}
		case 'u':
		case 'x':
		case 'X': {
			uint64_t v = size >= 2 ? va_arg(ap, unsigned long long) : size == 1 ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
			put_uint(w, v, *f == 'u' ? 10 : 16, *f == 'X', width, pad);
			break;
		}
		case '%':
			put(w, "%", 1);
			break;
		default: /* an unknown conversion is shown, not guessed at */
			put(w, "%?", 2);
			if (!*f)
				return;
		}
		f++;
	}
}

const char *pg_textf(const char *format, ...) {
	writer w = {text_buf, PG_MAX_TEXT, 0, 0};
	va_list ap;
	va_start(ap, format);
	vformat(&w, format, ap);
	va_end(ap);
	text_buf[w.len] = 0;
	return text_buf;
}

uint32_t pg_formatf(char *buf, uint32_t cap, const char *format, ...) {
	writer w = {buf, cap - 1, 0, 0};
	va_list ap;
	va_start(ap, format);
	vformat(&w, format, ap);
	va_end(ap);
	buf[w.len] = 0;
	return w.len;
}

/* ---- decisions ---- */

enum { KIND_UNSET, KIND_ALLOW, KIND_DENY, KIND_FAULT };

int pg_is_valid_deny_code(int32_t code) {
	switch (code / 100) {
	case 400: case 401: case 403: case 429: case 503:
		return code % 100 >= 50;
	}
	return 0;
}

const char *pg_deny_ranges(uint32_t phase) {
	if (phase == PG_PHASE_AUTHORIZE)
		return "40150–40199, 40350–40399, 42950–42999, 50350–50399";
	if (phase == PG_PHASE_VALIDATE)
		return "40050–40099, 40350–40399, 42950–42999, 50350–50399";
	return "40050–40099, 40150–40199, 40350–40399, 42950–42999, 50350–50399";
}

int pg_phase_denies(uint32_t phase, int32_t code) {
	if (!pg_is_valid_deny_code(code))
		return 0;
	if (phase == PG_PHASE_AUTHORIZE)
		return code / 100 != 400;
	if (phase == PG_PHASE_VALIDATE)
		return code / 100 != 401;
	return 0;
}

static pg_decision make(uint8_t kind, int32_t code, pg_str text) {
	pg_decision d;
	memset(&d, 0, sizeof d);
	d.kind = kind;
	d.code = code;
	d.text = text;
	return d;
}

pg_decision pg_allow(void) { return make(KIND_ALLOW, 0, (pg_str){"", 0}); }
pg_decision pg_allow_as(pg_str principal) { return make(KIND_ALLOW, 0, principal); }
pg_decision pg_fault(const char *reason) { return make(KIND_FAULT, 0, pg_cstr(reason)); }

pg_decision pg_deny_str(int32_t code, pg_str message) {
	if (!pg_is_valid_deny_code(code))
		return pg_faultf("sdk: deny code %d is outside the plugin ranges %s", (int)code, pg_deny_ranges(0));
	return make(KIND_DENY, code, message);
}

pg_decision pg_deny(int32_t code, const char *message) { return pg_deny_str(code, pg_cstr(message)); }

pg_decision pg_denyf(int32_t code, const char *format, ...) {
	if (!pg_is_valid_deny_code(code))
		return pg_deny_str(code, (pg_str){"", 0});
	writer w = {text_buf, PG_MAX_TEXT, 0, 0};
	va_list ap;
	va_start(ap, format);
	vformat(&w, format, ap);
	va_end(ap);
	text_buf[w.len] = 0;
	return make(KIND_DENY, code, (pg_str){text_buf, w.len});
}

pg_decision pg_faultf(const char *format, ...) {
	writer w = {text_buf, PG_MAX_TEXT, 0, 0};
	va_list ap;
	va_start(ap, format);
	vformat(&w, format, ap);
	va_end(ap);
	text_buf[w.len] = 0;
	return make(KIND_FAULT, 0, (pg_str){text_buf, w.len});
}

static char hdr_buf[PG_MAX_FORMATTED_HEADERS + 1];
static uint32_t hdr_used; /* reset before each handler call */

static pg_decision set_header(pg_decision d, const char *name, const char *value, size_t n);

pg_decision pg_with_header(pg_decision d, const char *name, const char *value) {
	return set_header(d, name, value, strlen(value));
}

pg_decision pg_with_headerf(pg_decision d, const char *name, const char *format, ...) {
	if (d.kind != KIND_ALLOW && d.kind != KIND_DENY)
		return d;
	writer w = {hdr_buf + hdr_used, PG_MAX_FORMATTED_HEADERS - hdr_used, 0, 0};
	va_list ap;
	va_start(ap, format);
	vformat(&w, format, ap);
	va_end(ap);
	if (w.full)
		return pg_faultf("sdk: formatted response header values exceed %d bytes", PG_MAX_FORMATTED_HEADERS);
	const char *v = hdr_buf + hdr_used;
	hdr_used += w.len;
	return set_header(d, name, v, w.len);
}

static pg_decision set_header(pg_decision d, const char *name, const char *value, size_t n) {
	if (d.kind != KIND_ALLOW && d.kind != KIND_DENY)
		return d;
	const char *canon = NULL;
	for (int i = 0; i < 3; i++)
		if (fold_eq(name, (uint32_t)strlen(name), response_headers[i], (uint32_t)strlen(response_headers[i])))
			canon = response_headers[i];
	if (!canon)
		return pg_faultf("sdk: response header \"%s\" is not allowed; see docs/abi.md", name);
	int ok = n > 0 && n <= PG_MAX_HEADER_VALUE;
	for (size_t i = 0; ok && i < n; i++)
		ok = value[i] >= 0x20 && value[i] <= 0x7e;
	if (!ok)
		return pg_faultf("sdk: response header %s value must be 1 to 1024 bytes of printable ASCII", canon);
	for (int i = 0; i < d.nhdr; i++)
		if (d.hdr[i][0].ptr == canon) {
			d.hdr[i][1] = (pg_str){value, (uint32_t)n};
			return d;
		}
	d.hdr[d.nhdr][0] = pg_cstr(canon);
	d.hdr[d.nhdr][1] = (pg_str){value, (uint32_t)n};
	d.nhdr++;
	return d;
}

/* ---- wire ---- */

static uint32_t get_u32(const uint8_t *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }
static uint64_t get_u64(const uint8_t *b) { return (uint64_t)get_u32(b) | (uint64_t)get_u32(b + 4) << 32; }

static void put_u32(uint8_t *b, uint32_t v) {
	b[0] = (uint8_t)v, b[1] = (uint8_t)(v >> 8), b[2] = (uint8_t)(v >> 16), b[3] = (uint8_t)(v >> 24);
}

/* A cursor over a message: cut splits a u32-length-prefixed field off. */
typedef struct {
	const uint8_t *p;
	uint32_t n;
} cursor;

static int cut(cursor *c, pg_str *out) {
	if (c->n < 4)
		return 0;
	uint32_t n = get_u32(c->p);
	if (n > c->n - 4)
		return 0;
	*out = (pg_str){(const char *)c->p + 4, n};
	c->p += 4 + n;
	c->n -= 4 + n;
	return 1;
}

int pg_header(const pg_request *r, const char *name, pg_str *value) {
	cursor c = {(const uint8_t *)r->headers.ptr, r->headers.len};
	uint32_t nl = (uint32_t)strlen(name);
	pg_str n, v;
	while (c.n > 0 && cut(&c, &n) && cut(&c, &v))
		if (fold_eq(n.ptr, n.len, name, nl)) {
			*value = v;
			return 1;
		}
	return 0;
}

int pg_has_scope(pg_str scopes, const char *scope) {
	uint32_t n = (uint32_t)strlen(scope), i = 0;
	if (n == 0)
		return 0;
	while (i <= scopes.len) {
		uint32_t j = i;
		while (j < scopes.len && scopes.ptr[j] != ' ')
			j++;
		if (j - i == n && memcmp(scopes.ptr + i, scope, n) == 0)
			return 1;
		i = j + 1;
	}
	return 0;
}

static uint32_t put_str(uint8_t *rec, uint32_t n, pg_str s) {
	put_u32(rec + n, s.len);
	if (s.len > 0)
		memcpy(rec + n + 4, s.ptr, s.len);
	return n + 4 + s.len;
}

/* utf8_len is the length of the valid UTF-8 sequence at s[0..n), or 0. */
static uint32_t utf8_len(const uint8_t *s, uint32_t n) {
	uint8_t c = s[0];
	uint32_t k;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		k = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		k = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		k = 4, cp = c & 0x07;
	else
		return 0;
	if (n < k)
		return 0;
	for (uint32_t i = 1; i < k; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	return k;
}

/* copy_text writes t as decision text: at most PG_MAX_TEXT bytes, cut
 * before the character that crosses the limit, and invalid UTF-8 (which
 * the host would refuse) replaced by U+FFFD, as the Go SDK does (a run of
 * bad bytes becomes one U+FFFD). */
static uint32_t copy_text(uint8_t *dst, pg_str t) {
	const uint8_t *s = (const uint8_t *)t.ptr;
	uint32_t i = 0, n = 0;
	int bad = 0;
	while (i < t.len) {
		uint32_t k = utf8_len(s + i, t.len - i);
		const uint8_t *from = s + i;
		uint32_t w = k;
		if (k == 0) {
			if (bad) { /* one U+FFFD for a run of bad bytes, as strings.ToValidUTF8 */
				i++;
				continue;
			}
			from = (const uint8_t *)"\xEF\xBF\xBD", w = 3, k = 1;
		}
		bad = from != s + i;
		if (n + w > PG_MAX_TEXT)
			break;
		memcpy(dst + n, from, w);
		n += w, i += k;
	}
	return n;
}

static uint32_t record(uint8_t *rec, uint8_t verdict, int32_t code, const pg_decision *d) {
	rec[0] = verdict, rec[1] = 0, rec[2] = 0, rec[3] = 0;
	put_u32(rec + 4, (uint32_t)code);
	uint32_t n = 8;
	if (d->nhdr > 0 && verdict != PG_VERDICT_FAULT) {
		rec[1] = PG_DECISION_HEADERS;
		uint32_t mark = n;
		n += 4;
		for (int i = 0; i < d->nhdr; i++) {
			n = put_str(rec, n, d->hdr[i][0]);
			n = put_str(rec, n, d->hdr[i][1]);
		}
		put_u32(rec + mark, n - mark - 4);
	}
	return n + copy_text(rec + n, d->text);
}

static uint32_t fault_record(uint8_t *rec, pg_decision d) { return record(rec, PG_VERDICT_FAULT, 0, &d); }

static uint32_t encode(uint8_t *rec, uint32_t phase, const char *name, pg_decision d) {
	switch (d.kind) {
	case KIND_ALLOW:
		if (d.text.len == 0 && d.nhdr == 0)
			return 0;
		return record(rec, PG_VERDICT_ALLOW, 0, &d);
	case KIND_DENY:
		if (!pg_phase_denies(phase, d.code))
			return fault_record(rec, pg_faultf("sdk: %s may not deny with %d; it may use %s", name, (int)d.code, pg_deny_ranges(phase)));
		return record(rec, PG_VERDICT_DENY, d.code, &d);
	case KIND_FAULT:
		return record(rec, PG_VERDICT_FAULT, 0, &d);
	}
	return fault_record(rec, pg_fault("sdk: handler returned an unset pg_decision"));
}

uint32_t pg__phases(void) {
	uint32_t p = 0;
	if (pg_on_authorize)
		p |= PG_PHASE_AUTHORIZE;
	if (pg_on_validate)
		p |= PG_PHASE_VALIDATE;
	return p;
}

static int is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

uint32_t pg__configure(const uint8_t *msg, uint32_t len, uint8_t *rec) {
	if (!pg_on_configure) {
		uint32_t i = 0, j = len;
		while (i < j && is_space(msg[i]))
			i++;
		while (j > i && is_space(msg[j - 1]))
			j--;
		pg_str c = {(const char *)msg + i, j - i};
		if (c.len == 0 || pg_str_eq(c, "null") || pg_str_eq(c, "{}"))
			return 0;
		uint32_t n = len > 64 ? 64 : len;
		return fault_record(rec, pg_faultf("the plugin takes no config, got %.*s%s: remove \"config\" from its sidecar, or handle it with pg_on_configure", (int)n, (const char *)msg, n < len ? "…" : ""));
	}
	const char *err = pg_on_configure((pg_str){(const char *)msg, len});
	if (!err)
		return 0;
	return fault_record(rec, pg_fault(err));
}

uint32_t pg__authorize(const uint8_t *msg, uint32_t len, uint8_t *rec) {
	hdr_used = 0;
	if (!pg_on_authorize)
		return fault_record(rec, pg_fault("sdk: authorize called but the plugin registered no authorize handler"));
	pg_request r;
	memset(&r, 0, sizeof r);
	cursor c = {msg, len};
	pg_str digest;
	if (!cut(&c, &r.method) || !cut(&c, &r.path) || !cut(&c, &r.credential))
		goto short_msg;
	if (c.n > 0) {
		if (!cut(&c, &digest))
			goto short_msg;
		if (digest.len == PG_DIGEST_SIZE)
			r.digest = (const uint8_t *)digest.ptr;
		else if (digest.len != 0)
			return fault_record(rec, pg_fault("sdk: authorize request: credential digest is not 32 bytes"));
	}
	if (c.n > 0) {
		if (!cut(&c, &r.route) || c.n < 12)
			goto short_msg;
		if (get_u32(c.p) & 1) {
			r.has_path_id = 1;
			r.path_id = (int64_t)get_u64(c.p + 4);
		}
		c.p += 12, c.n -= 12;
	}
	if (c.n > 0 && (!cut(&c, &r.request_id) || !cut(&c, &r.client) || !cut(&c, &r.headers) ||
	                !cut(&c, &r.caller.name) || !cut(&c, &r.caller.scopes)))
		goto short_msg;
	return encode(rec, PG_PHASE_AUTHORIZE, "authorize", pg_on_authorize(&r));
short_msg:
	return fault_record(rec, pg_fault("sdk: authorize request: message shorter than its layout"));
}

uint32_t pg__validate(const uint8_t *msg, uint32_t len, uint8_t *rec) {
	hdr_used = 0;
	if (!pg_on_validate)
		return fault_record(rec, pg_fault("sdk: validate called but the plugin registered no validate handler"));
	pg_plant p;
	memset(&p, 0, sizeof p);
	if (len < 12)
		goto short_msg;
	p.id = (int64_t)get_u64(msg);
	p.has_tag = get_u32(msg + 8) & 1;
	cursor c = {msg + 12, len - 12};
	if (!cut(&c, &p.name) || !cut(&c, &p.tag) || !cut(&c, &p.allowed_as))
		goto short_msg;
	if (c.n > 0 && (!cut(&c, &p.caller.name) || !cut(&c, &p.caller.scopes)))
		goto short_msg;
	return encode(rec, PG_PHASE_VALIDATE, "validate", pg_on_validate(&p));
short_msg:
	return fault_record(rec, pg_fault("sdk: validate request: message shorter than its layout"));
}

/* ---- host functions ---- */

#ifdef __wasm__
#define PG_IMPORT(name) __attribute__((import_module("plantgate"), import_name(name)))
PG_IMPORT("log") void pg__host_log(int32_t level, const char *ptr, uint32_t len);
PG_IMPORT("token_lookup") int32_t pg__host_token_lookup(const uint8_t *hash, uint32_t hash_len, uint8_t *out, uint32_t cap);
PG_IMPORT("kv_get") int32_t pg__host_kv_get(const char *key, uint32_t key_len, uint8_t *out, uint32_t cap);
PG_IMPORT("kv_set") int32_t pg__host_kv_set(const char *key, uint32_t key_len, const uint8_t *val, uint32_t val_len, int64_t ttl_ms);
PG_IMPORT("kv_delete") int32_t pg__host_kv_delete(const char *key, uint32_t key_len);
PG_IMPORT("kv_incr") int64_t pg__host_kv_incr(const char *key, uint32_t key_len, int64_t delta, int64_t window_ms);
PG_IMPORT("kv_take") int64_t pg__host_kv_take(const char *key, uint32_t key_len, int64_t limit, int64_t window_ms);
PG_IMPORT("kv_take_sliding") int64_t pg__host_kv_take_sliding(const char *key, uint32_t key_len, int64_t limit, int64_t window_ms);
#else
/* Natively, plantgate_testing.c defines these. */
void pg__host_log(int32_t level, const char *ptr, uint32_t len);
int32_t pg__host_token_lookup(const uint8_t *hash, uint32_t hash_len, uint8_t *out, uint32_t cap);
int32_t pg__host_kv_get(const char *key, uint32_t key_len, uint8_t *out, uint32_t cap);
int32_t pg__host_kv_set(const char *key, uint32_t key_len, const uint8_t *val, uint32_t val_len, int64_t ttl_ms);
int32_t pg__host_kv_delete(const char *key, uint32_t key_len);
int64_t pg__host_kv_incr(const char *key, uint32_t key_len, int64_t delta, int64_t window_ms);
int64_t pg__host_kv_take(const char *key, uint32_t key_len, int64_t limit, int64_t window_ms);
int64_t pg__host_kv_take_sliding(const char *key, uint32_t key_len, int64_t limit, int64_t window_ms);
#endif

void pg_log(int32_t level, pg_str msg) { pg__host_log(level, msg.ptr, msg.len); }

void pg_logf(int32_t level, const char *format, ...) {
	static char line[PG_MAX_LOG];
	writer w = {line, PG_MAX_LOG, 0, 0};
	va_list ap;
	va_start(ap, format);
	vformat(&w, format, ap);
	va_end(ap);
	pg__host_log(level, line, w.len);
}

static int32_t status32(int64_t n) { return n >= PG_HOST_ERROR ? (int32_t)n : PG_HOST_ERROR; }

int32_t pg_lookup_token(const uint8_t digest[PG_DIGEST_SIZE], uint8_t *buf, uint32_t cap, pg_token *out) {
	int32_t n = pg__host_token_lookup(digest, PG_DIGEST_SIZE, buf, cap);
	if (n < 0)
		return status32(n);
	if ((uint32_t)n > cap)
		return n;
	cursor c = {buf + 52, (uint32_t)n - 52};
	if (n < 52 || !cut(&c, &out->name) || !cut(&c, &out->scopes))
		return PG_HOST_ERROR;
	out->created_ms = (int64_t)get_u64(buf);
	out->expires_ms = (int64_t)get_u64(buf + 8);
	out->revoked = get_u32(buf + 16) & 1;
	out->digest = buf + 20;
	return 0;
}

int32_t pg_kv_get(pg_str key, uint8_t *out, uint32_t cap) { return pg__host_kv_get(key.ptr, key.len, out, cap); }

int32_t pg_kv_set(pg_str key, const uint8_t *value, uint32_t len, int64_t ttl_ms) {
	return pg__host_kv_set(key.ptr, key.len, value, len, ttl_ms);
}

int32_t pg_kv_delete(pg_str key) { return pg__host_kv_delete(key.ptr, key.len); }

int64_t pg_kv_incr(pg_str key, int64_t delta, int64_t window_ms) { return pg__host_kv_incr(key.ptr, key.len, delta, window_ms); }

static int32_t taken(int64_t t, pg_taken *out) {
	if (t < 0)
		return status32(t);
	out->allowed = (t & (1LL << 62)) == 0;
	out->remaining = t >> 32 & ((1LL << 30) - 1);
	out->reset_ms = t & 0xFFFFFFFFLL;
	return 0;
}

int32_t pg_kv_take(pg_str key, int64_t limit, int64_t window_ms, pg_taken *out) {
	return taken(pg__host_kv_take_sliding(key.ptr, key.len, limit, window_ms), out);
}

int32_t pg_kv_take_fixed(pg_str key, int64_t limit, int64_t window_ms, pg_taken *out) {
	return taken(pg__host_kv_take(key.ptr, key.len, limit, window_ms), out);
}

/* ---- exports ---- */

#ifdef __wasm__
#define PG_EXPORT(name) __attribute__((export_name(name)))

enum { MIN_REQUEST = 4 << 10, MAX_REQUEST = 16 << 20 };
static uint8_t request_static[MIN_REQUEST];
static uint8_t *request = request_static;
static uint32_t request_cap = MIN_REQUEST;
static uint8_t record_buf[PG_MAX_DECISION];

PG_EXPORT("plantgate_abi_version") uint32_t pg__export_abi_version(void) { return PG_ABI_VERSION; }
PG_EXPORT("plantgate_phases") uint32_t pg__export_phases(void) { return pg__phases(); }

/* The request buffer, grown to at least size bytes: it moves only when
 * asked for more than it had, as the ABI promises. 0 past MAX_REQUEST or
 * when memory cannot grow; the host then fails the request closed. */
PG_EXPORT("plantgate_buffer") uint32_t pg__export_buffer(uint32_t size) {
	if (size > MAX_REQUEST)
		return 0;
	if (size > request_cap) {
		uint32_t n = request_cap;
		while (n < size)
			n <<= 1;
		uint8_t *b = malloc(n);
		if (!b)
			return 0;
		if (request != request_static)
			free(request);
		request = b, request_cap = n;
	}
	return (uint32_t)(uintptr_t)request;
}

static uint64_t export(uint32_t (*body)(const uint8_t *, uint32_t, uint8_t *), uint32_t ptr, uint32_t len) {
	uint32_t base = (uint32_t)(uintptr_t)request, n;
	if (ptr < base || (uint64_t)(ptr - base) + len > request_cap)
		n = fault_record(record_buf, pg_fault("sdk: request is not inside the buffer from plantgate_buffer"));
	else
		n = body(request + (ptr - base), len, record_buf);
	return n == 0 ? 0 : (uint64_t)(uintptr_t)record_buf << 32 | n;
}

PG_EXPORT("plantgate_configure") uint64_t pg__export_configure(uint32_t ptr, uint32_t len) { return export(pg__configure, ptr, len); }
PG_EXPORT("plantgate_authorize") uint64_t pg__export_authorize(uint32_t ptr, uint32_t len) { return export(pg__authorize, ptr, len); }
PG_EXPORT("plantgate_validate") uint64_t pg__export_validate(uint32_t ptr, uint32_t len) { return export(pg__validate, ptr, len); }
#endif

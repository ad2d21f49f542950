/*
 * plant-rules' config reader: a flat JSON object over the defaults, with
 * the Go plugin's keys, checks and messages. Written by hand because the
 * kit has no dependencies: it reads exactly the JSON this config can hold
 * (any value is skipped over correctly) and says where anything else goes
 * wrong. Keys are checked in sorted order, so the first error reported
 * does not depend on the order they are written in; a repeated key takes
 * its last value, as in Go.
 */
#include "config.h"

#include <string.h>

enum { MAX_KEYS = 32, MAX_KEY = 256 };

typedef struct {
	char key[MAX_KEY];
	uint32_t key_len;
	const char *val;
	uint32_t val_len;
	int order;
} pair;

typedef struct {
	const char *b;
	uint32_t n, i;
} parser;

static char err[PG_MAX_TEXT];
static pair pairs[MAX_KEYS];

static int ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static void skip_ws(parser *p) {
	while (p->i < p->n && ws(p->b[p->i]))
		p->i++;
}

static const char *unexpected(parser *p) {
	if (p->i >= p->n)
		return "unexpected end of JSON input";
	pg_formatf(err, sizeof err, "invalid character '%c' at byte %u", p->b[p->i], p->i);
	return err;
}

static int hex4(parser *p, uint32_t *v) {
	if (p->n - p->i < 4)
		return 0;
	*v = 0;
	for (int k = 0; k < 4; k++) {
		char c = p->b[p->i + k];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return 0;
		*v = *v << 4 | (uint32_t)d;
	}
	p->i += 4;
	return 1;
}

static void put_utf8(char *out, uint32_t *n, uint32_t cap, uint32_t r) {
	char b[4];
	uint32_t k;
	if (r < 0x80)
		b[0] = (char)r, k = 1;
	else if (r < 0x800)
		b[0] = (char)(0xC0 | r >> 6), b[1] = (char)(0x80 | (r & 0x3F)), k = 2;
	else if (r < 0x10000)
		b[0] = (char)(0xE0 | r >> 12), b[1] = (char)(0x80 | (r >> 6 & 0x3F)), b[2] = (char)(0x80 | (r & 0x3F)), k = 3;
	else
		b[0] = (char)(0xF0 | r >> 18), b[1] = (char)(0x80 | (r >> 12 & 0x3F)), b[2] = (char)(0x80 | (r >> 6 & 0x3F)), b[3] = (char)(0x80 | (r & 0x3F)), k = 4;
	if (*n + k <= cap)
		memcpy(out + *n, b, k), *n += k;
}

/* string reads a string at p->i (a quote), decoding escapes into out
 * (when not NULL, at most cap bytes). */
static const char *string(parser *p, char *out, uint32_t cap, uint32_t *len) {
	uint32_t n = 0;
	p->i++;
	while (p->i < p->n) {
		unsigned char c = (unsigned char)p->b[p->i++];
		if (c == '"') {
			if (len)
				*len = n;
			return NULL;
		}
		if (c < 0x20) {
			p->i--;
			return unexpected(p);
		}
		if (c != '\\') {
			if (out && n < cap)
				out[n] = (char)c;
			n++;
			continue;
		}
		if (p->i >= p->n)
			break;
		char e = p->b[p->i++];
		uint32_t r;
		switch (e) {
		case '"': case '\\': case '/': r = (uint32_t)e; break;
		case 'b': r = '\b'; break;
		case 'f': r = '\f'; break;
		case 'n': r = '\n'; break;
		case 'r': r = '\r'; break;
		case 't': r = '\t'; break;
		case 'u':
			if (!hex4(p, &r))
				return "invalid \\u escape";
			if (r >= 0xD800 && r < 0xDC00 && p->n - p->i >= 6 && p->b[p->i] == '\\' && p->b[p->i + 1] == 'u') {
				uint32_t lo;
				p->i += 2;
				if (!hex4(p, &lo))
					return "invalid \\u escape";
				r = lo >= 0xDC00 && lo < 0xE000 ? 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00) : 0xFFFD;
			} else if (r >= 0xD800 && r < 0xE000) {
				r = 0xFFFD;
			}
			break;
		default:
			p->i--;
			return unexpected(p);
		}
		if (out)
			put_utf8(out, &n, cap, r);
	}
	return "unexpected end of JSON input";
}

static const char *value(parser *p, int depth);

static const char *literal(parser *p, const char *want) {
	uint32_t k = (uint32_t)strlen(want);
	if (p->n - p->i < k || memcmp(p->b + p->i, want, k) != 0)
		return unexpected(p);
	p->i += k;
	return NULL;
}

static const char *number(parser *p) {
	uint32_t s = p->i;
	if (p->b[p->i] == '-')
		p->i++;
	if (p->i >= p->n || p->b[p->i] < '0' || p->b[p->i] > '9')
		return unexpected(p);
	if (p->b[p->i] == '0')
		p->i++;
	else
		while (p->i < p->n && p->b[p->i] >= '0' && p->b[p->i] <= '9')
			p->i++;
	if (p->i < p->n && p->b[p->i] == '.') {
		p->i++;
		if (p->i >= p->n || p->b[p->i] < '0' || p->b[p->i] > '9')
			return unexpected(p);
		while (p->i < p->n && p->b[p->i] >= '0' && p->b[p->i] <= '9')
			p->i++;
	}
	if (p->i < p->n && (p->b[p->i] == 'e' || p->b[p->i] == 'E')) {
		p->i++;
		if (p->i < p->n && (p->b[p->i] == '+' || p->b[p->i] == '-'))
			p->i++;
		if (p->i >= p->n || p->b[p->i] < '0' || p->b[p->i] > '9')
			return unexpected(p);
		while (p->i < p->n && p->b[p->i] >= '0' && p->b[p->i] <= '9')
			p->i++;
	}
	(void)s;
	return NULL;
}

static const char *container(parser *p, int depth, char close) {
	const char *e;
	p->i++;
	skip_ws(p);
	if (p->i < p->n && p->b[p->i] == close) {
		p->i++;
		return NULL;
	}
	for (;;) {
		skip_ws(p);
		if (close == '}') {
			if (p->i >= p->n || p->b[p->i] != '"')
				return unexpected(p);
			if ((e = string(p, NULL, 0, NULL)))
				return e;
			skip_ws(p);
			if (p->i >= p->n || p->b[p->i] != ':')
				return unexpected(p);
			p->i++;
			skip_ws(p);
		}
		if ((e = value(p, depth + 1)))
			return e;
		skip_ws(p);
		if (p->i < p->n && p->b[p->i] == ',') {
			p->i++;
			continue;
		}
		if (p->i < p->n && p->b[p->i] == close) {
			p->i++;
			return NULL;
		}
		return unexpected(p);
	}
}

static const char *value(parser *p, int depth) {
	if (depth > 64)
		return "nested too deep";
	if (p->i >= p->n)
		return unexpected(p);
	switch (p->b[p->i]) {
	case '"': return string(p, NULL, 0, NULL);
	case '{': return container(p, depth, '}');
	case '[': return container(p, depth, ']');
	case 't': return literal(p, "true");
	case 'f': return literal(p, "false");
	case 'n': return literal(p, "null");
	}
	return number(p);
}

/* object reads the pairs of the JSON object that is all of raw. */
static const char *object(pg_str raw, int *count) {
	parser p = {raw.ptr, raw.len, 0};
	const char *e;
	*count = 0;
	skip_ws(&p);
	if (p.i >= p.n)
		return "unexpected end of JSON input";
	if (p.b[p.i] != '{') {
		char c = p.b[p.i];
		const char *kind = c == '[' ? "array" : c == '"' ? "string" : (c == 't' || c == 'f') ? "bool" : (c == '-' || (c >= '0' && c <= '9')) ? "number" : NULL;
		if (!kind)
			return unexpected(&p);
		if ((e = value(&p, 0)))
			return e;
		skip_ws(&p);
		if (p.i < p.n)
			return unexpected(&p);
		pg_formatf(err, sizeof err, "cannot unmarshal %s into an object", kind);
		return err;
	}
	p.i++;
	skip_ws(&p);
	if (p.i < p.n && p.b[p.i] == '}') {
		p.i++;
	} else {
		for (;;) {
			skip_ws(&p);
			if (p.i >= p.n || p.b[p.i] != '"')
				return unexpected(&p);
			if (*count == MAX_KEYS)
				return "more than 32 keys";
			pair *q = &pairs[*count];
			if ((e = string(&p, q->key, MAX_KEY, &q->key_len)))
				return e;
			if (q->key_len > MAX_KEY)
				q->key_len = MAX_KEY;
			skip_ws(&p);
			if (p.i >= p.n || p.b[p.i] != ':')
				return unexpected(&p);
			p.i++;
			skip_ws(&p);
			uint32_t start = p.i;
			if ((e = value(&p, 1)))
				return e;
			q->val = p.b + start;
			q->val_len = p.i - start;
			q->order = (*count)++;
			skip_ws(&p);
			if (p.i < p.n && p.b[p.i] == ',') {
				p.i++;
				continue;
			}
			if (p.i < p.n && p.b[p.i] == '}') {
				p.i++;
				break;
			}
			return unexpected(&p);
		}
	}
	skip_ws(&p);
	if (p.i < p.n)
		return unexpected(&p);
	return NULL;
}

static int key_cmp(const pair *a, const pair *b) {
	uint32_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->key, b->key, n);
	if (c)
		return c;
	return a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
}

/* integer reads a JSON integer literal that fits an int64 (what Go's json
 * reads into an int64: no fraction, no exponent). */
static int integer(const char *v, uint32_t n, int64_t *out) {
	uint32_t i = 0;
	int neg = 0;
	uint64_t x = 0;
	if (n > 0 && v[0] == '-')
		neg = 1, i = 1;
	if (i == n || (v[i] == '0' && n - i > 1))
		return 0;
	for (; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return 0;
		uint64_t d = (uint64_t)(v[i] - '0');
		if (x > (UINT64_C(9223372036854775808) - d) / 10)
			return 0;
		x = x * 10 + d;
	}
	if (!neg && x > INT64_MAX)
		return 0;
	*out = neg ? (int64_t)(0 - x) : (int64_t)x;
	return 1;
}

static int key_is(const pair *q, const char *k) { return q->key_len == strlen(k) && memcmp(q->key, k, q->key_len) == 0; }

/* quote writes a key as Go's %q does for the usual ones. */
static const char *quote(const pair *q) {
	static char b[MAX_KEY * 4 + 3];
	uint32_t n = 0;
	b[n++] = '"';
	for (uint32_t i = 0; i < q->key_len; i++) {
		unsigned char c = (unsigned char)q->key[i];
		if (c == '"' || c == '\\')
			b[n++] = '\\', b[n++] = (char)c;
		else if (c < 0x20)
			n += pg_formatf(b + n, 5, "\\x%02x", c);
		else
			b[n++] = (char)c;
	}
	b[n++] = '"';
	b[n] = 0;
	return b;
}

const char *config_parse(pg_str raw, config *out) {
	config c = CONFIG_DEFAULT;
	uint32_t s = 0, e = raw.len;
	while (s < e && ws(raw.ptr[s]))
		s++;
	while (e > s && ws(raw.ptr[e - 1]))
		e--;
	raw = (pg_str){raw.ptr + s, e - s};
	if (raw.len == 0 || pg_str_eq(raw, "null")) {
		*out = c;
		return NULL;
	}
	int count;
	const char *perr = object(raw, &count);
	if (perr) {
		static char wrapped[PG_MAX_TEXT];
		pg_formatf(wrapped, sizeof wrapped, "want a JSON object: %s", perr);
		return wrapped;
	}
	/* Insertion sort by key, stable: the last of a repeated key stays last. */
	for (int i = 1; i < count; i++) {
		pair t = pairs[i];
		int j = i;
		while (j > 0 && key_cmp(&pairs[j - 1], &t) > 0)
			pairs[j] = pairs[j - 1], j--;
		pairs[j] = t;
	}
	for (int i = 0; i < count; i++) {
		if (i + 1 < count && key_cmp(&pairs[i], &pairs[i + 1]) == 0)
			continue;
		const pair *q = &pairs[i];
		if (key_is(q, "allow_control")) {
			if (q->val_len == 4 && memcmp(q->val, "true", 4) == 0)
				c.allow_control = 1;
			else if (q->val_len == 5 && memcmp(q->val, "false", 5) == 0)
				c.allow_control = 0;
			else {
				pg_formatf(err, sizeof err, "allow_control must be true or false, got %.*s", (int)q->val_len, q->val);
				return err;
			}
			continue;
		}
		int64_t *f = key_is(q, "name_min") ? &c.name_min : key_is(q, "name_max") ? &c.name_max
		           : key_is(q, "tag_min") ? &c.tag_min : key_is(q, "tag_max") ? &c.tag_max
		           : key_is(q, "id_min") ? &c.id_min : NULL;
		if (!f) {
			pg_formatf(err, sizeof err, "unknown key %s (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)", quote(q));
			return err;
		}
		int64_t v;
		if (!integer(q->val, q->val_len, &v) || v < 0) {
			pg_formatf(err, sizeof err, "%.*s must be an integer ≥ 0, got %.*s", (int)q->key_len, q->key, (int)q->val_len, q->val);
			return err;
		}
		*f = v;
	}
	if (c.name_min > c.name_max) {
		pg_formatf(err, sizeof err, "name_min (%lld) must not exceed name_max (%lld)", (long long)c.name_min, (long long)c.name_max);
		return err;
	}
	if (c.tag_min > c.tag_max) {
		pg_formatf(err, sizeof err, "tag_min (%lld) must not exceed tag_max (%lld)", (long long)c.tag_min, (long long)c.tag_max);
		return err;
	}
	*out = c;
	return NULL;
}

/*
 * plant-rules in C: the bundled plant-rules policy
 * (plugins/plant-rules/main.go) rewritten on the C guest kit, with the
 * same rules, order, codes, messages, config keys and defaults. The
 * decisions it must give are testdata/expect/plant-rules.jsonl.
 *
 *   code   rule (defaults), checked in this order; the first that fails decides
 *   40050  id is at least id_min (1)
 *   40052  name has no control characters (unless allow_control)
 *   40051  name has name_min-name_max (1-100) characters after trimming spaces
 *   40054  tag has no control characters (unless allow_control), when present
 *   40053  tag has tag_min-tag_max (1-50) characters after trimming, when present
 *
 * Characters are Unicode code points; trimming removes leading and
 * trailing Unicode white space; control characters are Unicode's Cc.
 * Config, every key optional:
 *   {"name_min": 1, "name_max": 100, "tag_min": 1, "tag_max": 50, "id_min": 1, "allow_control": false}
 */
#include "plantgate.h"

#include "config.h"

enum {
	CODE_ID = 40050,
	CODE_NAME_LENGTH = 40051,
	CODE_NAME_CONTROL = 40052,
	CODE_TAG_LENGTH = 40053,
	CODE_TAG_CONTROL = 40054,
};

/* The config in force; pg_on_configure replaces it. An instance serves one
 * call at a time, so no lock. */
static config cfg = CONFIG_DEFAULT;

const char *pg_on_configure(pg_str raw) {
	config c;
	const char *err = config_parse(raw, &c);
	if (err)
		return pg_textf("plant-rules config: %s", err);
	cfg = c;
	return NULL;
}

/* decode reads the code point at s[*i] and advances *i; an invalid byte
 * reads as U+FFFD, one byte long, as Go's range over a string does. */
static uint32_t decode(const unsigned char *s, uint32_t n, uint32_t *i) {
	unsigned char c = s[*i];
	uint32_t k, cp;
	if (c < 0x80) {
		(*i)++;
		return c;
	}
	if (c >= 0xC2 && c <= 0xDF)
		k = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		k = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		k = 4, cp = c & 0x07;
	else
		goto bad;
	if (n - *i < k)
		goto bad;
	for (uint32_t j = 1; j < k; j++) {
		if ((s[*i + j] & 0xC0) != 0x80)
			goto bad;
		cp = cp << 6 | (s[*i + j] & 0x3F);
	}
	if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		goto bad;
	*i += k;
	return cp;
bad:
	(*i)++;
	return 0xFFFD;
}

static int is_control(uint32_t r) { return r < 0x20 || (r >= 0x7F && r <= 0x9F); }

/* Unicode White_Space, as Go's unicode.IsSpace. */
static int is_space(uint32_t r) {
	switch (r) {
	case '\t': case '\n': case '\v': case '\f': case '\r': case ' ':
	case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
	case 0x202F: case 0x205F: case 0x3000:
		return 1;
	}
	return r >= 0x2000 && r <= 0x200A;
}

/* trimmed_count counts the code points of s without leading and trailing
 * white space. */
static int64_t trimmed_count(pg_str s) {
	const unsigned char *p = (const unsigned char *)s.ptr;
	int64_t n = 0, lead = 0, trail = 0;
	int seen = 0;
	for (uint32_t i = 0; i < s.len;) {
		uint32_t r = decode(p, s.len, &i);
		n++;
		if (is_space(r)) {
			if (!seen)
				lead++;
			trail++;
		} else {
			seen = 1;
			trail = 0;
		}
	}
	return seen ? n - lead - trail : 0;
}

/* check applies the control-character and length rules to one field:
 * 1 when it passes, else 0 and *d. */
static int check(const char *field, pg_str s, int64_t lo, int64_t hi, int32_t code_length, int32_t code_control, pg_decision *d) {
	const unsigned char *p = (const unsigned char *)s.ptr;
	uint32_t i = 0, j = s.len;
	int printable = 1;
	for (uint32_t k = 0; k < s.len && printable; k++)
		printable = p[k] >= 0x20 && p[k] <= 0x7e;
	if (printable) {
		/* The usual field: one character per byte, only spaces to trim. */
		while (i < j && p[i] == ' ')
			i++;
		while (j > i && p[j - 1] == ' ')
			j--;
		if ((int64_t)(j - i) >= lo && (int64_t)(j - i) <= hi)
			return 1;
	}
	if (!cfg.allow_control) {
		int64_t at = 0;
		for (uint32_t k = 0; k < s.len;) {
			uint32_t r = decode(p, s.len, &k);
			at++;
			if (is_control(r)) {
				*d = pg_denyf(code_control, "%s must not contain control characters, found U+%04X at character %lld", field, (unsigned)r, (long long)at);
				return 0;
			}
		}
	}
	int64_t n = trimmed_count(s);
	if (n < lo || n > hi) {
		if (lo == hi)
			*d = pg_denyf(code_length, "%s must be exactly %lld characters after trimming, got %lld", field, (long long)lo, (long long)n);
		else
			*d = pg_denyf(code_length, "%s must be %lld–%lld characters after trimming, got %lld", field, (long long)lo, (long long)hi, (long long)n);
		return 0;
	}
	return 1;
}

/* pg_on_validate applies the rules. Nothing allocates; a message is
 * formatted only when denying. */
pg_decision pg_on_validate(const pg_plant *p) {
	pg_decision d;
	if (p->id < cfg.id_min)
		return pg_denyf(CODE_ID, "id must be at least %lld, got %lld", (long long)cfg.id_min, (long long)p->id);
	if (!check("name", p->name, cfg.name_min, cfg.name_max, CODE_NAME_LENGTH, CODE_NAME_CONTROL, &d))
		return d;
	if (p->has_tag && !check("tag", p->tag, cfg.tag_min, cfg.tag_max, CODE_TAG_LENGTH, CODE_TAG_CONTROL, &d))
		return d;
	return pg_allow();
}

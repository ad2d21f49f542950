/* Native tests of plant-rules in C: make -C sdk/c test. Each assertion is
 * on the decision record as the host would read it. */
#include "plantgate_testing.h"

#include <string.h>

static pgt_outcome plant(int64_t id, const char *name, const char *tag) {
	pg_plant p;
	memset(&p, 0, sizeof p);
	p.id = id;
	p.name = pg_cstr(name);
	if (tag)
		p.has_tag = 1, p.tag = pg_cstr(tag);
	return pgt_validate(&p);
}

static char *repeat(char *buf, const char *s, int n) {
	buf[0] = 0;
	for (int i = 0; i < n; i++)
		strcat(buf, s);
	return buf;
}

int main(void) {
	char b1[512], b2[512];
	PGT_EXPECT(plant(1, "Monstera", "tropical"), "allow");
	PGT_EXPECT(plant(7, "Fern", NULL), "allow");
	PGT_EXPECT(plant(INT64_MAX, "Fern", NULL), "allow");
	PGT_EXPECT(plant(2, "Ficus élégant 🌿", "日本"), "allow");
	PGT_EXPECT(plant(3, repeat(b1, "é", 100), NULL), "allow");
	PGT_EXPECT(plant(4, "  a  ", NULL), "allow");
	PGT_EXPECT(plant(5, "Fern", repeat(b1, "🌿", 50)), "allow");
	PGT_EXPECT(plant(0, "Fern", NULL), "deny 40050: id must be at least 1, got 0");
	PGT_EXPECT(plant(-5, "Fern", NULL), "deny 40050: id must be at least 1, got -5");
	PGT_EXPECT(plant(INT64_MIN, "Fern", NULL), "deny 40050: id must be at least 1, got -9223372036854775808");
	PGT_EXPECT(plant(0, "", NULL), "deny 40050: id must be at least 1, got 0");
	PGT_EXPECT(plant(1, "", NULL), "deny 40051: name must be 1–100 characters after trimming, got 0");
	PGT_EXPECT(plant(1, "   ", NULL), "deny 40051: name must be 1–100 characters after trimming, got 0");
	PGT_EXPECT(plant(1, repeat(b1, "a", 101), NULL), "deny 40051: name must be 1–100 characters after trimming, got 101");
	PGT_EXPECT(plant(1, "Mon\astera", NULL), "deny 40052: name must not contain control characters, found U+0007 at character 4");
	PGT_EXPECT(plant(1, "Fern", ""), "deny 40053: tag must be 1–50 characters after trimming, got 0");
	PGT_EXPECT(plant(1, "Fern", repeat(b2, "t", 51)), "deny 40053: tag must be 1–50 characters after trimming, got 51");
	PGT_EXPECT(plant(1, "Fern", "a\tb"), "deny 40054: tag must not contain control characters, found U+0009 at character 2");
	PGT_EXPECT(plant(1, "", ""), "deny 40051: name must be 1–100 characters after trimming, got 0");
	PGT_EXPECT(plant(1, "\xe3\x80\x80\xc2\xa0", NULL), "deny 40051: name must be 1–100 characters after trimming, got 0");
	PGT_EXPECT(plant(1, "ab\xc2\x85", NULL), "deny 40052: name must not contain control characters, found U+0085 at character 3");

	/* A NUL is a control character, and the name's bytes are counted, not
	 * its C string. */
	pg_plant nul = {.id = 1, .name = {"\0\0\0", 3}};
	PGT_EXPECT(pgt_validate(&nul), "deny 40052: name must not contain control characters, found U+0000 at character 1");

	/* The deny record, byte for byte; a plain allow has none. */
	pgt_outcome o = plant(0, "Fern", NULL);
	const char want[] = "\x01\x00\x00\x00\x72\x9c\x00\x00id must be at least 1, got 0";
	PGT_CHECK(o.record_len == sizeof want - 1 && memcmp(o.record, want, sizeof want - 1) == 0);
	PGT_CHECK(!plant(1, "Fern", NULL).has_record);

	/* Config. */
	PGT_EXPECT(pgt_configure("{\"name_min\": 2, \"name_max\": 2, \"id_min\": 10, \"allow_control\": true}"), "allow");
	PGT_EXPECT(plant(9, "ab", NULL), "deny 40050: id must be at least 10, got 9");
	PGT_EXPECT(plant(10, "abc", NULL), "deny 40051: name must be exactly 2 characters after trimming, got 3");
	PGT_EXPECT(plant(10, "a\a", NULL), "allow");
	PGT_EXPECT(pgt_configure("null"), "allow");
	PGT_EXPECT(pgt_configure("{\"name_min\": 5, \"name_max\": 4}"), "fault: plant-rules config: name_min (5) must not exceed name_max (4)");
	PGT_EXPECT(pgt_configure("{\"tag_min\": 3, \"tag_max\": 1}"), "fault: plant-rules config: tag_min (3) must not exceed tag_max (1)");
	PGT_EXPECT(pgt_configure("{\"zeta\": 1, \"id_min\": -1}"), "fault: plant-rules config: id_min must be an integer ≥ 0, got -1");
	PGT_EXPECT(pgt_configure("{\"zeta\": 1}"), "fault: plant-rules config: unknown key \"zeta\" (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)");
	PGT_EXPECT(pgt_configure("{\"name_max\": 1.5}"), "fault: plant-rules config: name_max must be an integer ≥ 0, got 1.5");
	PGT_EXPECT(pgt_configure("{\"name_max\": null}"), "fault: plant-rules config: name_max must be an integer ≥ 0, got null");
	PGT_EXPECT(pgt_configure("{\"name_max\": \"7\"}"), "fault: plant-rules config: name_max must be an integer ≥ 0, got \"7\"");
	PGT_EXPECT(pgt_configure("{\"name_max\": 9223372036854775808}"), "fault: plant-rules config: name_max must be an integer ≥ 0, got 9223372036854775808");
	PGT_EXPECT(pgt_configure("{\"allow_control\": 1}"), "fault: plant-rules config: allow_control must be true or false, got 1");
	PGT_EXPECT(pgt_configure("[1]"), "fault: plant-rules config: want a JSON object: cannot unmarshal array into an object");
	PGT_EXPECT(pgt_configure("{"), "fault: plant-rules config: want a JSON object: unexpected end of JSON input");
	PGT_EXPECT(pgt_configure("{\"a\":1,}"), "fault: plant-rules config: want a JSON object: invalid character '}' at byte 7");
	PGT_EXPECT(pgt_configure("{\"id_min\": 1, \"id_\\u006din\": 3, \"x\": {\"y\": [1, {\"z\": null}]}}"), "fault: plant-rules config: unknown key \"x\" (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)");
	PGT_EXPECT(pgt_configure("{\"id_min\": 1, \"id_\\u006din\": 3}"), "allow");
	PGT_EXPECT(plant(2, "ab", NULL), "deny 40050: id must be at least 3, got 2");
	return pgt_done("plant-rules (C)");
}

/*
 * plantgate_testing.h: native tests of a C plugin. Link the plugin with
 * plantgate.c and plantgate_testing.c (not for wasm32): the host functions
 * answer from the state below, and pgt_validate / pgt_authorize /
 * pgt_configure run the plugin through the same export bodies the module
 * runs, with the message encoded as the host encodes it and the decision
 * record checked as the host checks it.
 *
 *     pgt_outcome o = pgt_validate(&(pg_plant){.id = 0, .name = PG_STR("Fern")});
 *     PGT_EXPECT(o, "deny 40050: id must be at least 1, got 0");
 */
#ifndef PLANTGATE_TESTING_H
#define PLANTGATE_TESTING_H

#include "plantgate.h"

typedef struct {
	uint8_t verdict;
	int32_t code;
	char text[PG_MAX_TEXT + 1];
	int nhdr;
	char hdr[3][2][PG_MAX_HEADER_VALUE + 1];
	int has_record; /* 0 for the record-less allow */
	uint8_t record[PG_MAX_DECISION];
	uint32_t record_len;
	const char *invalid; /* why the host would refuse the record, or NULL */
} pgt_outcome;

/* An authorize request as a test states it (digest NULL for none). */
typedef struct {
	const char *method, *path, *credential, *route;
	const uint8_t *digest;
	int has_path_id;
	int64_t path_id;
	const char *request_id, *client;
	const char *headers[16][2];
	const char *principal, *scopes;
} pgt_request;

pgt_outcome pgt_validate(const pg_plant *p);
pgt_outcome pgt_validate_message(const uint8_t *msg, uint32_t len);
pgt_outcome pgt_authorize(const pgt_request *r);
pgt_outcome pgt_configure(const char *json);
/* "allow", "allow as ci", "deny 40050: text", "fault: text" or "invalid: why". */
const char *pgt_string(const pgt_outcome *o);
/* The validate message of p as the host encodes it, into buf; its length. */
uint32_t pgt_encode_validate(const pg_plant *p, uint8_t *buf, uint32_t cap);

/* Host state. */
extern int pgt_down;      /* every store call answers PG_UNAVAILABLE */
extern int64_t pgt_now_ms; /* the clock of KV windows */
/* The last log line and its level; pgt_logs counts lines. */
extern char pgt_last_log[PG_MAX_LOG + 1];
extern int32_t pgt_last_level;
extern int pgt_logs;
/* Adds a token record the host's token_lookup will answer. */
void pgt_add_token(const uint8_t digest[32], int64_t created_ms, int64_t expires_ms, int revoked, const char *name, const char *scopes);
void pgt_reset(void);

/* Test reporting: PGT_EXPECT compares pgt_string(&o) with want. */
extern int pgt_failures;
#define PGT_EXPECT(o, want) pgt_expect((o), (want), __FILE__, __LINE__)
#define PGT_CHECK(cond) pgt_check((cond), #cond, __FILE__, __LINE__)
void pgt_expect(pgt_outcome o, const char *want, const char *file, int line);
void pgt_check(int ok, const char *what, const char *file, int line);
/* Prints a summary; the exit status for main. */
int pgt_done(const char *suite);

#endif

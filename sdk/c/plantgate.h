/*
 * plantgate.h: the Plantgate guest kit for C, built from the written ABI
 * (docs/abi.md; ABI version 2). A policy plugin defines one or more of
 *
 *     pg_decision pg_on_validate(const pg_plant *p);
 *     pg_decision pg_on_authorize(const pg_request *r);
 *     const char *pg_on_configure(pg_str config);   // NULL: accepted
 *
 * and links plantgate.c, which provides every export the host calls and
 * encodes the handler's decision. A phase is served when its handler is
 * defined (they are weak symbols here). Build with clang:
 *
 *     clang --target=wasm32-wasi -O2 -mexec-model=reactor -nostdlib \
 *         plugin.c plantgate.c /usr/lib/wasm32-wasi/crt1-reactor.o \
 *         -L/usr/lib/wasm32-wasi -lc -Wl,--strip-all -o 50-name.wasm
 *
 * Natively (any C compiler) the same files link with plantgate_testing.c,
 * which stands in for the host, so plugins are unit-tested without one.
 *
 * Notes:
 *  - Nothing on the per-call path allocates: the request buffer and the
 *    decision record are static, and formatted texts (pg_denyf, pg_textf)
 *    are written into one static text buffer, valid until the next
 *    formatting call.
 *  - The strings of a pg_request or pg_plant point into the request
 *    buffer: valid until the handler returns. They are not NUL-terminated.
 *  - Everything that goes wrong fails closed: an invalid deny code, a code
 *    the phase may not use or a request that does not parse becomes a
 *    fault; a trap (abort, out-of-bounds) is a fault too.
 */
#ifndef PLANTGATE_H
#define PLANTGATE_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PG_ABI_VERSION 2u
#define PG_PHASE_AUTHORIZE 1u
#define PG_PHASE_VALIDATE 2u

#define PG_VERDICT_ALLOW 0
#define PG_VERDICT_DENY 1
#define PG_VERDICT_FAULT 2
#define PG_DECISION_HEADERS 1 /* record flag: a header block precedes the text */

#define PG_MAX_TEXT 1024
#define PG_MAX_LOG 4096
#define PG_MAX_HEADER_VALUE 1024
#define PG_MAX_HEADER_BLOCK 2048
#define PG_MAX_DECISION (8 + 4 + PG_MAX_HEADER_BLOCK + PG_MAX_TEXT)
#define PG_DIGEST_SIZE 32
#define PG_MAX_KV_KEY 256
#define PG_MAX_KV_VALUE 4096
#define PG_KV_BUDGET 8
#define PG_MAX_KV_TTL_MS 86400000LL
#define PG_KV_SLIDING_SLOTS 20 /* slots a sliding window is cut into */

/* First plugin code of each status; a plugin uses the same hundred, last
 * two digits 50-99. The HTTP status is code / 100. */
#define PG_CODE_BAD_REQUEST 40050
#define PG_CODE_UNAUTHORIZED 40150
#define PG_CODE_FORBIDDEN 40350
#define PG_CODE_TOO_MANY_REQUESTS 42950
#define PG_CODE_UNAVAILABLE 50350

/* Log levels (log/slog's numbering). */
#define PG_LOG_DEBUG (-4)
#define PG_LOG_INFO 0
#define PG_LOG_WARN 4
#define PG_LOG_ERROR 8

/* Results of the host functions below zero. */
#define PG_NOT_FOUND (-1)   /* no such token, or the key has no value */
#define PG_UNAVAILABLE (-2) /* the store could not be asked: deny with a 503 */
#define PG_BAD_ARGUMENT (-3)
#define PG_OVER_BUDGET (-4) /* this call already made PG_KV_BUDGET KV calls */
#define PG_HOST_ERROR (-5)  /* the host answered outside the ABI */

/* A string: bytes and a length, not NUL-terminated. */
typedef struct {
	const char *ptr;
	uint32_t len;
} pg_str;

#define PG_STR(literal) ((pg_str){(literal), (uint32_t)(sizeof(literal) - 1)})
pg_str pg_cstr(const char *s);
int pg_str_eq(pg_str a, const char *b);
/* The same, ignoring ASCII case (A-Z as a-z; other bytes compare as they
 * are): tags, names and words matched whatever case a client sent. */
int pg_str_eq_fold(pg_str a, const char *b);
/* The index of the first place needle occurs in s ignoring ASCII case, or
 * -1 when it does not: pg_str_index_fold(p->name, "weed"). An empty needle
 * is at 0. */
int32_t pg_str_index_fold(pg_str s, const char *needle);
/* Whether needle occurs in s, ignoring ASCII case. */
int pg_str_has_fold(pg_str s, const char *needle);

/* Who a request is from: a valid token's name and space-separated scopes. */
typedef struct {
	pg_str name;
	pg_str scopes;
} pg_principal;

/* The authorize phase's request, before the host reads the body. */
typedef struct {
	pg_str method, path;
	pg_str credential; /* the bearer token as sent; never log it */
	pg_str route;      /* "GET /plants", "POST /plants", "GET /plants/{id}", "DELETE /plants/{id}" */
	int has_path_id;
	int64_t path_id;
	pg_str request_id; /* the X-Request-ID the gateway gave the request */
	pg_str client;     /* the client's IP address */
	pg_principal caller;
	const uint8_t *digest; /* SHA-256 of credential (PG_DIGEST_SIZE bytes), NULL when none */
	pg_str headers;        /* the header block; read it with pg_header */
} pg_request;

/* The validate phase's request: the host's canonical decoding of the body. */
typedef struct {
	int64_t id;
	pg_str name;
	int has_tag; /* "" is a valid tag, so presence is explicit */
	pg_str tag;
	pg_str allowed_as; /* the text the authorize chain allowed with (pg_allow_as), "" when none; who the request is from is caller */
	pg_principal caller;
} pg_plant;

/* A handler's answer. Build it with the functions below. */
typedef struct {
	uint8_t kind; /* 1 allow, 2 deny, 3 fault; 0 is unset (reported as a fault) */
	uint8_t nhdr;
	int32_t code;
	pg_str text;
	pg_str hdr[3][2];
} pg_decision;

pg_decision pg_allow(void);
pg_decision pg_allow_as(pg_str principal);
/* Denies with code and a message the client sees. A code outside the
 * plugin range makes a fault, so a typo fails closed. */
pg_decision pg_deny(int32_t code, const char *message);
pg_decision pg_deny_str(int32_t code, pg_str message);
/* pg_deny with a message formatted by pg_textf. */
pg_decision pg_denyf(int32_t code, const char *format, ...) __attribute__((format(printf, 2, 3)));
pg_decision pg_fault(const char *reason);
pg_decision pg_faultf(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* Sets response header name (Retry-After, RateLimit or RateLimit-Policy,
 * any case) to value (1-1024 bytes of printable ASCII) on an allow or deny;
 * anything else makes a fault. name and value must outlive the call. */
pg_decision pg_with_header(pg_decision d, const char *name, const char *value);
/* pg_with_header with a value formatted into the kit's header buffer
 * (PG_MAX_FORMATTED_HEADERS bytes for all of a call's values; it is
 * reset before each handler call). */
pg_decision pg_with_headerf(pg_decision d, const char *name, const char *format, ...) __attribute__((format(printf, 3, 4)));
#define PG_MAX_FORMATTED_HEADERS 256

/* Formats into the static text buffer (PG_MAX_TEXT bytes, cut on a UTF-8
 * character) and returns it, NUL-terminated. Conversions: %s %.*s %c %d %i
 * %u %x %X with l, ll, z and j sizes, a width and 0 padding, and %%. */
const char *pg_textf(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* pg_textf into buf of cap bytes (cap >= 1): returns the length written
 * before the terminating NUL. */
uint32_t pg_formatf(char *buf, uint32_t cap, const char *format, ...) __attribute__((format(printf, 3, 4)));

int pg_is_valid_deny_code(int32_t code);
/* The deny codes a plugin serving phase may use, for messages: "40150–40199,
 * 40350–40399, 42950–42999, 50350–50399"; for phase 0, every plugin code. */
const char *pg_deny_ranges(uint32_t phase);
int pg_phase_denies(uint32_t phase, int32_t code);

/* Reports whether scope is one of the space-separated scopes. */
int pg_has_scope(pg_str scopes, const char *scope);
/* Finds request header name (any case): 1 and its value, or 0. A plugin
 * sees the headers its sidecar asks for: {"headers": ["X-Tenant"]}. */
int pg_header(const pg_request *r, const char *name, pg_str *value);

/* Writes msg to the host's log. Never log a credential. */
void pg_log(int32_t level, pg_str msg);
void pg_logf(int32_t level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* A token record from the host's token store; strings point into the
 * buffer given to pg_lookup_token. */
typedef struct {
	const uint8_t *digest; /* SHA-256 of the token */
	pg_str name, scopes;
	int64_t created_ms, expires_ms; /* Unix ms; 0 unknown / never */
	int revoked;
} pg_token;

/* Looks the token with this SHA-256 digest up. 0 and *out filled; a
 * negative PG_* status; or, when the record does not fit cap, its length
 * (call again with a buffer that large). */
int32_t pg_lookup_token(const uint8_t digest[PG_DIGEST_SIZE], uint8_t *buf, uint32_t cap, pg_token *out);

/* The plugin's KV store, namespaced per plugin and fleet-wide. */
/* Value length n (written when n <= cap) or a negative PG_* status. */
int32_t pg_kv_get(pg_str key, uint8_t *out, uint32_t cap);
/* 0 or a negative status; ttl_ms 0 keeps the value until deleted. */
int32_t pg_kv_set(pg_str key, const uint8_t *value, uint32_t len, int64_t ttl_ms);
/* 1 when the key had a value, 0 when not, or a negative status. */
int32_t pg_kv_delete(pg_str key);
/* The counter after adding delta in the current window, or a negative status. */
int64_t pg_kv_incr(pg_str key, int64_t delta, int64_t window_ms);
typedef struct {
	int allowed;       /* 0 once the budget is spent */
	int64_t remaining; /* estimate of units left, fleet-wide */
	int64_t reset_ms;  /* until more budget is available: the oldest unit frees (sliding) or the window ends (fixed) */
} pg_taken;
/* Takes one unit of key's budget of limit per sliding window of window_ms
 * (at most a day), shared by the fleet: in no span of window_ms does the
 * fleet allow more than limit. 0 and *out, or a negative status. Most calls
 * cost no store round trip. A unit frees between window_ms and
 * window_ms + window_ms/20 after it was taken. */
int32_t pg_kv_take(pg_str key, int64_t limit, int64_t window_ms, pg_taken *out);
/* pg_kv_take over fixed windows aligned to the Unix epoch: bursts at the
 * end of one window and the start of the next both pass (up to 2 x limit
 * in a short span). For quotas per calendar minute, hour or day. */
int32_t pg_kv_take_fixed(pg_str key, int64_t limit, int64_t window_ms, pg_taken *out);

/* The handlers a plugin may define; each is optional. pg_on_configure
 * receives the sidecar's "config" value (JSON) once per instance, before
 * any request, and returns NULL to accept it or the reason it is refused
 * (pg_textf's buffer will do). Without it, the plugin takes only an
 * empty, null or {} config. */
pg_decision pg_on_validate(const pg_plant *p);
pg_decision pg_on_authorize(const pg_request *r);
const char *pg_on_configure(pg_str config);

/* The export bodies, for plantgate_testing.c: each decodes msg, runs the
 * handler and returns the decision record's length in *rec, or 0 for a
 * plain allow (no record). */
uint32_t pg__configure(const uint8_t *msg, uint32_t len, uint8_t *rec);
uint32_t pg__authorize(const uint8_t *msg, uint32_t len, uint8_t *rec);
uint32_t pg__validate(const uint8_t *msg, uint32_t len, uint8_t *rec);
uint32_t pg__phases(void);

#ifdef __cplusplus
}
#endif
#endif

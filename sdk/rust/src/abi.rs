//! The wire contract, from docs/abi.md (in Go: sdk/abi). Constants and the
//! byte layouts of the messages; no allocation.

/// The ABI version a module built with this crate returns from
/// `plantgate_abi_version`.
pub const VERSION: u32 = 2;

/// Phase bits of `plantgate_phases`.
pub const PHASE_AUTHORIZE: u32 = 1;
pub const PHASE_VALIDATE: u32 = 2;

/// Verdicts of a decision record.
pub const VERDICT_ALLOW: u8 = 0;
pub const VERDICT_DENY: u8 = 1;
pub const VERDICT_FAULT: u8 = 2;
/// The decision record flag that says a header block precedes the text.
pub const DECISION_HEADERS: u8 = 1;
/// Bytes of a decision record before its header block or text.
pub const DECISION_HEADER: usize = 8;

/// The longest deny message, principal or fault text, in bytes.
pub const MAX_TEXT: usize = 1024;
/// The longest log line the host keeps.
pub const MAX_LOG: usize = 4096;
/// The longest response header value.
pub const MAX_HEADER_VALUE: usize = 1024;
/// The largest header block of a decision record.
pub const MAX_HEADER_BLOCK: usize = 2048;
/// The largest decision record.
pub const MAX_DECISION: usize = DECISION_HEADER + 4 + MAX_HEADER_BLOCK + MAX_TEXT;

/// The response headers a decision may carry, canonical.
pub const RESPONSE_HEADERS: [&str; 3] = ["Retry-After", "RateLimit", "RateLimit-Policy"];

/// SHA-256 digest size: the credential digest and the token_lookup key.
pub const DIGEST_SIZE: usize = 32;

/// KV bounds.
pub const MAX_KV_KEY: usize = 256;
pub const MAX_KV_VALUE: usize = 4096;
pub const KV_BUDGET: u32 = 8;
pub const MAX_KV_TTL_MS: i64 = 86_400_000;
/// How many slots a sliding window (kv_take_sliding) is cut into.
pub const KV_SLIDING_SLOTS: i64 = 20;

/// KV results below zero.
pub const KV_NOT_FOUND: i64 = -1;
pub const KV_UNAVAILABLE: i64 = -2;
pub const KV_BAD_ARGUMENT: i64 = -3;
pub const KV_OVER_BUDGET: i64 = -4;

/// token_lookup results below zero.
pub const LOOKUP_NOT_FOUND: i32 = -1;
pub const LOOKUP_UNAVAILABLE: i32 = -2;
pub const LOOKUP_BAD_ARGUMENT: i32 = -3;

/// Log levels (log/slog's numbering).
pub const LOG_DEBUG: i32 = -4;
pub const LOG_INFO: i32 = 0;
pub const LOG_WARN: i32 = 4;
pub const LOG_ERROR: i32 = 8;

/// Reports whether a plugin may deny with `code`: its hundreds are 400,
/// 401, 403, 429 or 503 and its last two digits 50–99.
pub fn valid_deny_code(code: i32) -> bool {
    matches!(code / 100, 400 | 401 | 403 | 429 | 503) && code % 100 >= 50
}

/// Reports whether the phase may deny with `code`: authorize never with a
/// 400, validate never with a 401.
pub fn phase_denies(phase: u32, code: i32) -> bool {
    if !valid_deny_code(code) {
        return false;
    }
    match phase {
        PHASE_AUTHORIZE => code / 100 != 400,
        PHASE_VALIDATE => code / 100 != 401,
        _ => false,
    }
}

/// The deny codes a plugin serving `phase` may use, for messages
/// ("40150–40199, 40350–40399, 42950–42999, 50350–50399"); for any other
/// phase, every code `valid_deny_code` allows.
pub fn deny_ranges(phase: u32) -> &'static str {
    match phase {
        PHASE_AUTHORIZE => "40150–40199, 40350–40399, 42950–42999, 50350–50399",
        PHASE_VALIDATE => "40050–40099, 40350–40399, 42950–42999, 50350–50399",
        _ => "40050–40099, 40150–40199, 40350–40399, 42950–42999, 50350–50399",
    }
}

/// The canonical name of an allowed response header, any case.
pub fn response_header(name: &str) -> Option<&'static str> {
    RESPONSE_HEADERS.iter().copied().find(|h| h.eq_ignore_ascii_case(name))
}

pub(crate) fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

pub(crate) fn u64_at(b: &[u8]) -> u64 {
    u64::from(u32_at(b)) | u64::from(u32_at(&b[4..])) << 32
}

/// Splits a u32-length-prefixed field off the front of `b`.
pub(crate) fn cut(b: &[u8]) -> Option<(&[u8], &[u8])> {
    if b.len() < 4 {
        return None;
    }
    let n = u32_at(b) as usize;
    let rest = &b[4..];
    if n > rest.len() {
        return None;
    }
    Some((&rest[..n], &rest[n..]))
}

/// Splits the first (name, value) pair off a header block.
pub fn next_header(b: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (name, b) = cut(b)?;
    let (value, b) = cut(b)?;
    Some((name, value, b))
}

/// The authorize message's fields (see docs/abi.md), aliasing the message.
#[derive(Default, Clone, Copy)]
pub struct AuthorizeMsg<'a> {
    pub method: &'a [u8],
    pub path: &'a [u8],
    pub credential: &'a [u8],
    pub digest: Option<&'a [u8]>,
    pub route: &'a [u8],
    pub path_id: Option<i64>,
    pub request_id: &'a [u8],
    pub client: &'a [u8],
    pub headers: &'a [u8],
    pub principal: &'a [u8],
    pub scopes: &'a [u8],
}

/// Parses an authorize message. Fields a version-1 host leaves out stay
/// empty.
pub fn parse_authorize(b: &[u8]) -> Result<AuthorizeMsg<'_>, &'static str> {
    const SHORT: &str = "message shorter than its layout";
    let mut m = AuthorizeMsg::default();
    let (method, b) = cut(b).ok_or(SHORT)?;
    let (path, b) = cut(b).ok_or(SHORT)?;
    let (credential, b) = cut(b).ok_or(SHORT)?;
    m.method = method;
    m.path = path;
    m.credential = credential;
    if b.is_empty() {
        return Ok(m);
    }
    let (digest, b) = cut(b).ok_or(SHORT)?;
    match digest.len() {
        0 => {}
        DIGEST_SIZE => m.digest = Some(digest),
        _ => return Err("credential digest is not 32 bytes"),
    }
    if b.is_empty() {
        return Ok(m);
    }
    let (route, b) = cut(b).ok_or(SHORT)?;
    if b.len() < 12 {
        return Err(SHORT);
    }
    m.route = route;
    if u32_at(b) & 1 != 0 {
        m.path_id = Some(u64_at(&b[4..]) as i64);
    }
    let b = &b[12..];
    if b.is_empty() {
        return Ok(m);
    }
    let (request_id, b) = cut(b).ok_or(SHORT)?;
    let (client, b) = cut(b).ok_or(SHORT)?;
    let (headers, b) = cut(b).ok_or(SHORT)?;
    let (principal, b) = cut(b).ok_or(SHORT)?;
    let (scopes, _) = cut(b).ok_or(SHORT)?;
    m.request_id = request_id;
    m.client = client;
    m.headers = headers;
    m.principal = principal;
    m.scopes = scopes;
    Ok(m)
}

/// The validate message's fields, aliasing the message.
#[derive(Default, Clone, Copy)]
pub struct ValidateMsg<'a> {
    pub id: i64,
    pub tag: Option<&'a [u8]>,
    pub name: &'a [u8],
    pub allowed_as: &'a [u8],
    pub caller_name: &'a [u8],
    pub caller_scopes: &'a [u8],
}

/// Parses a validate message.
pub fn parse_validate(b: &[u8]) -> Result<ValidateMsg<'_>, &'static str> {
    const SHORT: &str = "message shorter than its layout";
    if b.len() < 12 {
        return Err(SHORT);
    }
    let mut m = ValidateMsg { id: u64_at(b) as i64, ..ValidateMsg::default() };
    let has_tag = u32_at(&b[8..]) & 1 != 0;
    let (name, b) = cut(&b[12..]).ok_or(SHORT)?;
    let (tag, b) = cut(b).ok_or(SHORT)?;
    let (allowed_as, b) = cut(b).ok_or(SHORT)?;
    m.name = name;
    m.tag = if has_tag { Some(tag) } else { None };
    m.allowed_as = allowed_as;
    if b.is_empty() {
        return Ok(m);
    }
    let (cn, b) = cut(b).ok_or(SHORT)?;
    let (cs, _) = cut(b).ok_or(SHORT)?;
    m.caller_name = cn;
    m.caller_scopes = cs;
    Ok(m)
}

/// A token record as token_lookup writes it, aliasing the record.
pub struct TokenMsg<'a> {
    pub created: i64,
    pub expires: i64,
    pub revoked: bool,
    pub digest: &'a [u8],
    pub name: &'a [u8],
    pub scopes: &'a [u8],
}

/// Parses a token record.
pub fn parse_token(b: &[u8]) -> Option<TokenMsg<'_>> {
    if b.len() < 52 {
        return None;
    }
    let (name, rest) = cut(&b[52..])?;
    let (scopes, _) = cut(rest)?;
    Some(TokenMsg {
        created: u64_at(b) as i64,
        expires: u64_at(&b[8..]) as i64,
        revoked: u32_at(&b[16..]) & 1 != 0,
        digest: &b[20..52],
        name,
        scopes,
    })
}

/// Unpacks a kv_take result: (denied, remaining, reset in ms).
pub fn unpack_take(t: i64) -> (bool, i64, i64) {
    (t & (1 << 62) != 0, t >> 32 & ((1 << 30) - 1), t & ((1 << 32) - 1))
}

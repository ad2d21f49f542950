//! Native tests of a plugin (not on wasm32): run its handlers through the
//! same export bodies the module runs, with the message encoded as the
//! host encodes it and the decision record decoded and checked as the host
//! checks it. The host functions answer from a [`TestHost`] kept per
//! thread, so tests run in parallel (`rustc --test` runs each test on its
//! own thread).
//!
//! ```ignore
//! let o = plantgate::testing::validate(&PLANTGATE, &Plant { id: 0, name: "Fern", ..Plant::default() });
//! assert_eq!(o.to_string(), "deny 40050: id must be at least 1, got 0");
//! ```

use crate::abi;
use crate::rt::{self, Record};
use crate::{Handlers, Plant};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

/// The host functions' answers for the current thread's tests.
#[derive(Default)]
pub struct TestHost {
    /// Every log line, (level, text).
    pub logs: Vec<(i32, String)>,
    /// Token records by digest, as token_lookup writes them.
    pub tokens: HashMap<[u8; 32], Vec<u8>>,
    /// KV values.
    pub kv: HashMap<Vec<u8>, Vec<u8>>,
    /// Counters by (key, window index).
    pub counters: HashMap<(Vec<u8>, i64), i64>,
    /// Sliding takes: when each unit counted frees, by (key, window).
    pub sliding: HashMap<(Vec<u8>, i64), Vec<i64>>,
    /// The clock of windows, Unix milliseconds.
    pub now_ms: i64,
    /// Every store call answers unavailable.
    pub down: bool,
}

thread_local! {
    static HOST: RefCell<TestHost> = RefCell::new(TestHost::default());
    static RECORD: RefCell<Record> = RefCell::new([0; abi::MAX_DECISION]);
}

/// Runs f with this thread's host: set tokens, KV values or the clock
/// before a call, read logs after it.
pub fn host<R>(f: impl FnOnce(&mut TestHost) -> R) -> R {
    HOST.with(|h| f(&mut h.borrow_mut()))
}

pub(crate) fn with_host<R>(f: impl FnOnce(&mut TestHost) -> R) -> R {
    host(f)
}

fn kv_key(key: &[u8]) -> i64 {
    if key.is_empty() || key.len() > abi::MAX_KV_KEY {
        abi::KV_BAD_ARGUMENT
    } else {
        0
    }
}

impl TestHost {
    pub(crate) fn log(&mut self, level: i32, msg: &[u8]) {
        self.logs.push((level, String::from_utf8_lossy(msg).into_owned()));
    }

    pub(crate) fn token_lookup(&mut self, digest: &[u8; 32], out: &mut [u8]) -> i32 {
        if self.down {
            return abi::LOOKUP_UNAVAILABLE;
        }
        match self.tokens.get(digest) {
            None => abi::LOOKUP_NOT_FOUND,
            Some(r) => {
                if r.len() <= out.len() {
                    out[..r.len()].copy_from_slice(r);
                }
                r.len() as i32
            }
        }
    }

    pub(crate) fn kv_get(&mut self, key: &[u8], out: &mut [u8]) -> i32 {
        if kv_key(key) != 0 {
            return abi::KV_BAD_ARGUMENT as i32;
        }
        if self.down {
            return abi::KV_UNAVAILABLE as i32;
        }
        match self.kv.get(key) {
            None => abi::KV_NOT_FOUND as i32,
            Some(v) => {
                if v.len() <= out.len() {
                    out[..v.len()].copy_from_slice(v);
                }
                v.len() as i32
            }
        }
    }

    pub(crate) fn kv_set(&mut self, key: &[u8], value: &[u8], ttl_ms: i64) -> i32 {
        if kv_key(key) != 0 || value.len() > abi::MAX_KV_VALUE || !(0..=abi::MAX_KV_TTL_MS).contains(&ttl_ms) {
            return abi::KV_BAD_ARGUMENT as i32;
        }
        if self.down {
            return abi::KV_UNAVAILABLE as i32;
        }
        self.kv.insert(key.to_vec(), value.to_vec());
        0
    }

    pub(crate) fn kv_delete(&mut self, key: &[u8]) -> i32 {
        if kv_key(key) != 0 {
            return abi::KV_BAD_ARGUMENT as i32;
        }
        if self.down {
            return abi::KV_UNAVAILABLE as i32;
        }
        self.kv.remove(key).is_some() as i32
    }

    fn window(&self, window_ms: i64) -> Option<i64> {
        if (1..=abi::MAX_KV_TTL_MS).contains(&window_ms) {
            Some(self.now_ms / window_ms)
        } else {
            None
        }
    }

    pub(crate) fn kv_incr(&mut self, key: &[u8], delta: i64, window_ms: i64) -> i64 {
        let w = match self.window(window_ms) {
            Some(w) if kv_key(key) == 0 => w,
            _ => return abi::KV_BAD_ARGUMENT,
        };
        if self.down {
            return abi::KV_UNAVAILABLE;
        }
        let c = self.counters.entry((key.to_vec(), w)).or_insert(0);
        *c += delta;
        *c
    }

    pub(crate) fn kv_take(&mut self, key: &[u8], limit: i64, window_ms: i64) -> i64 {
        let w = match self.window(window_ms) {
            Some(w) if kv_key(key) == 0 && limit > 0 => w,
            _ => return abi::KV_BAD_ARGUMENT,
        };
        if self.down {
            return abi::KV_UNAVAILABLE;
        }
        let reset = (w + 1) * window_ms - self.now_ms;
        let c = self.counters.entry((key.to_vec(), w)).or_insert(0);
        if *c >= limit {
            return 1 << 62 | reset;
        }
        *c += 1;
        (limit - *c) << 32 | reset
    }
}

impl TestHost {
    /// kv_take_sliding, exactly: a unit taken in slot s (of
    /// ceil(window/20) ms) frees at the end of slot s + slots.
    pub(crate) fn kv_take_sliding(&mut self, key: &[u8], limit: i64, window_ms: i64) -> i64 {
        if kv_key(key) != 0 || limit < 1 || !(1..=abi::MAX_KV_TTL_MS).contains(&window_ms) {
            return abi::KV_BAD_ARGUMENT;
        }
        if self.down {
            return abi::KV_UNAVAILABLE;
        }
        let slot = (window_ms + abi::KV_SLIDING_SLOTS - 1) / abi::KV_SLIDING_SLOTS;
        let slots = (window_ms + slot - 1) / slot;
        let now = self.now_ms;
        let units = self.sliding.entry((key.to_vec(), window_ms)).or_insert_with(Vec::new);
        units.retain(|&free| free > now);
        if units.len() as i64 >= limit {
            let first = units.iter().copied().min().unwrap_or(now);
            return 1 << 62 | (first - now);
        }
        units.push((now / slot + 1 + slots) * slot);
        let first = units.iter().copied().min().unwrap_or(now);
        (limit - units.len() as i64) << 32 | (first - now)
    }
}

/// A token record as the host's token_lookup writes it.
pub fn token_record(created_ms: i64, expires_ms: i64, revoked: bool, digest: &[u8; 32], name: &str, scopes: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&created_ms.to_le_bytes());
    b.extend_from_slice(&expires_ms.to_le_bytes());
    b.extend_from_slice(&(revoked as u32).to_le_bytes());
    b.extend_from_slice(digest);
    put(&mut b, name.as_bytes());
    put(&mut b, scopes.as_bytes());
    b
}

fn put(b: &mut Vec<u8>, s: &[u8]) {
    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
    b.extend_from_slice(s);
}

/// The validate message of `p`, as the host (ABI 2) encodes it.
pub fn encode_validate(p: &Plant) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&p.id.to_le_bytes());
    b.extend_from_slice(&(p.tag.is_some() as u32).to_le_bytes());
    put(&mut b, p.name.as_bytes());
    put(&mut b, p.tag.unwrap_or("").as_bytes());
    put(&mut b, p.allowed_as.as_bytes());
    put(&mut b, p.caller.name.as_bytes());
    put(&mut b, p.caller.scopes.as_bytes());
    b
}

/// An authorize request as a test states it.
#[derive(Clone, Debug, Default)]
pub struct AuthorizeInput<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub credential: &'a str,
    /// The credential's SHA-256 digest, as the host sends it.
    pub digest: Option<[u8; 32]>,
    pub route: &'a str,
    pub path_id: Option<i64>,
    pub request_id: &'a str,
    pub client: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub principal: &'a str,
    pub scopes: &'a str,
}

/// The authorize message of `r`, as the host (ABI 2) encodes it.
pub fn encode_authorize(r: &AuthorizeInput) -> Vec<u8> {
    let mut b = Vec::new();
    put(&mut b, r.method.as_bytes());
    put(&mut b, r.path.as_bytes());
    put(&mut b, r.credential.as_bytes());
    put(&mut b, r.digest.as_ref().map_or(&[][..], |d| &d[..]));
    put(&mut b, r.route.as_bytes());
    b.extend_from_slice(&(r.path_id.is_some() as u32).to_le_bytes());
    b.extend_from_slice(&r.path_id.unwrap_or(0).to_le_bytes());
    put(&mut b, r.request_id.as_bytes());
    put(&mut b, r.client.as_bytes());
    let mut hb = Vec::new();
    for (n, v) in r.headers {
        put(&mut hb, n.as_bytes());
        put(&mut hb, v.as_bytes());
    }
    put(&mut b, &hb);
    put(&mut b, r.principal.as_bytes());
    put(&mut b, r.scopes.as_bytes());
    b
}

/// A decision as the host reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: u8,
    pub code: i32,
    pub text: String,
    pub headers: Vec<(String, String)>,
    /// The record's bytes; None for the record-less allow (result 0).
    pub record: Option<Vec<u8>>,
}

impl Outcome {
    pub fn allowed(&self) -> bool {
        self.verdict == abi::VERDICT_ALLOW
    }
    pub fn denied(&self) -> bool {
        self.verdict == abi::VERDICT_DENY
    }
    pub fn faulted(&self) -> bool {
        self.verdict == abi::VERDICT_FAULT
    }
}

impl fmt::Display for Outcome {
    /// "allow", "allow as ci", "deny 40050: text" or "fault: text".
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.verdict {
            abi::VERDICT_ALLOW if self.text.is_empty() => f.write_str("allow"),
            abi::VERDICT_ALLOW => write!(f, "allow as {}", self.text),
            abi::VERDICT_DENY => write!(f, "deny {}: {}", self.code, self.text),
            _ => write!(f, "fault: {}", self.text),
        }
    }
}

/// Parses and checks a decision record as the host does; a record the
/// host would refuse panics with the reason, failing the test.
pub fn parse_record(b: &[u8]) -> Outcome {
    assert!(b.len() >= abi::DECISION_HEADER, "record shorter than its header: {:?}", b);
    let mut text = &b[abi::DECISION_HEADER..];
    let mut headers = Vec::new();
    if b[1] & abi::DECISION_HEADERS != 0 {
        let (mut block, rest) = abi::cut(text).expect("header block longer than the record");
        assert!(block.len() <= abi::MAX_HEADER_BLOCK, "header block over MAX_HEADER_BLOCK");
        text = rest;
        while !block.is_empty() {
            let (n, v, rest) = abi::next_header(block).expect("header block does not parse");
            headers.push((String::from_utf8(n.to_vec()).unwrap(), String::from_utf8(v.to_vec()).unwrap()));
            block = rest;
        }
    }
    assert!(text.len() <= abi::MAX_TEXT, "text over MAX_TEXT: {} bytes", text.len());
    let code = i32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    match b[0] {
        abi::VERDICT_ALLOW | abi::VERDICT_FAULT => {}
        abi::VERDICT_DENY => assert!(abi::valid_deny_code(code), "deny code {} outside the plugin range", code),
        v => panic!("unknown verdict {}", v),
    }
    Outcome {
        verdict: b[0],
        code,
        text: String::from_utf8(text.to_vec()).expect("decision text is not UTF-8"),
        headers,
        record: Some(b.to_vec()),
    }
}

type Body = fn(&Handlers, &[u8], &mut Record) -> rt::Answer;

fn run(body: Body, h: &Handlers, msg: &[u8]) -> Outcome {
    RECORD.with(|r| {
        let mut rec = r.borrow_mut();
        match body(h, msg, &mut rec) {
            None => Outcome { verdict: abi::VERDICT_ALLOW, code: 0, text: String::new(), headers: Vec::new(), record: None },
            Some(n) => parse_record(&rec[..n]),
        }
    })
}

/// Calls the plugin's validate export body with `p`.
pub fn validate(h: &Handlers, p: &Plant) -> Outcome {
    run(rt::validate, h, &encode_validate(p))
}

/// Calls the validate body with a message as given, for encoding tests.
pub fn validate_message(h: &Handlers, msg: &[u8]) -> Outcome {
    run(rt::validate, h, msg)
}

/// Calls the plugin's authorize export body with `r`.
pub fn authorize(h: &Handlers, r: &AuthorizeInput) -> Outcome {
    run(rt::authorize, h, &encode_authorize(r))
}

/// Calls the authorize body with a message as given.
pub fn authorize_message(h: &Handlers, msg: &[u8]) -> Outcome {
    run(rt::authorize, h, msg)
}

/// Calls the plugin's configure export body with `config` (JSON).
pub fn configure(h: &Handlers, config: &str) -> Outcome {
    run(rt::configure, h, config.as_bytes())
}

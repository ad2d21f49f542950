//! token-quota in Rust: an authorize plugin that shows the kit's host
//! calls against a real gateway. It looks the bearer token up in the
//! gateway's token store, refuses a revoked or unknown one, and lets each
//! token make `limit` requests a minute (config {"limit": N}, default 2)
//! through the KV store, answering 429 with Retry-After once spent.

use plantgate::{deny, lookup_token, take_fixed, Decision, Error, Request, CODE_UNAVAILABLE};
use std::cell::Cell;
use std::time::Duration;

thread_local! {
    static LIMIT: Cell<i64> = Cell::new(2);
}

plantgate::plugin!(configure: configure, authorize: authorize);

fn configure(raw: &[u8]) -> Result<(), String> {
    let s: String = String::from_utf8_lossy(raw).chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if s.is_empty() || s == "null" || s == "{}" {
        return Ok(());
    }
    match s.strip_prefix(r#"{"limit":"#).and_then(|n| n.strip_suffix('}')).and_then(|n| n.parse::<i64>().ok()) {
        Some(n) if n >= 1 => {
            LIMIT.with(|l| l.set(n));
            Ok(())
        }
        _ => Err(format!("token-quota config: want {}, got {}", r#"{"limit": N ≥ 1}"#, s)),
    }
}

fn authorize(r: Request) -> Decision {
    let digest = match r.credential_digest() {
        Some(d) => d,
        None => return Decision::deny(40150, "missing bearer token"),
    };
    let mut buf = [0u8; 512];
    let token = match lookup_token(digest, &mut buf) {
        Ok(t) => t,
        Err(Error::NotFound) => return Decision::deny(40151, "invalid token"),
        Err(_) => return Decision::deny(CODE_UNAVAILABLE, "token store unavailable"),
    };
    if token.revoked || token.digest != &digest[..] {
        return Decision::deny(40151, "invalid token");
    }
    let limit = LIMIT.with(|l| l.get());
    // The key is the token's digest prefix, not its name: a name is free text.
    let mut key = [0u8; 16];
    key[..4].copy_from_slice(b"tok:");
    for (i, b) in digest[..6].iter().enumerate() {
        key[4 + 2 * i] = b"0123456789abcdef"[(b >> 4) as usize];
        key[5 + 2 * i] = b"0123456789abcdef"[(b & 15) as usize];
    }
    let key = std::str::from_utf8(&key).unwrap_or("tok");
    match take_fixed(key, limit, Duration::from_secs(60)) {
        Err(_) => Decision::deny(CODE_UNAVAILABLE, "quota store unavailable"),
        Ok(t) if !t.allowed => {
            let secs = (t.reset.as_millis() as u64 + 999) / 1000;
            deny!(42950, "{} requests a minute; retry in {} s", limit, secs).with_header_fmt("Retry-After", format_args!("{}", secs))
        }
        Ok(t) => Decision::allow_as_fmt(format_args!("{}", token.name))
            .with_header_fmt("RateLimit", format_args!("\"minute\";r={};t={}", t.remaining, (t.reset.as_millis() + 999) / 1000)),
    }
}

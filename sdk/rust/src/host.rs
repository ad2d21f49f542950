//! The host functions: log, token lookup and the plugin's KV store. On
//! wasm32 they are the `plantgate` imports; natively they call the stubs
//! that [`crate::testing`] installs per thread.

use crate::abi;
use std::fmt;
use std::time::Duration;

/// Log levels, log/slog's numbering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Level {
    Debug = abi::LOG_DEBUG,
    Info = abi::LOG_INFO,
    Warn = abi::LOG_WARN,
    Error = abi::LOG_ERROR,
}

/// Writes `msg` to the host's log, attributed to the plugin. Never log a
/// credential. Lines over `abi::MAX_LOG` bytes are cut by the host.
pub fn log(level: Level, msg: &str) {
    imp::log(level as i32, msg.as_bytes())
}

/// Formats into a stack buffer (no allocation) and logs the line, cut at
/// `abi::MAX_LOG` bytes: `logf(Level::Info, format_args!("max {}", n))`.
pub fn logf(level: Level, args: fmt::Arguments) {
    let mut w = crate::TextWriter::<{ abi::MAX_LOG }> { buf: [0; abi::MAX_LOG], len: 0, full: false };
    let _ = fmt::write(&mut w, args);
    imp::log(level as i32, &w.buf[..w.len])
}

/// What the token store and the KV functions answer besides a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// No token has this digest, or the key has no value.
    NotFound,
    /// The store could not be asked: fail closed, with a 503 the client may
    /// retry (`Decision::deny(CODE_UNAVAILABLE, ..)`).
    Unavailable,
    /// A key, value, TTL, window, limit or digest is out of range.
    BadArgument,
    /// The call already made `abi::KV_BUDGET` KV calls.
    OverBudget,
    /// The value or record is n bytes, more than the buffer given.
    TooSmall(usize),
    /// The host answered outside the ABI.
    Host(i64),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Error::NotFound => f.write_str("not found"),
            Error::Unavailable => f.write_str("store unavailable"),
            Error::BadArgument => f.write_str("argument out of range"),
            Error::OverBudget => f.write_str("KV budget of this call spent"),
            Error::TooSmall(n) => write!(f, "buffer too small: {} bytes needed", n),
            Error::Host(n) => write!(f, "the host answered {}, outside the ABI", n),
        }
    }
}

fn kv_error(n: i64) -> Error {
    match n {
        abi::KV_NOT_FOUND => Error::NotFound,
        abi::KV_UNAVAILABLE => Error::Unavailable,
        abi::KV_BAD_ARGUMENT => Error::BadArgument,
        abi::KV_OVER_BUDGET => Error::OverBudget,
        n => Error::Host(n),
    }
}

/// An access token's record from the host's token store, borrowing the
/// buffer given to [`lookup_token`].
#[derive(Clone, Copy, Debug)]
pub struct Token<'a> {
    /// SHA-256 of the token: compare it with the digest you asked for.
    pub digest: &'a [u8],
    pub name: &'a str,
    /// Space-separated.
    pub scopes: &'a str,
    /// Unix milliseconds, 0 when unknown.
    pub created_ms: i64,
    /// Unix milliseconds, 0 for never.
    pub expires_ms: i64,
    pub revoked: bool,
}

impl Token<'_> {
    pub fn has_scope(&self, scope: &str) -> bool {
        crate::has_scope(self.scopes, scope)
    }
    /// Reports whether the token has an expiry and `now_ms` is at or past it.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires_ms != 0 && now_ms >= self.expires_ms
    }
}

/// Looks up the token whose SHA-256 digest is `digest`
/// ([`crate::Request::credential_digest`]), writing its record into `buf`
/// (512 bytes fit any usual token). `Error::NotFound`: deny with a 401;
/// `Error::Unavailable`: a 503.
pub fn lookup_token<'b>(digest: &[u8; abi::DIGEST_SIZE], buf: &'b mut [u8]) -> Result<Token<'b>, Error> {
    let n = imp::token_lookup(digest, buf);
    match n {
        abi::LOOKUP_NOT_FOUND => return Err(Error::NotFound),
        abi::LOOKUP_UNAVAILABLE => return Err(Error::Unavailable),
        abi::LOOKUP_BAD_ARGUMENT => return Err(Error::BadArgument),
        n if n < 0 => return Err(Error::Host(n as i64)),
        n if n as usize > buf.len() => return Err(Error::TooSmall(n as usize)),
        _ => {}
    }
    let buf: &'b [u8] = buf;
    let t = abi::parse_token(&buf[..n as usize]).ok_or(Error::Host(n as i64))?;
    Ok(Token {
        digest: t.digest,
        name: std::str::from_utf8(t.name).map_err(|_| Error::Host(n as i64))?,
        scopes: std::str::from_utf8(t.scopes).map_err(|_| Error::Host(n as i64))?,
        created_ms: t.created,
        expires_ms: t.expires,
        revoked: t.revoked,
    })
}

/// Reads key's value into `out` and returns its length; `Error::TooSmall`
/// when it is longer than `out` (a value is at most `abi::MAX_KV_VALUE`
/// bytes, so a buffer of that size always fits). Allocation-free.
pub fn get_into(key: &str, out: &mut [u8]) -> Result<usize, Error> {
    let n = imp::kv_get(key.as_bytes(), out) as i64;
    if n < 0 {
        return Err(kv_error(n));
    }
    if n as usize > out.len() {
        return Err(Error::TooSmall(n as usize));
    }
    Ok(n as usize)
}

/// Key's value, in a new Vec.
pub fn get(key: &str) -> Result<Vec<u8>, Error> {
    let mut b = [0u8; abi::MAX_KV_VALUE];
    let n = get_into(key, &mut b)?;
    Ok(b[..n].to_vec())
}

/// Stores value under key for ttl (zero: until deleted; at most a day).
pub fn set(key: &str, value: &[u8], ttl: Duration) -> Result<(), Error> {
    match imp::kv_set(key.as_bytes(), value, ttl.as_millis() as i64) {
        0 => Ok(()),
        n => Err(kv_error(n as i64)),
    }
}

/// Deletes key; true when it had a value.
pub fn delete(key: &str) -> Result<bool, Error> {
    match imp::kv_delete(key.as_bytes()) {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(kv_error(n as i64)),
    }
}

/// Adds delta to key's counter for the current window (aligned to the Unix
/// epoch) and returns the counter after it, fleet-wide. One store round
/// trip per call: for a per-request limit use [`take`].
pub fn incr(key: &str, delta: i64, window: Duration) -> Result<i64, Error> {
    let n = imp::kv_incr(key.as_bytes(), delta, window.as_millis() as i64);
    if n < 0 {
        return Err(kv_error(n));
    }
    Ok(n)
}

/// What [`take`] and [`take_fixed`] answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// False once the budget is spent: deny.
    pub allowed: bool,
    /// An estimate of the units left, fleet-wide.
    pub remaining: i64,
    /// Time until more budget is available: until the oldest unit counted
    /// now frees ([`take`]), or until the window ends ([`take_fixed`]).
    pub reset: Duration,
}

/// Takes one unit of key's budget of `limit` per sliding window (at most a
/// day), shared by the fleet: in no span of `window` does the fleet allow
/// more than `limit`. Most calls cost no store round trip. A unit frees
/// between `window` and `window + window/20` after it was taken
/// (docs/abi.md, windows: fixed and sliding).
pub fn take(key: &str, limit: i64, window: Duration) -> Result<Taken, Error> {
    taken(imp::kv_take_sliding(key.as_bytes(), limit, window.as_millis() as i64))
}

/// [`take`] over fixed windows aligned to the Unix epoch: no window allows
/// more than `limit`, but bursts at the end of one window and the start of
/// the next both pass (up to 2 × limit in a short span). For quotas per
/// calendar minute, hour or day; [`take`] is the safer default.
pub fn take_fixed(key: &str, limit: i64, window: Duration) -> Result<Taken, Error> {
    taken(imp::kv_take(key.as_bytes(), limit, window.as_millis() as i64))
}

fn taken(n: i64) -> Result<Taken, Error> {
    if n < 0 {
        return Err(kv_error(n));
    }
    let (denied, remaining, reset) = abi::unpack_take(n);
    Ok(Taken { allowed: !denied, remaining, reset: Duration::from_millis(reset as u64) })
}

#[cfg(target_arch = "wasm32")]
mod imp {
    #[link(wasm_import_module = "plantgate")]
    extern "C" {
        #[link_name = "log"]
        fn host_log(level: i32, ptr: *const u8, len: u32);
        #[link_name = "token_lookup"]
        fn host_token_lookup(hash: *const u8, hash_len: u32, out: *mut u8, cap: u32) -> i32;
        #[link_name = "kv_get"]
        fn host_kv_get(key: *const u8, key_len: u32, out: *mut u8, cap: u32) -> i32;
        #[link_name = "kv_set"]
        fn host_kv_set(key: *const u8, key_len: u32, val: *const u8, val_len: u32, ttl_ms: i64) -> i32;
        #[link_name = "kv_delete"]
        fn host_kv_delete(key: *const u8, key_len: u32) -> i32;
        #[link_name = "kv_incr"]
        fn host_kv_incr(key: *const u8, key_len: u32, delta: i64, window_ms: i64) -> i64;
        #[link_name = "kv_take"]
        fn host_kv_take(key: *const u8, key_len: u32, limit: i64, window_ms: i64) -> i64;
        #[link_name = "kv_take_sliding"]
        fn host_kv_take_sliding(key: *const u8, key_len: u32, limit: i64, window_ms: i64) -> i64;
    }

    pub fn log(level: i32, msg: &[u8]) {
        unsafe { host_log(level, msg.as_ptr(), msg.len() as u32) }
    }
    pub fn token_lookup(digest: &[u8; 32], out: &mut [u8]) -> i32 {
        unsafe { host_token_lookup(digest.as_ptr(), 32, out.as_mut_ptr(), out.len() as u32) }
    }
    pub fn kv_get(key: &[u8], out: &mut [u8]) -> i32 {
        unsafe { host_kv_get(key.as_ptr(), key.len() as u32, out.as_mut_ptr(), out.len() as u32) }
    }
    pub fn kv_set(key: &[u8], value: &[u8], ttl_ms: i64) -> i32 {
        unsafe { host_kv_set(key.as_ptr(), key.len() as u32, value.as_ptr(), value.len() as u32, ttl_ms) }
    }
    pub fn kv_delete(key: &[u8]) -> i32 {
        unsafe { host_kv_delete(key.as_ptr(), key.len() as u32) }
    }
    pub fn kv_incr(key: &[u8], delta: i64, window_ms: i64) -> i64 {
        unsafe { host_kv_incr(key.as_ptr(), key.len() as u32, delta, window_ms) }
    }
    pub fn kv_take(key: &[u8], limit: i64, window_ms: i64) -> i64 {
        unsafe { host_kv_take(key.as_ptr(), key.len() as u32, limit, window_ms) }
    }
    pub fn kv_take_sliding(key: &[u8], limit: i64, window_ms: i64) -> i64 {
        unsafe { host_kv_take_sliding(key.as_ptr(), key.len() as u32, limit, window_ms) }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use crate::testing::with_host;

    pub fn log(level: i32, msg: &[u8]) {
        with_host(|h| h.log(level, msg))
    }
    pub fn token_lookup(digest: &[u8; 32], out: &mut [u8]) -> i32 {
        with_host(|h| h.token_lookup(digest, out))
    }
    pub fn kv_get(key: &[u8], out: &mut [u8]) -> i32 {
        with_host(|h| h.kv_get(key, out))
    }
    pub fn kv_set(key: &[u8], value: &[u8], ttl_ms: i64) -> i32 {
        with_host(|h| h.kv_set(key, value, ttl_ms))
    }
    pub fn kv_delete(key: &[u8]) -> i32 {
        with_host(|h| h.kv_delete(key))
    }
    pub fn kv_incr(key: &[u8], delta: i64, window_ms: i64) -> i64 {
        with_host(|h| h.kv_incr(key, delta, window_ms))
    }
    pub fn kv_take(key: &[u8], limit: i64, window_ms: i64) -> i64 {
        with_host(|h| h.kv_take(key, limit, window_ms))
    }
    pub fn kv_take_sliding(key: &[u8], limit: i64, window_ms: i64) -> i64 {
        with_host(|h| h.kv_take_sliding(key, limit, window_ms))
    }
}

//! The Plantgate guest kit for Rust: what a policy plugin written in Rust
//! links to, built from the written ABI (docs/abi.md), std only, no
//! dependencies. It decodes each request the host sends, calls the
//! plugin's handlers and encodes their decision, without allocating on the
//! per-call path: one request buffer and one decision record, both static.
//!
//! ```ignore
//! use plantgate::{Decision, Plant};
//!
//! fn validate(p: Plant) -> Decision {
//!     if p.name.is_empty() {
//!         return Decision::deny(40060, "name must not be empty");
//!     }
//!     Decision::allow()
//! }
//!
//! plantgate::plugin!(validate: validate);
//! ```
//!
//! Build a module with `rustc --target wasm32-wasi --crate-type cdylib`
//! (sdk/rust/README.md). The same code compiles natively, where
//! [`testing`] drives the export bodies, so `rustc --test` unit-tests a
//! plugin without a gateway.
//!
//! Notes:
//! - The strings of a [`Request`] or [`Plant`] borrow the request buffer:
//!   they live until the handler returns.
//! - Everything that goes wrong fails closed: an invalid deny code, a deny
//!   code the phase may not use, or a request that does not parse becomes a
//!   fault; a panic traps, which the host also answers as a fault (the
//!   panic's message is logged first, see [`plugin!`]).

pub mod abi;
mod host;
#[doc(hidden)]
pub mod rt;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
#[cfg(test)]
mod tests;

use std::fmt;

pub use host::{
    delete, get, get_into, incr, log, logf, lookup_token, set, take, take_fixed, Error, Level, Taken, Token,
};

/// Who a request is from: a valid token's name and scopes, empty before a
/// token lookup of the request's credential found one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Principal<'a> {
    pub name: &'a str,
    /// Space-separated.
    pub scopes: &'a str,
}

impl Principal<'_> {
    /// Reports whether `scope` is one of the principal's scopes.
    pub fn has_scope(&self, scope: &str) -> bool {
        has_scope(self.scopes, scope)
    }
}

pub(crate) fn has_scope(scopes: &str, scope: &str) -> bool {
    !scope.is_empty() && scopes.split(' ').any(|s| s == scope)
}

/// The authorize phase's request: the request line, the operation and the
/// bearer credential, before the host reads the body.
#[derive(Clone, Copy, Debug, Default)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The bearer token as sent, "" when none: never log it.
    pub credential: &'a str,
    /// The operation: "GET /plants", "POST /plants", "GET /plants/{id}" or
    /// "DELETE /plants/{id}".
    pub route: &'a str,
    /// The plant id a /plants/{id} path names.
    pub path_id: Option<i64>,
    /// The X-Request-ID the gateway gave the request.
    pub request_id: &'a str,
    /// The client's IP address as text.
    pub client: &'a str,
    /// Who the request is from, once a token lookup found its token valid.
    pub caller: Principal<'a>,
    pub(crate) digest: Option<&'a [u8]>,
    pub(crate) headers: &'a [u8],
}

impl<'a> Request<'a> {
    /// The value of request header `name` (any case), as sent, when the
    /// request had it. A plugin sees only the headers its sidecar asks for
    /// (`{"headers": ["X-Tenant"]}`).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        let mut b = self.headers;
        while let Some((n, v, rest)) = abi::next_header(b) {
            if n.eq_ignore_ascii_case(name.as_bytes()) {
                return Some(v);
            }
            b = rest;
        }
        None
    }

    /// The SHA-256 digest of the credential, which the host sends with the
    /// request: the key [`lookup_token`] takes. None when there is no
    /// credential (or a host too old to send it).
    pub fn credential_digest(&self) -> Option<&'a [u8; abi::DIGEST_SIZE]> {
        self.digest.and_then(|d| <&[u8; abi::DIGEST_SIZE]>::try_from(d).ok())
    }
}

/// The validate phase's request: the host's canonical decoding of the body.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plant<'a> {
    pub id: i64,
    pub name: &'a str,
    /// None when the body had no tag; Some("") is a valid tag.
    pub tag: Option<&'a str>,
    /// The text the authorize chain allowed with (`Decision::allow_as`, the
    /// first non-empty one), "" when none. Who the request is from is
    /// `caller`; this is whatever an authorize plugin chose to name.
    pub allowed_as: &'a str,
    /// Who the request is from, as [`Request::caller`].
    pub caller: Principal<'a>,
}

/// First plugin code of each status a plugin may deny with; a plugin picks
/// its own codes in the same hundred (last two digits 50–99).
pub const CODE_BAD_REQUEST: i32 = 40050;
pub const CODE_UNAUTHORIZED: i32 = 40150;
pub const CODE_FORBIDDEN: i32 = 40350;
pub const CODE_TOO_MANY_REQUESTS: i32 = 42950;
pub const CODE_UNAVAILABLE: i32 = 50350;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Allow,
    Deny,
    Fault,
}

/// A decision's text: borrowed, or formatted into the decision itself so
/// that formatting a message never allocates.
#[derive(Clone)]
enum Text<'a> {
    Borrowed(&'a str),
    Inline { len: u16, buf: [u8; abi::MAX_TEXT] },
}

/// The bytes [`Decision::with_header_fmt`] may format into a decision, for
/// all its header values together.
pub const MAX_FORMATTED_HEADERS: usize = 256;

/// A response header value: borrowed, or formatted into the decision's
/// header buffer (start, len).
#[derive(Clone, Copy)]
enum HeaderValue<'a> {
    Borrowed(&'a str),
    Inline(u16, u16),
}

/// A handler's answer: allow, deny with a code and a message, or fault.
#[derive(Clone)]
pub struct Decision<'a> {
    kind: Kind,
    code: i32,
    text: Text<'a>,
    hdr: [(&'static str, HeaderValue<'a>); 3],
    nhdr: u8,
    // None until a value is formatted: building an allow or a deny then
    // never writes these bytes (in a guest with the host's loop guard a
    // zeroing loop costs per iteration).
    hbuf: Option<[u8; MAX_FORMATTED_HEADERS]>,
    hlen: u16,
}

impl<'a> Decision<'a> {
    fn new(kind: Kind, code: i32, text: Text<'a>) -> Self {
        Decision { kind, code, text, hdr: [("", HeaderValue::Borrowed("")); 3], nhdr: 0, hbuf: None, hlen: 0 }
    }

    /// Allows the request. Free: the host reads no memory for it.
    pub fn allow() -> Self {
        Self::new(Kind::Allow, 0, Text::Borrowed(""))
    }

    /// Allows and names the principal the request acts for.
    pub fn allow_as(principal: &'a str) -> Self {
        Self::new(Kind::Allow, 0, Text::Borrowed(principal))
    }

    /// [`Decision::allow_as`] with a formatted principal, written into the
    /// decision: for a name that does not outlive the handler, like a
    /// token's from [`lookup_token`] (`format_args!("{}", token.name)`).
    pub fn allow_as_fmt(principal: fmt::Arguments) -> Self {
        Self::new(Kind::Allow, 0, inline(principal))
    }

    /// Denies with `code` and a message the client sees; the HTTP status is
    /// code / 100. A code outside the plugin range (`abi::valid_deny_code`)
    /// makes a fault instead, so a typo fails closed. A message over
    /// `abi::MAX_TEXT` bytes is cut at a character boundary.
    pub fn deny(code: i32, message: &'a str) -> Self {
        if !abi::valid_deny_code(code) {
            return bad_code(code);
        }
        Self::new(Kind::Deny, code, Text::Borrowed(message))
    }

    /// [`Decision::deny`] with a formatted message, written into the
    /// decision without allocating: `Decision::deny_fmt(40051,
    /// format_args!("got {}", n))`, or the [`deny!`] macro.
    pub fn deny_fmt(code: i32, message: fmt::Arguments) -> Self {
        if !abi::valid_deny_code(code) {
            return bad_code(code);
        }
        Self::new(Kind::Deny, code, inline(message))
    }

    /// The plugin cannot decide: the host fails closed (a 5xx without this
    /// text) and logs `reason`.
    pub fn fault(reason: &'a str) -> Self {
        Self::new(Kind::Fault, 0, Text::Borrowed(reason))
    }

    /// [`Decision::fault`] with a formatted reason.
    pub fn fault_fmt(reason: fmt::Arguments) -> Self {
        Self::new(Kind::Fault, 0, inline(reason))
    }

    /// Sets response header `name` (Retry-After, RateLimit or
    /// RateLimit-Policy, any case) on an allow or a deny; a fault ignores
    /// it. Any other name, or a value that is not 1 to 1024 bytes of
    /// printable ASCII, makes a fault, as the host would refuse it.
    pub fn with_header(self, name: &str, value: &'a str) -> Self {
        self.set_header(name, value, HeaderValue::Borrowed(value))
    }

    /// [`Decision::with_header`] with a formatted value, written into the
    /// decision (at most [`MAX_FORMATTED_HEADERS`] bytes for all of them)
    /// without allocating: `.with_header_fmt("Retry-After", format_args!("{}", secs))`.
    pub fn with_header_fmt(mut self, name: &str, value: fmt::Arguments) -> Self {
        if self.kind == Kind::Fault {
            return self;
        }
        let start = self.hlen as usize;
        let mut w = TextWriter::<MAX_FORMATTED_HEADERS> { buf: [0; MAX_FORMATTED_HEADERS], len: 0, full: false };
        let _ = fmt::write(&mut w, value);
        if w.full || start + w.len > MAX_FORMATTED_HEADERS {
            return Self::fault_fmt(format_args!(
                "sdk: formatted response header values exceed {} bytes",
                MAX_FORMATTED_HEADERS
            ));
        }
        self.hbuf.get_or_insert([0; MAX_FORMATTED_HEADERS])[start..start + w.len].copy_from_slice(&w.buf[..w.len]);
        self.hlen += w.len as u16;
        let v = std::str::from_utf8(&w.buf[..w.len]).unwrap_or("\u{1}");
        self.set_header(name, v, HeaderValue::Inline(start as u16, w.len as u16))
    }

    fn set_header(mut self, name: &str, value: &str, stored: HeaderValue<'a>) -> Self {
        if self.kind == Kind::Fault {
            return self;
        }
        let canon = match abi::response_header(name) {
            Some(c) => c,
            None => {
                return Self::fault_fmt(format_args!(
                    "sdk: response header {:?} is not allowed; see docs/abi.md",
                    name
                ))
            }
        };
        if value.is_empty()
            || value.len() > abi::MAX_HEADER_VALUE
            || !value.bytes().all(|c| (0x20..=0x7e).contains(&c))
        {
            return Self::fault_fmt(format_args!(
                "sdk: response header {} value must be 1 to 1024 bytes of printable ASCII",
                canon
            ));
        }
        let n = self.nhdr as usize;
        match self.hdr[..n].iter_mut().find(|h| h.0 == canon) {
            Some(h) => h.1 = stored,
            None => {
                self.hdr[n] = (canon, stored);
                self.nhdr += 1;
            }
        }
        self
    }

    /// The value this decision sets for response header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        let canon = abi::response_header(name)?;
        self.hdr[..self.nhdr as usize].iter().find(|h| h.0 == canon).map(|h| self.header_value(h.1))
    }

    pub(crate) fn header_value(&self, v: HeaderValue<'a>) -> &str {
        match v {
            HeaderValue::Borrowed(s) => s,
            // Written only from a str, whole.
            HeaderValue::Inline(start, len) => {
                let b = self.hbuf.as_ref().map_or(&[][..], |b| &b[start as usize..(start + len) as usize]);
                std::str::from_utf8(b).unwrap_or("")
            }
        }
    }

    /// The response headers, in the order first set.
    pub(crate) fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.hdr[..self.nhdr as usize].iter().map(move |h| (h.0, self.header_value(h.1)))
    }

    pub fn is_allowed(&self) -> bool {
        self.kind == Kind::Allow
    }
    pub fn is_denied(&self) -> bool {
        self.kind == Kind::Deny
    }
    pub fn is_faulted(&self) -> bool {
        self.kind == Kind::Fault
    }
    /// The deny code, 0 when not a deny.
    pub fn code(&self) -> i32 {
        self.code
    }
    /// The deny message, the fault reason or the allow's principal.
    pub fn text(&self) -> &str {
        match &self.text {
            Text::Borrowed(s) => s,
            // Inline text is written only from a str, cut at a character
            // boundary, so it is UTF-8.
            Text::Inline { len, buf } => std::str::from_utf8(&buf[..*len as usize]).unwrap_or(""),
        }
    }
}

impl fmt::Debug for Decision<'_> {
    /// "allow", "allow as ci", "deny 40151: invalid token", "fault: reason".
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.kind {
            Kind::Allow if self.text().is_empty() => f.write_str("allow"),
            Kind::Allow => write!(f, "allow as {}", self.text()),
            Kind::Deny => write!(f, "deny {}: {}", self.code, self.text()),
            Kind::Fault => write!(f, "fault: {}", self.text()),
        }
    }
}

fn bad_code(code: i32) -> Decision<'static> {
    Decision::fault_fmt(format_args!(
        "sdk: deny code {} is outside the plugin ranges {}",
        code,
        abi::deny_ranges(0)
    ))
}

/// Formats into an inline text, cut at `abi::MAX_TEXT` bytes on a
/// character boundary.
fn inline(args: fmt::Arguments) -> Text<'static> {
    let mut w = TextWriter { buf: [0; abi::MAX_TEXT], len: 0, full: false };
    let _ = fmt::write(&mut w, args);
    Text::Inline { len: w.len as u16, buf: w.buf }
}

pub(crate) struct TextWriter<const N: usize> {
    pub(crate) buf: [u8; N],
    pub(crate) len: usize,
    pub(crate) full: bool,
}

impl<const N: usize> fmt::Write for TextWriter<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.full {
            return Ok(());
        }
        let room = N - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        self.full = n < s.len();
        Ok(())
    }
}

/// Denies with a formatted message, without allocating:
/// `deny!(40050, "id must be at least {}, got {}", min, id)`.
#[macro_export]
macro_rules! deny {
    ($code:expr, $($arg:tt)+) => {
        $crate::Decision::deny_fmt($code, format_args!($($arg)+))
    };
}

/// A plugin's handlers. Build it with [`plugin!`], which also writes the
/// module's exports.
#[derive(Clone, Copy)]
pub struct Handlers {
    /// Receives the sidecar's "config" value (JSON) once per instance,
    /// before any request; an Err refuses the plugin with that text.
    /// Without one, the plugin takes only an empty, null or {} config.
    pub configure: Option<fn(&[u8]) -> Result<(), String>>,
    pub authorize: Option<for<'a> fn(Request<'a>) -> Decision<'a>>,
    pub validate: Option<for<'a> fn(Plant<'a>) -> Decision<'a>>,
}

impl Handlers {
    /// No handlers: the base of [`plugin!`]'s struct update.
    pub const NONE: Handlers = Handlers { configure: None, authorize: None, validate: None };

    /// The `plantgate_phases` bit set.
    pub const fn phases(&self) -> u32 {
        let mut p = 0;
        if self.authorize.is_some() {
            p |= abi::PHASE_AUTHORIZE;
        }
        if self.validate.is_some() {
            p |= abi::PHASE_VALIDATE;
        }
        p
    }
}

/// Declares the plugin's handlers and writes the module's exports
/// (`plantgate_abi_version`, `plantgate_phases`, `plantgate_buffer`,
/// `plantgate_configure`, `plantgate_authorize`, `plantgate_validate`,
/// `_initialize`). Name any of `configure`, `authorize` and `validate`:
///
/// ```ignore
/// plantgate::plugin!(configure: configure, validate: validate);
/// ```
///
/// It also defines `pub static PLANTGATE: plantgate::Handlers`, which
/// [`testing`] takes. `_initialize` installs a panic hook that logs the
/// panic's message and place as one error line before the module traps.
#[macro_export]
macro_rules! plugin {
    ($($phase:ident : $f:expr),* $(,)?) => {
        pub static PLANTGATE: $crate::Handlers =
            $crate::Handlers { $($phase: Some($f),)* ..$crate::Handlers::NONE };

        #[cfg(target_arch = "wasm32")]
        mod __plantgate_exports {
            #[no_mangle]
            pub extern "C" fn _initialize() { $crate::rt::initialize() }
            #[no_mangle]
            pub extern "C" fn plantgate_abi_version() -> u32 { $crate::abi::VERSION }
            #[no_mangle]
            pub extern "C" fn plantgate_phases() -> u32 { super::PLANTGATE.phases() }
            #[no_mangle]
            pub extern "C" fn plantgate_buffer(size: u32) -> u32 { $crate::rt::export_buffer(size) }
            #[no_mangle]
            pub extern "C" fn plantgate_configure(ptr: u32, len: u32) -> u64 {
                $crate::rt::export_configure(&super::PLANTGATE, ptr, len)
            }
            #[no_mangle]
            pub extern "C" fn plantgate_authorize(ptr: u32, len: u32) -> u64 {
                $crate::rt::export_authorize(&super::PLANTGATE, ptr, len)
            }
            #[no_mangle]
            pub extern "C" fn plantgate_validate(ptr: u32, len: u32) -> u64 {
                $crate::rt::export_validate(&super::PLANTGATE, ptr, len)
            }
        }
    };
}

//! The guest side of every export (hidden: [`crate::plugin!`] calls it).
//! The bodies take a request in the ABI layout and write a decision record
//! into a record buffer; the wasm32 wrappers add address translation and
//! the static buffers, and [`crate::testing`] drives the same bodies
//! natively.

use crate::abi::{self, MAX_DECISION, MAX_TEXT};
use crate::{Decision, Handlers, Kind, Plant, Principal, Request};

/// A decision record buffer.
pub type Record = [u8; MAX_DECISION];

/// The smallest request buffer and the largest request the guest accepts:
/// a larger one gets address 0, and the host fails closed.
pub const MIN_REQUEST: usize = 4 << 10;
pub const MAX_REQUEST: usize = 16 << 20;

/// What an export body answers: allow (no record), or a record of n bytes.
pub type Answer = Option<usize>;

/// The body of `plantgate_configure`.
pub fn configure(h: &Handlers, msg: &[u8], rec: &mut Record) -> Answer {
    match h.configure {
        None => {
            let c = trim_space(msg);
            if c.is_empty() || c == b"null" || c == b"{}" {
                return None;
            }
            let n = msg.len().min(64);
            fault(
                rec,
                format_args!(
                    "the plugin takes no config, got {:?}{}: remove \"config\" from its sidecar, or handle it with plantgate::plugin!(configure: …)",
                    String::from_utf8_lossy(&msg[..n]),
                    if n < msg.len() { "…" } else { "" }
                ),
            )
        }
        Some(f) => match f(msg) {
            Ok(()) => None,
            Err(e) => fault(rec, format_args!("{}", e)),
        },
    }
}

/// The body of `plantgate_authorize`.
pub fn authorize(h: &Handlers, msg: &[u8], rec: &mut Record) -> Answer {
    let f = match h.authorize {
        Some(f) => f,
        None => {
            return fault(rec, format_args!("sdk: authorize called but the plugin registered no authorize handler"))
        }
    };
    let m = match abi::parse_authorize(msg) {
        Ok(m) => m,
        Err(e) => return fault(rec, format_args!("sdk: authorize request: {}", e)),
    };
    let r = (|| {
        Some(Request {
            method: text(m.method)?,
            path: text(m.path)?,
            credential: text(m.credential)?,
            route: text(m.route)?,
            path_id: m.path_id,
            request_id: text(m.request_id)?,
            client: text(m.client)?,
            caller: Principal { name: text(m.principal)?, scopes: text(m.scopes)? },
            digest: m.digest,
            headers: m.headers,
        })
    })();
    match r {
        Some(r) => encode(rec, abi::PHASE_AUTHORIZE, "authorize", &f(r)),
        None => fault(rec, format_args!("sdk: authorize request: a field is not UTF-8")),
    }
}

/// The body of `plantgate_validate`.
pub fn validate(h: &Handlers, msg: &[u8], rec: &mut Record) -> Answer {
    let f = match h.validate {
        Some(f) => f,
        None => {
            return fault(rec, format_args!("sdk: validate called but the plugin registered no validate handler"))
        }
    };
    let m = match abi::parse_validate(msg) {
        Ok(m) => m,
        Err(e) => return fault(rec, format_args!("sdk: validate request: {}", e)),
    };
    let p = (|| {
        Some(Plant {
            id: m.id,
            name: text(m.name)?,
            tag: match m.tag {
                Some(t) => Some(text(t)?),
                None => None,
            },
            allowed_as: text(m.allowed_as)?,
            caller: Principal { name: text(m.caller_name)?, scopes: text(m.caller_scopes)? },
        })
    })();
    match p {
        Some(p) => encode(rec, abi::PHASE_VALIDATE, "validate", &f(p)),
        None => fault(rec, format_args!("sdk: validate request: a field is not UTF-8")),
    }
}

/// The host's strings are UTF-8; one that is not fails the call closed.
fn text(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok()
}

fn trim_space(b: &[u8]) -> &[u8] {
    let s = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let e = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(s, |i| i + 1);
    &b[s..e]
}

/// Writes d's record, or answers allow without one for a plain allow.
pub(crate) fn encode(rec: &mut Record, phase: u32, name: &str, d: &Decision) -> Answer {
    match d.kind {
        Kind::Allow if d.text().is_empty() && d.nhdr == 0 => None,
        Kind::Deny if !abi::phase_denies(phase, d.code) => fault(
            rec,
            format_args!("sdk: {} may not deny with {}; it may use {}", name, d.code, abi::deny_ranges(phase)),
        ),
        Kind::Allow => Some(record(rec, abi::VERDICT_ALLOW, 0, d)),
        Kind::Deny => Some(record(rec, abi::VERDICT_DENY, d.code, d)),
        Kind::Fault => Some(record(rec, abi::VERDICT_FAULT, 0, d)),
    }
}

fn record(rec: &mut Record, verdict: u8, code: i32, d: &Decision) -> usize {
    rec[0] = verdict;
    rec[1] = 0;
    rec[2] = 0;
    rec[3] = 0;
    rec[4..8].copy_from_slice(&code.to_le_bytes());
    let mut n = abi::DECISION_HEADER;
    if d.nhdr > 0 && verdict != abi::VERDICT_FAULT {
        rec[1] = abi::DECISION_HEADERS;
        let mark = n;
        n += 4;
        for (name, value) in d.headers() {
            n = put_str(rec, n, name.as_bytes());
            n = put_str(rec, n, value.as_bytes());
        }
        let block = (n - mark - 4) as u32;
        rec[mark..mark + 4].copy_from_slice(&block.to_le_bytes());
    }
    let t = d.text();
    let mut len = t.len().min(MAX_TEXT);
    while !t.is_char_boundary(len) {
        len -= 1;
    }
    rec[n..n + len].copy_from_slice(&t.as_bytes()[..len]);
    n + len
}

fn put_str(rec: &mut Record, n: usize, s: &[u8]) -> usize {
    rec[n..n + 4].copy_from_slice(&(s.len() as u32).to_le_bytes());
    rec[n + 4..n + 4 + s.len()].copy_from_slice(s);
    n + 4 + s.len()
}

fn fault(rec: &mut Record, reason: std::fmt::Arguments) -> Answer {
    Some(record(rec, abi::VERDICT_FAULT, 0, &Decision::fault_fmt(reason)))
}

#[cfg(target_arch = "wasm32")]
pub use wasm::*;

#[cfg(target_arch = "wasm32")]
mod wasm {
    use super::*;

    // A module instance serves one call at a time, and wasm32 has one
    // thread: the exports are the only users of these buffers.
    static mut REQUEST: Vec<u8> = Vec::new();
    static mut RECORD: Record = [0; MAX_DECISION];

    /// `_initialize`: a panic logs its message and place as one line
    /// before the module traps (a panic cannot be caught here: wasm32 std
    /// is built to abort).
    pub fn initialize() {
        std::panic::set_hook(Box::new(|info| {
            crate::logf(crate::Level::Error, format_args!("sdk: plugin panicked: {}", info));
        }));
    }

    /// `plantgate_buffer`: the request buffer, grown to at least size bytes.
    /// It moves only when asked for more than it had, as the ABI promises.
    pub fn export_buffer(size: u32) -> u32 {
        let size = size as usize;
        if size > MAX_REQUEST {
            return 0;
        }
        unsafe {
            if REQUEST.len() < size || REQUEST.is_empty() {
                let mut n = REQUEST.len().max(MIN_REQUEST);
                while n < size {
                    n <<= 1;
                }
                REQUEST = vec![0; n];
            }
            REQUEST.as_ptr() as u32
        }
    }

    fn export(body: fn(&Handlers, &[u8], &mut Record) -> Answer, h: &Handlers, ptr: u32, len: u32) -> u64 {
        unsafe {
            let base = REQUEST.as_ptr() as u32;
            let off = ptr.wrapping_sub(base) as usize;
            let ans = if ptr < base || off + len as usize > REQUEST.len() {
                fault(&mut RECORD, format_args!("sdk: request is not inside the buffer from plantgate_buffer"))
            } else {
                body(h, &REQUEST[off..off + len as usize], &mut RECORD)
            };
            match ans {
                None => 0,
                Some(n) => (RECORD.as_ptr() as u64) << 32 | n as u64,
            }
        }
    }

    pub fn export_configure(h: &Handlers, ptr: u32, len: u32) -> u64 {
        export(configure, h, ptr, len)
    }
    pub fn export_authorize(h: &Handlers, ptr: u32, len: u32) -> u64 {
        export(authorize, h, ptr, len)
    }
    pub fn export_validate(h: &Handlers, ptr: u32, len: u32) -> u64 {
        export(validate, h, ptr, len)
    }
}

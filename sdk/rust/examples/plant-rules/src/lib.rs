//! plant-rules in Rust: the bundled plant-rules policy
//! (plugins/plant-rules/main.go) rewritten on the Rust guest kit, with the
//! same rules, order, codes, messages, config keys and defaults. The
//! decisions it must give are testdata/expect/plant-rules.jsonl.
//!
//! The rules, checked in this order (the first that fails decides):
//!
//! ```text
//! code   rule (defaults)
//! 40050  id is at least id_min (1)
//! 40052  name has no control characters (unless allow_control)
//! 40051  name has name_min–name_max (1–100) characters after trimming spaces
//! 40054  tag has no control characters (unless allow_control), when present
//! 40053  tag has tag_min–tag_max (1–50) characters after trimming, when present
//! ```
//!
//! Characters are Unicode code points; trimming removes leading and
//! trailing white space; control characters are Unicode's Cc.
//!
//! Build: make -C sdk/rust example (rustc --target wasm32-wasi --crate-type cdylib).

mod config;

use config::Config;
use plantgate::{deny, Decision, Plant};
use std::cell::Cell;

const CODE_ID: i32 = 40050;
const CODE_NAME_LENGTH: i32 = 40051;
const CODE_NAME_CONTROL: i32 = 40052;
const CODE_TAG_LENGTH: i32 = 40053;
const CODE_TAG_CONTROL: i32 = 40054;

thread_local! {
    // The config in force; configure replaces it. thread_local costs
    // nothing on wasm32 (one thread) and keeps native tests apart.
    static CFG: Cell<Config> = Cell::new(Config::DEFAULT);
}

plantgate::plugin!(configure: configure, validate: validate);

fn configure(raw: &[u8]) -> Result<(), String> {
    let c = config::parse(raw).map_err(|e| format!("plant-rules config: {}", e))?;
    CFG.with(|cfg| cfg.set(c));
    Ok(())
}

/// Applies the rules. The allow path does not allocate; messages are
/// formatted into the decision only when denying.
fn validate(p: Plant) -> Decision {
    let cfg = CFG.with(|c| c.get());
    if p.id < cfg.id_min {
        return deny!(CODE_ID, "id must be at least {}, got {}", cfg.id_min, p.id);
    }
    if let Some(d) = check(&cfg, "name", p.name, cfg.name_min, cfg.name_max, CODE_NAME_LENGTH, CODE_NAME_CONTROL) {
        return d;
    }
    if let Some(tag) = p.tag {
        if let Some(d) = check(&cfg, "tag", tag, cfg.tag_min, cfg.tag_max, CODE_TAG_LENGTH, CODE_TAG_CONTROL) {
            return d;
        }
    }
    Decision::allow()
}

/// The control-character and length rules for one field: None when it
/// passes.
fn check(cfg: &Config, field: &str, s: &str, lo: i64, hi: i64, code_length: i32, code_control: i32) -> Option<Decision<'static>> {
    let b = s.as_bytes();
    if b.iter().all(|&c| (0x20..=0x7e).contains(&c)) {
        // The usual field: printable ASCII, one character per byte, and
        // only spaces to trim.
        let t = s.trim_matches(' ');
        let n = t.len() as i64;
        if n >= lo && n <= hi {
            return None;
        }
    }
    if !cfg.allow_control {
        if let Some((i, c)) = s.chars().enumerate().find(|(_, c)| c.is_control()) {
            return Some(deny!(
                code_control,
                "{} must not contain control characters, found U+{:04X} at character {}",
                field,
                c as u32,
                i + 1
            ));
        }
    }
    let n = s.trim().chars().count() as i64;
    if n < lo || n > hi {
        if lo == hi {
            return Some(deny!(code_length, "{} must be exactly {} characters after trimming, got {}", field, lo, n));
        }
        return Some(deny!(code_length, "{} must be {}–{} characters after trimming, got {}", field, lo, hi, n));
    }
    None
}

#[cfg(test)]
mod tests;

//! plant-rules' config: a flat JSON object read over the defaults, with
//! the Go plugin's keys, checks and messages. Written by hand because the
//! kit has no dependencies (no serde): it reads exactly the JSON this
//! config can hold and says where anything else goes wrong.

/// The bounds; every bound is inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub name_min: i64,
    pub name_max: i64,
    pub tag_min: i64,
    pub tag_max: i64,
    pub id_min: i64,
    pub allow_control: bool,
}

impl Config {
    pub const DEFAULT: Config = Config { name_min: 1, name_max: 100, tag_min: 1, tag_max: 50, id_min: 1, allow_control: false };
}

const KNOWN: &str = "allow_control, id_min, name_max, name_min, tag_max, tag_min";

/// Reads raw over the defaults. Keys are checked in sorted order, so the
/// first error reported does not depend on the order they are written in;
/// a repeated key takes its last value, as in Go.
pub fn parse(raw: &[u8]) -> Result<Config, String> {
    let mut c = Config::DEFAULT;
    let raw = trim(raw);
    if raw.is_empty() || raw == b"null" {
        return Ok(c);
    }
    let mut pairs = object(raw).map_err(|e| format!("want a JSON object: {}", e))?;
    pairs.sort_by(|a, b| a.0.cmp(&b.0)); // stable: the last of a repeated key stays last
    let mut i = 0;
    while i < pairs.len() {
        while i + 1 < pairs.len() && pairs[i + 1].0 == pairs[i].0 {
            i += 1;
        }
        let (k, v) = (&pairs[i].0, pairs[i].1);
        let shown = String::from_utf8_lossy(v);
        i += 1;
        if k == "allow_control" {
            match v {
                b"true" => c.allow_control = true,
                b"false" => c.allow_control = false,
                _ => return Err(format!("allow_control must be true or false, got {}", shown)),
            }
            continue;
        }
        let p = match k.as_str() {
            "name_min" => &mut c.name_min,
            "name_max" => &mut c.name_max,
            "tag_min" => &mut c.tag_min,
            "tag_max" => &mut c.tag_max,
            "id_min" => &mut c.id_min,
            _ => return Err(format!("unknown key {:?} (known: {})", k, KNOWN)),
        };
        match integer(v) {
            Some(n) if n >= 0 => *p = n,
            _ => return Err(format!("{} must be an integer ≥ 0, got {}", k, shown)),
        }
    }
    if c.name_min > c.name_max {
        return Err(format!("name_min ({}) must not exceed name_max ({})", c.name_min, c.name_max));
    }
    if c.tag_min > c.tag_max {
        return Err(format!("tag_min ({}) must not exceed tag_max ({})", c.tag_min, c.tag_max));
    }
    Ok(c)
}

fn trim(b: &[u8]) -> &[u8] {
    let s = b.iter().position(|c| !is_ws(*c)).unwrap_or(b.len());
    let e = b.iter().rposition(|c| !is_ws(*c)).map_or(s, |i| i + 1);
    &b[s..e]
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// A JSON integer literal that fits an i64 (what Go's json reads into an
/// int64: no fraction, no exponent).
fn integer(v: &[u8]) -> Option<i64> {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// The (key, raw value) pairs of a JSON object that is all of b.
fn object(b: &[u8]) -> Result<Vec<(String, &[u8])>, String> {
    let mut p = Parser { b, i: 0 };
    let mut pairs = Vec::new();
    p.ws();
    match p.peek() {
        Some(b'{') => p.i += 1,
        Some(c) => {
            let kind = match c {
                b'[' => "array",
                b'"' => "string",
                b't' | b'f' => "bool",
                b'-' | b'0'..=b'9' => "number",
                _ => return Err(p.unexpected()),
            };
            p.value()?;
            p.ws();
            if p.i < b.len() {
                return Err(p.unexpected());
            }
            return Err(format!("cannot unmarshal {} into an object", kind));
        }
        None => return Err("unexpected end of JSON input".into()),
    }
    p.ws();
    if p.peek() == Some(b'}') {
        p.i += 1;
    } else {
        loop {
            p.ws();
            if p.peek() != Some(b'"') {
                return Err(p.unexpected());
            }
            let k = p.string()?;
            p.ws();
            if p.peek() != Some(b':') {
                return Err(p.unexpected());
            }
            p.i += 1;
            p.ws();
            let start = p.i;
            p.value()?;
            pairs.push((k, &b[start..p.i]));
            p.ws();
            match p.peek() {
                Some(b',') => p.i += 1,
                Some(b'}') => {
                    p.i += 1;
                    break;
                }
                _ => return Err(p.unexpected()),
            }
        }
    }
    p.ws();
    if p.i < b.len() {
        return Err(p.unexpected());
    }
    Ok(pairs)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while self.peek().map_or(false, is_ws) {
            self.i += 1;
        }
    }

    fn unexpected(&self) -> String {
        match self.peek() {
            None => "unexpected end of JSON input".into(),
            Some(c) => format!("invalid character {:?} at byte {}", c as char, self.i),
        }
    }

    fn value(&mut self) -> Result<(), String> {
        match self.peek() {
            Some(b'"') => self.string().map(|_| ()),
            Some(b'{') | Some(b'[') => {
                let close = if self.peek() == Some(b'{') { b'}' } else { b']' };
                self.i += 1;
                self.ws();
                if self.peek() == Some(close) {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    if close == b'}' {
                        if self.peek() != Some(b'"') {
                            return Err(self.unexpected());
                        }
                        self.string()?;
                        self.ws();
                        if self.peek() != Some(b':') {
                            return Err(self.unexpected());
                        }
                        self.i += 1;
                        self.ws();
                    }
                    self.value()?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(c) if c == close => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(self.unexpected()),
                    }
                }
            }
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-') | Some(b'0'..=b'9') => self.number(),
            _ => Err(self.unexpected()),
        }
    }

    /// A number, by JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    /// (checked by hand: parsing it as an f64 would link float parsing,
    /// a good part of a small module).
    fn number(&mut self) -> Result<(), String> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.unexpected()),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.unexpected());
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.unexpected());
            }
            self.digits();
        }
        Ok(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    fn literal(&mut self, want: &[u8]) -> Result<(), String> {
        if self.b[self.i..].starts_with(want) {
            self.i += want.len();
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    /// A string, its escapes decoded.
    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // the opening quote
        let mut out = String::new();
        loop {
            let c = self.peek().ok_or_else(|| "unexpected end of JSON input".to_string())?;
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let e = self.peek().ok_or_else(|| "unexpected end of JSON input".to_string())?;
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            if (0xD800..0xDC00).contains(&hi) && self.b[self.i..].starts_with(b"\\u") {
                                self.i += 2;
                                let lo = self.hex4()?;
                                char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF)).unwrap_or('\u{FFFD}')
                            } else {
                                char::from_u32(hi).unwrap_or('\u{FFFD}')
                            }
                        }
                        _ => return Err(format!("invalid escape at byte {}", self.i - 1)),
                    };
                    out.push(ch);
                }
                c if c < 0x20 => return Err(format!("invalid character {:?} in string at byte {}", c as char, self.i - 1)),
                _ => {
                    // Copy the run of plain bytes; the config is UTF-8 text.
                    let start = self.i - 1;
                    while let Some(c) = self.peek() {
                        if c == b'"' || c == b'\\' || c < 0x20 {
                            break;
                        }
                        self.i += 1;
                    }
                    out.push_str(&String::from_utf8_lossy(&self.b[start..self.i]));
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.b.get(self.i..self.i + 4).and_then(|h| std::str::from_utf8(h).ok());
        match h.and_then(|h| u32::from_str_radix(h, 16).ok()) {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => Err(format!("invalid \\u escape at byte {}", self.i)),
        }
    }
}

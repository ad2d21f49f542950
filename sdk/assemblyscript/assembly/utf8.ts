// UTF-8 text without copies. The wire carries UTF-8 while AssemblyScript
// strings are UTF-16, so the kit hands request fields out as Utf8 views of
// the request buffer: reading them costs nothing, and toString() converts
// (and allocates) only when a handler asks.

/** A read-only view of UTF-8 bytes in this module's memory: a request
 * field, a token's name, a KV value. Views of a request are valid until the
 * handler returns; call toString() to keep the text. */
@final
export class Utf8 {
  /** Address of the first byte. */
  ptr: usize = 0;
  /** Length in bytes. */
  len: i32 = 0;

  /** set points the view at len bytes at ptr; it returns this. */
  set(ptr: usize, len: i32): Utf8 {
    this.ptr = ptr;
    this.len = len;
    return this;
  }

  /** isEmpty reports whether the view has no bytes. */
  isEmpty(): bool {
    return this.len == 0;
  }

  /** at returns the byte at index i (0 <= i < len). */
  at(i: i32): u8 {
    return load<u8>(this.ptr + <usize>i);
  }

  /** toString decodes the bytes into a new string (it allocates). */
  toString(): string {
    return String.UTF8.decodeUnsafe(this.ptr, <usize>this.len);
  }

  /** equals reports whether the bytes are s encoded as UTF-8. It does not
   * allocate. */
  equals(s: string): bool {
    return equalString(this.ptr, this.len, s, false);
  }

  /** equalsFold is equals with ASCII letters compared without case, as
   * header names are. */
  equalsFold(s: string): bool {
    return equalString(this.ptr, this.len, s, true);
  }

  /** codePoints counts the Unicode code points, an invalid byte as one
   * (as Go's utf8.RuneCount). */
  codePoints(): i32 {
    return runeCount(this.ptr, this.len);
  }
}

/** RUNE_ERROR is what decodeRune answers for an invalid byte, U+FFFD. */
export const RUNE_ERROR: u32 = 0xfffd;

/** decodeRune decodes the code point at p (p < end) as Go's
 * utf8.DecodeRune does: an invalid or truncated sequence is U+FFFD of one
 * byte. It returns the code point in the low 21 bits and its byte length
 * in the top byte: `const r = decodeRune(p, end); cp = r & 0x1fffff;
 * size = r >>> 24`. */
export function decodeRune(p: usize, end: usize): u32 {
  const b0 = <u32>load<u8>(p);
  if (b0 < 0x80) return b0 | (1 << 24);
  const n = end - p;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    if (n >= 2) {
      const b1 = <u32>load<u8>(p, 1);
      if ((b1 & 0xc0) == 0x80) return ((b0 & 0x1f) << 6 | (b1 & 0x3f)) | (2 << 24);
    }
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    if (n >= 3) {
      const b1 = <u32>load<u8>(p, 1);
      const b2 = <u32>load<u8>(p, 2);
      const lo: u32 = b0 == 0xe0 ? 0xa0 : 0x80;
      const hi: u32 = b0 == 0xed ? 0x9f : 0xbf;
      if (b1 >= lo && b1 <= hi && (b2 & 0xc0) == 0x80) {
        return ((b0 & 0x0f) << 12 | (b1 & 0x3f) << 6 | (b2 & 0x3f)) | (3 << 24);
      }
    }
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    if (n >= 4) {
      const b1 = <u32>load<u8>(p, 1);
      const b2 = <u32>load<u8>(p, 2);
      const b3 = <u32>load<u8>(p, 3);
      const lo: u32 = b0 == 0xf0 ? 0x90 : 0x80;
      const hi: u32 = b0 == 0xf4 ? 0x8f : 0xbf;
      if (b1 >= lo && b1 <= hi && (b2 & 0xc0) == 0x80 && (b3 & 0xc0) == 0x80) {
        return ((b0 & 0x07) << 18 | (b1 & 0x3f) << 12 | (b2 & 0x3f) << 6 | (b3 & 0x3f)) | (4 << 24);
      }
    }
  }
  return RUNE_ERROR | (1 << 24);
}

/** decodeLastRune decodes the code point that ends at end (start < end),
 * as Go's utf8.DecodeLastRune. Same packing as decodeRune. */
export function decodeLastRune(start: usize, end: usize): u32 {
  let p = end - 1;
  if (load<u8>(p) < 0x80) return <u32>load<u8>(p) | (1 << 24);
  // Back up over at most three continuation bytes to a start byte.
  const lim = end - start > 4 ? end - 4 : start;
  while (p > lim && (load<u8>(p) & 0xc0) == 0x80) p--;
  const r = decodeRune(p, end);
  if (p + (r >>> 24) != end) return RUNE_ERROR | (1 << 24);
  return r;
}

/** runeCount counts code points in len bytes at ptr, an invalid byte as
 * one. */
export function runeCount(ptr: usize, len: i32): i32 {
  const end = ptr + <usize>len;
  let n = 0;
  let p = ptr;
  while (p < end) {
    const b = load<u8>(p);
    if (b < 0x80) {
      p++;
    } else {
      p += decodeRune(p, end) >>> 24;
    }
    n++;
  }
  return n;
}

/** isControl is Go's unicode.IsControl: the C0 and C1 control codes,
 * U+0000-U+001F and U+007F-U+009F. */
export function isControl(cp: u32): bool {
  return cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f);
}

/** isSpace is Go's unicode.IsSpace: white space as strings.TrimSpace
 * trims it. */
export function isSpace(cp: u32): bool {
  if (cp <= 0xff) {
    return cp == 0x20 || (cp >= 0x09 && cp <= 0x0d) || cp == 0x85 || cp == 0xa0;
  }
  return cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
    cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/** utf8Length is the length of s encoded as UTF-8, a lone surrogate as
 * U+FFFD (3 bytes). */
export function utf8Length(s: string): i32 {
  const p = changetype<usize>(s);
  const n = s.length;
  let out = 0;
  for (let i = 0; i < n; i++) {
    const c = <u32>load<u16>(p + (<usize>i << 1));
    if (c < 0x80) out += 1;
    else if (c < 0x800) out += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      const d = <u32>load<u16>(p + (<usize>(i + 1) << 1));
      if (d >= 0xdc00 && d <= 0xdfff) {
        out += 4;
        i++;
      } else out += 3;
    } else out += 3;
  }
  return out;
}

/** writeUtf8 encodes s as UTF-8 at dst, at most cap bytes and never part
 * of a character; a lone surrogate becomes U+FFFD, so the bytes are always
 * valid UTF-8 (the host refuses text that is not). It returns the bytes
 * written; *full* is set when s did not fit. */
export let full = false;
export function writeUtf8(s: string, dst: usize, cap: i32): i32 {
  const p = changetype<usize>(s);
  const n = s.length;
  let o = 0;
  full = false;
  for (let i = 0; i < n; i++) {
    let c = <u32>load<u16>(p + (<usize>i << 1));
    if (c >= 0xd800 && c <= 0xdfff) {
      let pair = false;
      if (c <= 0xdbff && i + 1 < n) {
        const d = <u32>load<u16>(p + (<usize>(i + 1) << 1));
        if (d >= 0xdc00 && d <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          pair = true;
        }
      }
      if (!pair) c = RUNE_ERROR;
      else i++;
    }
    const w = writeRune(c, dst + <usize>o, cap - o);
    if (w == 0) {
      full = true;
      break;
    }
    o += w;
  }
  return o;
}

/** writeRune encodes code point c at dst when it fits in cap bytes; it
 * returns the bytes written, 0 when it does not fit. */
export function writeRune(c: u32, dst: usize, cap: i32): i32 {
  if (c < 0x80) {
    if (cap < 1) return 0;
    store<u8>(dst, <u8>c);
    return 1;
  }
  if (c < 0x800) {
    if (cap < 2) return 0;
    store<u8>(dst, <u8>(0xc0 | c >> 6));
    store<u8>(dst, <u8>(0x80 | c & 0x3f), 1);
    return 2;
  }
  if (c < 0x10000) {
    if (cap < 3) return 0;
    store<u8>(dst, <u8>(0xe0 | c >> 12));
    store<u8>(dst, <u8>(0x80 | (c >> 6) & 0x3f), 1);
    store<u8>(dst, <u8>(0x80 | c & 0x3f), 2);
    return 3;
  }
  if (cap < 4) return 0;
  store<u8>(dst, <u8>(0xf0 | c >> 18));
  store<u8>(dst, <u8>(0x80 | (c >> 12) & 0x3f), 1);
  store<u8>(dst, <u8>(0x80 | (c >> 6) & 0x3f), 2);
  store<u8>(dst, <u8>(0x80 | c & 0x3f), 3);
  return 4;
}

/** writeValid copies len bytes at src to dst, at most cap bytes and never
 * part of a character, with invalid UTF-8 replaced by U+FFFD. It returns
 * the bytes written and sets full when the bytes did not fit. */
export function writeValid(src: usize, len: i32, dst: usize, cap: i32): i32 {
  const end = src + <usize>len;
  let o = 0;
  full = false;
  let p = src;
  while (p < end) {
    const r = decodeRune(p, end);
    const size = r >>> 24;
    let w: i32;
    if ((r & 0x1fffff) == RUNE_ERROR && size == 1) {
      w = writeRune(RUNE_ERROR, dst + <usize>o, cap - o);
    } else if (<i32>size <= cap - o) {
      memory.copy(dst + <usize>o, p, size);
      w = <i32>size;
    } else {
      w = 0;
    }
    if (w == 0) {
      full = true;
      break;
    }
    o += w;
    p += size;
  }
  return o;
}

/** equalString compares len UTF-8 bytes at ptr with s, optionally folding
 * ASCII case, without allocating. */
export function equalString(ptr: usize, len: i32, s: string, fold: bool): bool {
  const sp = changetype<usize>(s);
  const n = s.length;
  const end = ptr + <usize>len;
  let p = ptr;
  for (let i = 0; i < n; i++) {
    let c = <u32>load<u16>(sp + (<usize>i << 1));
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      const d = <u32>load<u16>(sp + (<usize>(i + 1) << 1));
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (p >= end) return false;
    const r = decodeRune(p, end);
    let got = r & 0x1fffff;
    if (fold) {
      if (got >= 0x41 && got <= 0x5a) got += 0x20;
      if (c >= 0x41 && c <= 0x5a) c += 0x20;
    }
    if (got != c) return false;
    p += r >>> 24;
  }
  return p == end;
}

//! A minimal JSON writer over a reusable byte buffer.
//!
//! Trace records are written on the call path, so this writer never allocates beyond growing the
//! caller's buffer and formats integers without `fmt`.

/// Fingerprints capability bytes (IPC and fabric handles): a keyed hash, never the bytes.
pub type Fingerprinter = fn(&[u8]) -> u64;

fn no_fingerprint(_: &[u8]) -> u64 {
    0
}

pub struct JsonOut<'a> {
    pub buf: &'a mut Vec<u8>,
    /// Whether a value was written since the last `{`/`[`: decides the comma.
    need_comma: bool,
    pub fingerprint: Fingerprinter,
}

impl<'a> JsonOut<'a> {
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        JsonOut {
            buf,
            need_comma: false,
            fingerprint: no_fingerprint,
        }
    }

    pub fn with_fingerprint(buf: &'a mut Vec<u8>, fingerprint: Fingerprinter) -> Self {
        JsonOut {
            buf,
            need_comma: false,
            fingerprint,
        }
    }

    #[inline(always)]
    fn sep(&mut self) {
        if self.need_comma {
            self.buf.push(b',');
        }
        self.need_comma = true;
    }

    #[inline(always)]
    pub fn begin_object(&mut self) {
        self.sep();
        self.buf.push(b'{');
        self.need_comma = false;
    }

    #[inline(always)]
    pub fn end_object(&mut self) {
        self.buf.push(b'}');
        self.need_comma = true;
    }

    #[inline(always)]
    pub fn begin_array(&mut self) {
        self.sep();
        self.buf.push(b'[');
        self.need_comma = false;
    }

    #[inline(always)]
    pub fn end_array(&mut self) {
        self.buf.push(b']');
        self.need_comma = true;
    }

    /// Writes `"key":`; the value written next needs no comma. Keys are this program's own
    /// identifiers (ASCII letters, digits, `_`), written as they are.
    #[inline(always)]
    pub fn key(&mut self, key: &str) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        self.sep();
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
        self.need_comma = false;
    }

    /// Writes `"*key":`: the value a pointer argument `key` points to (an out-parameter the
    /// driver wrote).
    #[inline(always)]
    pub fn key_deref(&mut self, key: &str) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        self.sep();
        self.buf.extend_from_slice(b"\"*");
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
        self.need_comma = false;
    }

    #[inline(always)]
    pub fn str(&mut self, value: &str) {
        self.sep();
        self.raw_string(value);
    }

    /// A string this program wrote itself (a function's symbol, an event's name): written as it
    /// is, without looking for bytes to escape.
    #[inline(always)]
    pub fn kv_ident(&mut self, key: &str, value: &'static str) {
        debug_assert!(!value.bytes().any(needs_escape), "{value:?}");
        self.key(key);
        self.buf.push(b'"');
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.push(b'"');
        self.need_comma = true;
    }

    #[inline(always)]
    pub fn null(&mut self) {
        self.sep();
        self.buf.extend_from_slice(b"null");
    }

    #[inline(always)]
    pub fn bool(&mut self, value: bool) {
        self.sep();
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    #[inline(always)]
    pub fn u64(&mut self, value: u64) {
        self.sep();
        write_u64(self.buf, value);
    }

    #[inline(always)]
    pub fn i64(&mut self, value: i64) {
        self.sep();
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    /// Pointers and addresses: `"0x7f00..."` (a string, so no precision is lost in readers).
    #[inline(always)]
    pub fn hex(&mut self, value: u64) {
        self.sep();
        self.buf.extend_from_slice(b"\"0x");
        write_hex(self.buf, value);
        self.buf.push(b'"');
    }

    /// A keyed fingerprint of capability bytes: `"fp:0123456789abcdef"`.
    pub fn fingerprint_of(&mut self, bytes: &[u8]) {
        let fp = (self.fingerprint)(bytes);
        self.sep();
        self.buf.extend_from_slice(b"\"fp:");
        let start = self.buf.len();
        write_hex(self.buf, fp);
        // Fixed width keeps fingerprints easy to compare by eye.
        let width = self.buf.len() - start;
        if width < 16 {
            let pad = 16 - width;
            self.buf
                .splice(start..start, std::iter::repeat_n(b'0', pad));
        }
        self.buf.push(b'"');
    }

    #[inline(always)]
    pub fn kv_str(&mut self, key: &str, value: &str) {
        self.key(key);
        self.str(value);
    }

    #[inline(always)]
    pub fn kv_u64(&mut self, key: &str, value: u64) {
        self.key(key);
        self.u64(value);
    }

    #[inline(always)]
    pub fn kv_i64(&mut self, key: &str, value: i64) {
        self.key(key);
        self.i64(value);
    }

    #[inline(always)]
    fn raw_string(&mut self, s: &str) {
        // Symbols and result names never need escaping: one copy.
        if !s.bytes().any(needs_escape) {
            self.buf.push(b'"');
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.push(b'"');
        } else {
            self.escaped_string(s);
        }
    }

    #[cold]
    fn escaped_string(&mut self, s: &str) {
        self.buf.push(b'"');
        for &b in s.as_bytes() {
            match b {
                b'"' => self.buf.extend_from_slice(b"\\\""),
                b'\\' => self.buf.extend_from_slice(b"\\\\"),
                b'\n' => self.buf.extend_from_slice(b"\\n"),
                b'\r' => self.buf.extend_from_slice(b"\\r"),
                b'\t' => self.buf.extend_from_slice(b"\\t"),
                0..=0x1f | 0x7f => {
                    self.buf.extend_from_slice(b"\\u00");
                    self.buf.push(HEX[(b >> 4) as usize]);
                    self.buf.push(HEX[(b & 15) as usize]);
                }
                _ => self.buf.push(b),
            }
        }
        self.buf.push(b'"');
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Bytes a JSON string cannot hold as they are (one table lookup each).
static ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[0x7f] = true;
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

#[inline]
fn needs_escape(b: u8) -> bool {
    ESCAPE[b as usize]
}

#[inline]
pub fn write_u64(buf: &mut Vec<u8>, value: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

#[inline]
pub fn write_hex(buf: &mut Vec<u8>, value: u64) {
    if value == 0 {
        buf.push(b'0');
        return;
    }
    let digits = (64 - value.leading_zeros()).div_ceil(4) as usize;
    let mut tmp = [0u8; 16];
    for (i, slot) in tmp[..digits].iter_mut().enumerate() {
        *slot = HEX[((value >> ((digits - 1 - i) * 4)) & 15) as usize];
    }
    buf.extend_from_slice(&tmp[..digits]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(f: impl FnOnce(&mut JsonOut)) -> String {
        let mut buf = Vec::new();
        let mut w = JsonOut::new(&mut buf);
        f(&mut w);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn nested_objects_get_commas_only_between_members() {
        let s = render(|w| {
            w.begin_object();
            w.kv_u64("a", 1);
            w.key("b");
            w.begin_object();
            w.kv_i64("c", -5);
            w.kv_str("d", "x\"y\n\u{1}");
            w.end_object();
            w.key("e");
            w.begin_array();
            w.u64(0);
            w.hex(0xdead_beef);
            w.null();
            w.end_array();
            w.end_object();
        });
        assert_eq!(
            s,
            r#"{"a":1,"b":{"c":-5,"d":"x\"y\n\u0001"},"e":[0,"0xdeadbeef",null]}"#
        );
    }

    #[test]
    fn integers_round_trip_at_extremes() {
        let s = render(|w| {
            w.begin_array();
            w.u64(u64::MAX);
            w.i64(i64::MIN);
            w.hex(u64::MAX);
            w.hex(0);
            w.end_array();
        });
        assert_eq!(
            s,
            r#"[18446744073709551615,-9223372036854775808,"0xffffffffffffffff","0x0"]"#
        );
    }

    #[test]
    fn fingerprints_are_fixed_width_and_never_the_bytes() {
        let mut buf = Vec::new();
        let mut w = JsonOut::with_fingerprint(&mut buf, |b| b.len() as u64);
        w.fingerprint_of(&[0xaa; 64]);
        assert_eq!(String::from_utf8(buf).unwrap(), "\"fp:0000000000000040\"");
    }

    #[test]
    fn numbers_and_strings_render_exactly_on_the_fast_paths() {
        for v in [
            0u64,
            7,
            9,
            10,
            42,
            99,
            100,
            101,
            999,
            1000,
            123456789,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            write_u64(&mut buf, v);
            assert_eq!(String::from_utf8(buf).unwrap(), v.to_string());
            let mut buf = Vec::new();
            write_hex(&mut buf, v);
            assert_eq!(String::from_utf8(buf).unwrap(), format!("{v:x}"));
        }
        assert_eq!(
            render(|w| w.str("cuDeviceCanAccessPeer")),
            "\"cuDeviceCanAccessPeer\""
        );
        assert_eq!(render(|w| w.str("a\"b\\c\n")), r#""a\"b\\c\n""#);
        assert_eq!(render(|w| w.i64(-1234567)), "-1234567");
    }
}

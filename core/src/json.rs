//! A minimal JSON writer over a reusable byte buffer.
//!
//! Trace records are written on the call path, so this writer never allocates beyond growing the
//! caller's buffer and formats integers without `fmt`.
//!
//! Each method reserves, once, the most bytes it can write (its pieces' lengths added up), then
//! writes them through a [`Cursor`] into the buffer's spare capacity and sets the buffer's length
//! once. So the buffer is a complete, valid `Vec` after every call (callers may read it, or write
//! to it themselves, between calls), and no byte store reloads or checks the `Vec`'s fields.
//! Short copies (names, keys, digits) are inline loads and stores, never a call to `memcpy`.

/// Fingerprints capability bytes (IPC and fabric handles): a keyed hash, never the bytes.
pub type Fingerprinter = fn(&[u8]) -> u64;

fn no_fingerprint(_: &[u8]) -> u64 {
    0
}

/// Most bytes of a decimal `u64` or `i64` (`18446744073709551615`, `-9223372036854775808`).
const DEC_MAX: usize = 20;
/// Bytes [`Cursor::hex_digits`] stores (it advances by the digits only).
const HEX_STORE: usize = 16;
/// Most bytes of a member's name besides the key ([`Cursor::member`]): `,"*` and `":`.
const MEMBER_EXTRA: usize = 5;

/// A write position in the spare capacity of a `Vec<u8>`: `at` is the first byte after its
/// contents, `n` the bytes written from there. Made only by [`JsonOut::cursor`], which reserved
/// `room` bytes at `at`; every write method is `unsafe` and requires that what it stores stays
/// within `room` (checked in debug builds).
struct Cursor {
    at: *mut u8,
    n: usize,
    /// The buffer's length when the cursor was made.
    len: usize,
    #[cfg(debug_assertions)]
    room: usize,
}

impl Cursor {
    #[inline(always)]
    fn check(&self, _stores: usize) {
        #[cfg(debug_assertions)]
        assert!(
            self.n + _stores <= self.room,
            "cursor overrun: {} + {} > {}",
            self.n,
            _stores,
            self.room
        );
    }

    /// # Safety
    /// One byte of room must be left.
    #[inline(always)]
    unsafe fn byte(&mut self, b: u8) {
        self.check(1);
        // SAFETY: the caller guarantees `n < room`, and `JsonOut::cursor` reserved `room` bytes at `at`.
        unsafe { self.at.add(self.n).write(b) };
        self.n += 1;
    }

    /// A comma when `comma` (stored either way, so no branch; kept only when `comma`).
    ///
    /// # Safety
    /// One byte of room must be left.
    #[inline(always)]
    unsafe fn comma(&mut self, comma: bool) {
        self.check(1);
        // SAFETY: as `byte`.
        unsafe { self.at.add(self.n).write(b',') };
        self.n += usize::from(comma);
    }

    /// # Safety
    /// `s.len()` bytes of room must be left.
    #[inline(always)]
    unsafe fn bytes(&mut self, s: &[u8]) {
        self.check(s.len());
        // SAFETY: `n + s.len() <= room` (the caller's guarantee), all reserved; `s` is a live
        // slice that cannot overlap the buffer's spare capacity (we hold the only `&mut Vec`).
        unsafe { copy_short(s, self.at.add(self.n)) };
        self.n += s.len();
    }

    /// A member's name: `,"key":` (the comma when `comma`), `,"*key":` when `deref`.
    ///
    /// # Safety
    /// `key.len()` + [`MEMBER_EXTRA`] bytes of room must be left.
    #[inline(always)]
    unsafe fn member(&mut self, comma: bool, deref: bool, key: &str) {
        self.check(key.len() + MEMBER_EXTRA);
        // SAFETY: at most 3 + key.len() + 2 = key.len() + MEMBER_EXTRA bytes, as the caller
        // guarantees room for.
        unsafe {
            self.comma(comma);
            self.byte(b'"');
            if deref {
                self.byte(b'*');
            }
            self.bytes(key.as_bytes());
            self.bytes(b"\":");
        }
    }

    /// `value` in decimal.
    ///
    /// # Safety
    /// [`DEC_MAX`] bytes of room must be left.
    #[inline(always)]
    unsafe fn dec(&mut self, value: u64) {
        self.check(DEC_MAX);
        // SAFETY: `write_dec` stores at most 20 bytes (`DEC_MAX`), all within room.
        self.n += unsafe { write_dec(self.at.add(self.n), value) };
    }

    /// `value` in decimal, with a `-` when negative.
    ///
    /// # Safety
    /// [`DEC_MAX`] bytes of room must be left.
    #[inline(always)]
    unsafe fn dec_signed(&mut self, value: i64) {
        self.check(DEC_MAX);
        // SAFETY: the minus sign is stored always (kept only when negative); the digits follow
        // it: at most 19 digits for a negative value (|i64::MIN| = 9223372036854775808), 20 bytes
        // in all; a value >= 0 overwrites the sign with at most 19 digits (i64::MAX).
        unsafe {
            self.at.add(self.n).write(b'-');
            self.n += usize::from(value < 0);
            self.n += write_dec(self.at.add(self.n), value.unsigned_abs());
        }
    }

    /// `value` in hex without leading zeros (`0` for zero); stores [`HEX_STORE`] bytes, advances
    /// by the digits.
    ///
    /// # Safety
    /// [`HEX_STORE`] bytes of room must be left.
    #[inline(always)]
    unsafe fn hex_digits(&mut self, value: u64) {
        self.check(HEX_STORE);
        let digits = hex_len(value);
        // Shifting the little-endian text right drops its leading (most significant) digits.
        let text = hex16(value) >> (8 * (16 - digits));
        // SAFETY: 16 bytes of room are left (the caller's guarantee); an unaligned store.
        unsafe {
            self.at
                .add(self.n)
                .cast::<[u8; 16]>()
                .write_unaligned(text.to_le_bytes());
        };
        self.n += digits;
    }

    /// All 16 hex digits of `value`.
    ///
    /// # Safety
    /// 16 bytes of room must be left.
    #[inline(always)]
    unsafe fn hex_fixed(&mut self, value: u64) {
        self.check(16);
        // SAFETY: 16 bytes of room are left (the caller's guarantee); an unaligned store.
        unsafe {
            self.at
                .add(self.n)
                .cast::<[u8; 16]>()
                .write_unaligned(hex16(value).to_le_bytes());
        };
        self.n += 16;
    }
}

/// Copies `src` to `dst`; up to 64 bytes with at most four (overlapping) loads and stores, no
/// call to `memcpy` (whose call costs more than such a copy). A constant length folds to one
/// path.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes, not overlapping `src`.
#[inline(always)]
unsafe fn copy_short(src: &[u8], dst: *mut u8) {
    let len = src.len();
    let s = src.as_ptr();
    // SAFETY: every load is within `src` (offsets `0..len`, the tail ones ending at `len`) and
    // every store within `dst[..len]` (the caller's guarantee), each at most `len` bytes wide
    // where it is used: 32-byte pieces only when len > 32, 16-byte ones when len >= 16, 8 when
    // >= 8, 4 when >= 4.
    unsafe {
        if len >= 16 {
            if len > 64 {
                std::ptr::copy_nonoverlapping(s, dst, len);
            } else if len > 32 {
                let head = s.cast::<[u8; 32]>().read_unaligned();
                let tail = s.add(len - 32).cast::<[u8; 32]>().read_unaligned();
                dst.cast::<[u8; 32]>().write_unaligned(head);
                dst.add(len - 32).cast::<[u8; 32]>().write_unaligned(tail);
            } else {
                let head = s.cast::<[u8; 16]>().read_unaligned();
                let tail = s.add(len - 16).cast::<[u8; 16]>().read_unaligned();
                dst.cast::<[u8; 16]>().write_unaligned(head);
                dst.add(len - 16).cast::<[u8; 16]>().write_unaligned(tail);
            }
        } else if len >= 8 {
            let head = s.cast::<u64>().read_unaligned();
            let tail = s.add(len - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(head);
            dst.add(len - 8).cast::<u64>().write_unaligned(tail);
        } else if len >= 4 {
            let head = s.cast::<u32>().read_unaligned();
            let tail = s.add(len - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(head);
            dst.add(len - 4).cast::<u32>().write_unaligned(tail);
        } else if len > 0 {
            // 1 to 3 bytes: first, middle, last.
            *dst = *s;
            *dst.add(len / 2) = *s.add(len / 2);
            *dst.add(len - 1) = *s.add(len - 1);
        }
    }
}

/// "00" to "99".
static DEC_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

static POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// Decimal digits of `value` (1 for 0).
#[inline(always)]
fn dec_len(value: u64) -> usize {
    // log10(2) ~ 1233/4096: `t` is floor(log10) of the value or one more (bit-twiddling hacks).
    let bits = 64 - (value | 1).leading_zeros();
    let t = ((bits * 1233) >> 12) as usize;
    t + usize::from((value | 1) >= POW10[t])
}

/// Writes `value` in decimal at `dst`, four digits at a time from the end; returns its length.
///
/// # Safety
/// `dst` must be valid for [`DEC_MAX`] bytes of writes (it stores exactly the digits).
#[inline(always)]
unsafe fn write_dec(dst: *mut u8, value: u64) -> usize {
    /// Stores the two digits of `pair` (below 100) at `at`.
    ///
    /// # Safety
    /// `at` must be valid for 2 bytes of writes.
    #[inline(always)]
    unsafe fn two(at: *mut u8, pair: u64) {
        debug_assert!(pair < 100);
        // SAFETY: the table holds 200 bytes, read at `2 * pair` <= 198 (2 bytes); the store
        // is the caller's guarantee.
        unsafe {
            at.cast::<[u8; 2]>().write_unaligned(
                DEC_PAIRS
                    .as_ptr()
                    .add(2 * pair as usize)
                    .cast::<[u8; 2]>()
                    .read(),
            );
        }
    }
    // Small values (device ordinals, results, flags) skip the length.
    if value < 10 {
        // SAFETY: 1 byte, within the caller's 20.
        unsafe { *dst = b'0' + value as u8 };
        return 1;
    }
    if value < 100 {
        // SAFETY: 2 bytes, within the caller's 20.
        unsafe { two(dst, value) };
        return 2;
    }
    let len = dec_len(value);
    let mut end = len;
    let mut v = value;
    // SAFETY: `end` starts at the digit count (<= 20) and goes down by exactly the digits stored
    // before it, ending at 0 (`len` counts them all), so every store is within `dst[..len]`.
    unsafe {
        while v >= 10_000 {
            let chunk = v % 10_000;
            v /= 10_000;
            end -= 4;
            two(dst.add(end), chunk / 100);
            two(dst.add(end + 2), chunk % 100);
        }
        if v >= 100 {
            end -= 2;
            two(dst.add(end), v % 100);
            v /= 100;
        }
        if v >= 10 {
            end -= 2;
            two(dst.add(end), v);
        } else {
            end -= 1;
            *dst.add(end) = b'0' + v as u8;
        }
    }
    debug_assert_eq!(end, 0);
    len
}

/// Hex digits of `value` (1 for 0).
#[inline(always)]
fn hex_len(value: u64) -> usize {
    ((64 - (value | 1).leading_zeros()) as usize).div_ceil(4)
}

/// The 16 hex digits of `value`, most significant first, as the little-endian bytes of a `u128`
/// (each nibble spread to a byte, then turned into its ASCII digit, 8 bytes at a time).
#[inline(always)]
fn hex16(value: u64) -> u128 {
    const fn every_byte(b: u8) -> u128 {
        u128::from_le_bytes([b; 16])
    }
    // Byte j (little-endian) of `x` is the j-th byte of `value` from the most significant one.
    let mut x = u128::from(value.swap_bytes());
    // Spread byte j to byte 2j: halves, then quarters, then bytes.
    x = (x | (x << 32)) & 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff;
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff;
    // High nibble at 2j, low nibble at 2j + 1.
    let nibbles = ((x >> 4) & every_byte(0x0f)) | ((x & every_byte(0x0f)) << 8);
    // 1 in each byte whose nibble is 10 or more (no byte carries: 15 + 6 < 256).
    let letters = ((nibbles + every_byte(6)) >> 4) & every_byte(1);
    // '0' + n, plus ('a' - '0' - 10) = 39 for letters (at most 15 + 48 + 39 < 256).
    nibbles + every_byte(b'0') + letters * 39
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

    /// Reserves `room` bytes after the buffer's contents and returns a cursor at them: the
    /// caller's writes must stay within `room`, and it ends with [`Self::commit`].
    #[inline(always)]
    fn cursor(&mut self, room: usize) -> Cursor {
        let buf = &mut *self.buf;
        buf.reserve(room);
        let len = buf.len();
        Cursor {
            // SAFETY: `len <= capacity`, so the offset stays within (or one past) the
            // allocation.
            at: unsafe { buf.as_mut_ptr().add(len) },
            n: 0,
            len,
            #[cfg(debug_assertions)]
            room,
        }
    }

    /// Adds what `cursor` wrote to the buffer.
    ///
    /// # Safety
    /// `cursor` must come from [`Self::cursor`] on this writer, with no other use of the buffer
    /// since.
    #[inline(always)]
    unsafe fn commit(&mut self, cursor: Cursor) {
        debug_assert_eq!(self.buf.len(), cursor.len);
        // SAFETY: the cursor's writes initialized `cursor.n` bytes after the contents (`len`,
        // unchanged since: the caller's guarantee), and each one required `n <= room`, all
        // within the capacity `reserve` made: `len + room`.
        unsafe { self.buf.set_len(cursor.len + cursor.n) };
    }

    /// Whether the value written next needs a comma before it; from then on, values do.
    #[inline(always)]
    fn take_comma(&mut self) -> bool {
        std::mem::replace(&mut self.need_comma, true)
    }

    #[inline(always)]
    pub fn begin_object(&mut self) {
        let comma = self.need_comma;
        self.need_comma = false;
        let mut c = self.cursor(2);
        // SAFETY: room 2: a comma and `{`.
        unsafe {
            c.comma(comma);
            c.byte(b'{');
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn end_object(&mut self) {
        self.need_comma = true;
        let mut c = self.cursor(1);
        // SAFETY: room 1: `}`.
        unsafe {
            c.byte(b'}');
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn begin_array(&mut self) {
        let comma = self.need_comma;
        self.need_comma = false;
        let mut c = self.cursor(2);
        // SAFETY: room 2: a comma and `[`.
        unsafe {
            c.comma(comma);
            c.byte(b'[');
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn end_array(&mut self) {
        self.need_comma = true;
        let mut c = self.cursor(1);
        // SAFETY: room 1: `]`.
        unsafe {
            c.byte(b']');
            self.commit(c);
        }
    }

    /// Writes `"key":`; the value written next needs no comma. Keys are this program's own
    /// identifiers (ASCII letters, digits, `_`), written as they are.
    #[inline(always)]
    pub fn key(&mut self, key: &str) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        let comma = self.need_comma;
        self.need_comma = false;
        let mut c = self.cursor(key.len() + MEMBER_EXTRA);
        // SAFETY: room: the member's name (`MEMBER_EXTRA` and the key).
        unsafe {
            c.member(comma, false, key);
            self.commit(c);
        }
    }

    /// Writes `"*key":`: the value a pointer argument `key` points to (an out-parameter the
    /// driver wrote).
    #[inline(always)]
    pub fn key_deref(&mut self, key: &str) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        let comma = self.need_comma;
        self.need_comma = false;
        let mut c = self.cursor(key.len() + MEMBER_EXTRA);
        // SAFETY: room: the member's name (`MEMBER_EXTRA` and the key).
        unsafe {
            c.member(comma, true, key);
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn str(&mut self, value: &str) {
        let comma = self.take_comma();
        self.raw_string(comma, value);
    }

    /// A string this program wrote itself (a function's symbol, an event's name): written as it
    /// is, without looking for bytes to escape.
    #[inline(always)]
    pub fn kv_ident(&mut self, key: &str, value: &'static str) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        debug_assert!(!value.bytes().any(needs_escape), "{value:?}");
        let comma = self.take_comma();
        let mut c = self.cursor(key.len() + value.len() + 6);
        // SAFETY: room: a comma, `"`, the key, `":"`, the value, `"`.
        unsafe {
            c.comma(comma);
            c.byte(b'"');
            c.bytes(key.as_bytes());
            c.bytes(b"\":\"");
            c.bytes(value.as_bytes());
            c.byte(b'"');
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn null(&mut self) {
        let comma = self.take_comma();
        let mut c = self.cursor(5);
        // SAFETY: room: a comma, `null`.
        unsafe {
            c.comma(comma);
            c.bytes(b"null");
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn bool(&mut self, value: bool) {
        let comma = self.take_comma();
        let text: &[u8] = if value { b"true" } else { b"false" };
        let mut c = self.cursor(6);
        // SAFETY: room: a comma, `false` (the longer word).
        unsafe {
            c.comma(comma);
            c.bytes(text);
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn u64(&mut self, value: u64) {
        let comma = self.take_comma();
        let mut c = self.cursor(1 + DEC_MAX);
        // SAFETY: room: a comma, the digits.
        unsafe {
            c.comma(comma);
            c.dec(value);
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn i64(&mut self, value: i64) {
        let comma = self.take_comma();
        let mut c = self.cursor(1 + DEC_MAX);
        // SAFETY: room: a comma, the sign and digits.
        unsafe {
            c.comma(comma);
            c.dec_signed(value);
            self.commit(c);
        }
    }

    /// Pointers and addresses: `"0x7f00..."` (a string, so no precision is lost in readers).
    #[inline(always)]
    pub fn hex(&mut self, value: u64) {
        let comma = self.take_comma();
        let mut c = self.cursor(4 + HEX_STORE + 1);
        // SAFETY: room: a comma, `"0x`, the digits' 16-byte store, `"` (after the digits, so
        // within the 16 bytes' end or at it).
        unsafe {
            c.comma(comma);
            c.bytes(b"\"0x");
            c.hex_digits(value);
            c.byte(b'"');
            self.commit(c);
        }
    }

    /// A keyed fingerprint of capability bytes: `"fp:0123456789abcdef"` (fixed width keeps
    /// fingerprints easy to compare by eye).
    pub fn fingerprint_of(&mut self, bytes: &[u8]) {
        let fp = (self.fingerprint)(bytes);
        self.fingerprint_value(fp);
    }

    /// A fingerprint computed before (a compact trace record holds it, never the bytes),
    /// written as [`Self::fingerprint_of`] writes one.
    pub fn fingerprint_value(&mut self, fp: u64) {
        let comma = self.take_comma();
        let mut c = self.cursor(4 + 1 + 16 + 1);
        // SAFETY: room: a comma, `"fp:`, 16 digits, `"`.
        unsafe {
            c.comma(comma);
            c.bytes(b"\"fp:");
            c.hex_fixed(fp);
            c.byte(b'"');
            self.commit(c);
        }
    }

    #[inline(always)]
    pub fn kv_str(&mut self, key: &str, value: &str) {
        self.key(key);
        self.str(value);
    }

    /// `"key":value` in one step.
    #[inline(always)]
    pub fn kv_u64(&mut self, key: &str, value: u64) {
        self.member_u64(false, key, value);
    }

    /// `"key":value` in one step.
    #[inline(always)]
    pub fn kv_i64(&mut self, key: &str, value: i64) {
        self.member_i64(false, key, value);
    }

    /// `"key":"0x..."` in one step (see [`Self::hex`]).
    #[inline(always)]
    pub fn kv_hex(&mut self, key: &str, value: u64) {
        self.member_hex(false, key, value);
    }

    /// `"*key":value` in one step (see [`Self::key_deref`]).
    #[inline(always)]
    pub fn kv_deref_u64(&mut self, key: &str, value: u64) {
        self.member_u64(true, key, value);
    }

    /// `"*key":value` in one step (see [`Self::key_deref`]).
    #[inline(always)]
    pub fn kv_deref_i64(&mut self, key: &str, value: i64) {
        self.member_i64(true, key, value);
    }

    /// `"*key":"0x..."` in one step (see [`Self::key_deref`], [`Self::hex`]).
    #[inline(always)]
    pub fn kv_deref_hex(&mut self, key: &str, value: u64) {
        self.member_hex(true, key, value);
    }

    /// `"key":{` in one step: a member whose value is an object.
    #[inline(always)]
    pub fn key_begin_object(&mut self, key: &str) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        let comma = self.need_comma;
        self.need_comma = false;
        let mut c = self.cursor(key.len() + MEMBER_EXTRA + 1);
        // SAFETY: room: the member's name (`MEMBER_EXTRA` and the key), `{`.
        unsafe {
            c.member(comma, false, key);
            c.byte(b'{');
            self.commit(c);
        }
    }

    /// Starts a JSON Lines record, `{"seq":N,"t":N,"tid":N`, in one step (the envelope every
    /// record of the trace schema starts with); [`Self::end_record`] ends it.
    #[inline(always)]
    pub fn begin_record(&mut self, seq: u64, t: u64, tid: i64) {
        let comma = self.take_comma();
        let mut c = self.cursor(2 + 6 + DEC_MAX + 5 + DEC_MAX + 7 + DEC_MAX);
        // SAFETY: room: a comma, `{`, `"seq":` (6), digits, `,"t":` (5), digits, `,"tid":` (7),
        // sign and digits.
        unsafe {
            c.comma(comma);
            c.bytes(b"{\"seq\":");
            c.dec(seq);
            c.bytes(b",\"t\":");
            c.dec(t);
            c.bytes(b",\"tid\":");
            c.dec_signed(tid);
            self.commit(c);
        }
    }

    /// Starts a call record, `{"seq":N,"t":N,"tid":T,"fn":"NAME","a":{`, in one step:
    /// [`Self::begin_record`] and then `"fn"` and the arguments' object, from the pieces that do
    /// not change between a thread's records of one function: `tid_member` (`,"tid":T`, at most
    /// 32 bytes) and `head` ([`crate::functions::FnInfo::record_head`]). The arguments follow,
    /// then [`Self::end_object`] and the rest of the record.
    #[inline(always)]
    pub fn begin_call_record(&mut self, seq: u64, t: u64, tid_member: &[u8], head: &'static str) {
        debug_assert!(tid_member.len() <= 32 && tid_member.starts_with(b",\"tid\":"));
        debug_assert!(head.starts_with(",\"fn\":\"") && head.ends_with("\",\"a\":{"));
        let comma = self.take_comma();
        let mut c = self.cursor(2 + 6 + DEC_MAX + 5 + DEC_MAX + 32 + head.len());
        // SAFETY: room: a comma, `{"seq":` (7), digits, `,"t":` (5), digits, the tid member (at
        // most 32) and the head.
        unsafe {
            c.comma(comma);
            c.bytes(b"{\"seq\":");
            c.dec(seq);
            c.bytes(b",\"t\":");
            c.dec(t);
            c.bytes(tid_member);
            c.bytes(head.as_bytes());
            self.commit(c);
        }
        // Inside the arguments' object, before its first member.
        self.need_comma = false;
    }

    /// [`Self::begin_call_record`] with the thread id as a number (`"tid"` then is `tid`).
    #[inline]
    pub fn begin_call_record_of(&mut self, seq: u64, t: u64, tid: i64, head: &'static str) {
        debug_assert!(head.starts_with(",\"fn\":\"") && head.ends_with("\",\"a\":{"));
        let comma = self.take_comma();
        let mut c = self.cursor(2 + 6 + DEC_MAX + 5 + DEC_MAX + 7 + DEC_MAX + head.len());
        // SAFETY: room: a comma, `{"seq":` (7), digits, `,"t":` (5), digits, `,"tid":` (7),
        // sign and digits, the head.
        unsafe {
            c.comma(comma);
            c.bytes(b"{\"seq\":");
            c.dec(seq);
            c.bytes(b",\"t\":");
            c.dec(t);
            c.bytes(b",\"tid\":");
            c.dec_signed(tid);
            c.bytes(head.as_bytes());
            self.commit(c);
        }
        self.need_comma = false;
    }

    /// Ends the object of a JSON Lines record: `}` and the newline (the writer's state is then
    /// that of a new line).
    #[inline(always)]
    pub fn end_record(&mut self) {
        self.need_comma = false;
        let mut c = self.cursor(2);
        // SAFETY: room 2: `}` and the newline.
        unsafe {
            c.bytes(b"}\n");
            self.commit(c);
        }
    }

    #[inline(always)]
    fn member_u64(&mut self, deref: bool, key: &str, value: u64) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        let comma = self.take_comma();
        let mut c = self.cursor(key.len() + MEMBER_EXTRA + DEC_MAX);
        // SAFETY: room: the member's name (`MEMBER_EXTRA` and the key), the digits.
        unsafe {
            c.member(comma, deref, key);
            c.dec(value);
            self.commit(c);
        }
    }

    #[inline(always)]
    fn member_i64(&mut self, deref: bool, key: &str, value: i64) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        let comma = self.take_comma();
        let mut c = self.cursor(key.len() + MEMBER_EXTRA + DEC_MAX);
        // SAFETY: room: the member's name (`MEMBER_EXTRA` and the key), the sign and digits.
        unsafe {
            c.member(comma, deref, key);
            c.dec_signed(value);
            self.commit(c);
        }
    }

    #[inline(always)]
    fn member_hex(&mut self, deref: bool, key: &str, value: u64) {
        debug_assert!(!key.bytes().any(needs_escape), "{key:?}");
        let comma = self.take_comma();
        let mut c = self.cursor(key.len() + MEMBER_EXTRA + 3 + HEX_STORE + 1);
        // SAFETY: room: the member's name (`MEMBER_EXTRA` and the key), `"0x`, the digits'
        // 16-byte store, `"` (after the digits, so within the 16 bytes' end or at it).
        unsafe {
            c.member(comma, deref, key);
            c.bytes(b"\"0x");
            c.hex_digits(value);
            c.byte(b'"');
            self.commit(c);
        }
    }

    /// A string value, escaped where JSON needs it, after a comma when `comma`.
    #[inline(always)]
    fn raw_string(&mut self, comma: bool, s: &str) {
        // Symbols and result names never need escaping: one copy.
        if !s.bytes().any(needs_escape) {
            let mut c = self.cursor(s.len() + 3);
            // SAFETY: room: a comma, `"`, the string, `"`.
            unsafe {
                c.comma(comma);
                c.byte(b'"');
                c.bytes(s.as_bytes());
                c.byte(b'"');
                self.commit(c);
            }
        } else {
            self.escaped_string(comma, s);
        }
    }

    #[cold]
    fn escaped_string(&mut self, comma: bool, s: &str) {
        // The exact length first (at most 6 bytes per byte: `\u00XX`), then one reservation.
        let escaped: usize = s.bytes().map(|b| ESCAPED_LEN[b as usize] as usize).sum();
        let mut c = self.cursor(escaped + 3);
        // SAFETY: room: a comma, `"`, each byte's escape (`ESCAPED_LEN`, matched arm by arm
        // below: 2 for the named escapes, 6 for `\u00XX`, 1 otherwise), `"`.
        unsafe {
            c.comma(comma);
            c.byte(b'"');
            for &b in s.as_bytes() {
                match b {
                    b'"' => c.bytes(b"\\\""),
                    b'\\' => c.bytes(b"\\\\"),
                    b'\n' => c.bytes(b"\\n"),
                    b'\r' => c.bytes(b"\\r"),
                    b'\t' => c.bytes(b"\\t"),
                    0..=0x1f | 0x7f => {
                        c.bytes(b"\\u00");
                        c.byte(HEX[(b >> 4) as usize]);
                        c.byte(HEX[(b & 15) as usize]);
                    }
                    _ => c.byte(b),
                }
            }
            c.byte(b'"');
            self.commit(c);
        }
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

/// The length of each byte once escaped (as `escaped_string` writes it).
static ESCAPED_LEN: [u8; 256] = {
    let mut table = [1u8; 256];
    let mut b = 0;
    while b < 256 {
        if ESCAPE[b] {
            table[b] = match b as u8 {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' => 2,
                _ => 6,
            };
        }
        b += 1;
    }
    table
};

#[inline]
fn needs_escape(b: u8) -> bool {
    ESCAPE[b as usize]
}

/// Appends `value` in decimal.
#[inline]
pub fn write_u64(buf: &mut Vec<u8>, value: u64) {
    let mut w = JsonOut::new(buf);
    let mut c = w.cursor(DEC_MAX);
    // SAFETY: room: the digits.
    unsafe {
        c.dec(value);
        w.commit(c);
    }
}

/// Appends `value` in hex, without `0x` or leading zeros.
#[inline]
pub fn write_hex(buf: &mut Vec<u8>, value: u64) {
    let mut w = JsonOut::new(buf);
    let mut c = w.cursor(HEX_STORE);
    // SAFETY: room: the digits' 16-byte store.
    unsafe {
        c.hex_digits(value);
        w.commit(c);
    }
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

    /// JSON string escaping as the writer does it, the slow obvious way.
    fn escape_reference(s: &str) -> String {
        let mut out = String::from("\"");
        for ch in s.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// Numbers around every power of ten and of two, and the extremes.
    fn interesting_u64() -> Vec<u64> {
        let mut v = vec![0, 1, 9, 10, 99, 100, u64::MAX, u64::MAX - 1];
        let mut p = 1u64;
        while let Some(next) = p.checked_mul(10) {
            v.extend([p - 1, p, p + 1, next - 1]);
            p = next;
        }
        v.extend([p - 1, p, p + 1]);
        for k in 0..64 {
            let b = 1u64 << k;
            v.extend([b - 1, b, b + 1, b | (b >> 1)]);
        }
        v
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
    fn deeply_nested_and_empty_containers() {
        let s = render(|w| {
            w.begin_array();
            for _ in 0..40 {
                w.begin_object();
                w.key("k");
                w.begin_array();
            }
            w.begin_object();
            w.end_object();
            w.begin_array();
            w.end_array();
            w.bool(true);
            w.bool(false);
            for _ in 0..40 {
                w.end_array();
                w.kv_ident("fn", "cuDeviceCanAccessPeer");
                w.end_object();
            }
            w.end_array();
        });
        let mut expected = String::from("[");
        expected.push_str(&"{\"k\":[".repeat(40));
        expected.push_str("{},[],true,false");
        expected.push_str(&"],\"fn\":\"cuDeviceCanAccessPeer\"}".repeat(40));
        expected.push(']');
        assert_eq!(s, expected);
    }

    #[test]
    fn integers_round_trip_at_extremes() {
        let s = render(|w| {
            w.begin_array();
            w.u64(u64::MAX);
            w.i64(i64::MIN);
            w.hex(u64::MAX);
            w.hex(0);
            w.u64(0);
            w.i64(0);
            w.i64(i64::MAX);
            w.i64(-1);
            w.end_array();
        });
        assert_eq!(
            s,
            r#"[18446744073709551615,-9223372036854775808,"0xffffffffffffffff","0x0",0,0,9223372036854775807,-1]"#
        );
    }

    #[test]
    fn every_interesting_integer_matches_std() {
        for v in interesting_u64() {
            assert_eq!(render(|w| w.u64(v)), v.to_string());
            assert_eq!(render(|w| w.hex(v)), format!("\"0x{v:x}\""));
            let mut buf = Vec::new();
            write_u64(&mut buf, v);
            assert_eq!(String::from_utf8(buf).unwrap(), v.to_string());
            let mut buf = Vec::new();
            write_hex(&mut buf, v);
            assert_eq!(String::from_utf8(buf).unwrap(), format!("{v:x}"));
            for s in [v as i64, (v as i64).wrapping_neg(), (v >> 1) as i64] {
                assert_eq!(render(|w| w.i64(s)), s.to_string());
                assert_eq!(render(|w| w.kv_i64("k", s)), format!("\"k\":{s}"));
            }
            assert_eq!(render(|w| w.kv_u64("seq", v)), format!("\"seq\":{v}"));
        }
        for v in 0..=100_000u64 {
            let mut buf = Vec::new();
            write_u64(&mut buf, v);
            assert_eq!(buf, v.to_string().as_bytes());
        }
    }

    #[test]
    fn fingerprints_are_fixed_width_and_never_the_bytes() {
        let mut buf = Vec::new();
        let mut w = JsonOut::with_fingerprint(&mut buf, |b| b.len() as u64);
        w.fingerprint_of(&[0xaa; 64]);
        assert_eq!(String::from_utf8(buf).unwrap(), "\"fp:0000000000000040\"");
        let mut buf = Vec::new();
        let mut w = JsonOut::with_fingerprint(&mut buf, |b| {
            u64::from(b[0]).wrapping_mul(0x0102_0304_0506_0708)
        });
        w.begin_array();
        w.fingerprint_of(&[0]);
        w.fingerprint_of(&[1]);
        w.fingerprint_of(&[0xff]);
        w.end_array();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            r#"["fp:0000000000000000","fp:0102030405060708","fp:01010101010100f8"]"#
        );
        let mut buf = Vec::new();
        let mut w = JsonOut::with_fingerprint(&mut buf, |_| u64::MAX);
        w.fingerprint_of(&[]);
        assert_eq!(String::from_utf8(buf).unwrap(), "\"fp:ffffffffffffffff\"");
    }

    #[test]
    fn strings_of_every_short_length_and_long_ones_cross_the_reservation() {
        let alphabet: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
        let text =
            |len: usize| -> String { (0..len).map(|i| alphabet[i % alphabet.len()]).collect() };
        // Every length the short copy treats differently, then long ones, starting from an empty
        // buffer and from buffers whose spare capacity ends anywhere within the write.
        for len in (0..=80).chain([127, 128, 129, 511, 512, 513, 4096, 70_000]) {
            let s = text(len);
            assert_eq!(render(|w| w.str(&s)), format!("\"{s}\""));
            for cap in [0usize, 1, 7, 8, 31, 64] {
                let mut buf = Vec::with_capacity(cap);
                buf.extend_from_slice(b"xyz");
                let mut w = JsonOut::new(&mut buf);
                w.begin_object();
                w.kv_str("message", &s);
                w.key(&s.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
                w.u64(len as u64);
                w.end_object();
                let expected = format!("xyz{{\"message\":\"{s}\",\"{s}\":{len}}}");
                assert_eq!(String::from_utf8(buf).unwrap(), expected);
            }
        }
    }

    #[test]
    fn many_small_writes_grow_the_buffer_correctly() {
        let mut buf = Vec::new();
        let mut w = JsonOut::new(&mut buf);
        w.begin_array();
        let mut expected = Vec::new();
        for i in 0..20_000u64 {
            match i % 5 {
                0 => {
                    w.u64(i * 7919);
                    expected.push((i * 7919).to_string());
                }
                1 => {
                    w.i64(-(i as i64));
                    expected.push(format!("-{i}"));
                }
                2 => {
                    w.hex(i << 20);
                    expected.push(format!("\"0x{:x}\"", i << 20));
                }
                3 => {
                    w.str("ab");
                    expected.push("\"ab\"".into());
                }
                _ => {
                    w.null();
                    expected.push("null".into());
                }
            }
        }
        w.end_array();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            format!("[{}]", expected.join(","))
        );
    }

    #[test]
    fn escapes_every_byte_that_needs_it() {
        let all: String = (0u8..=0x7f).map(char::from).collect();
        assert_eq!(render(|w| w.str(&all)), escape_reference(&all));
        // Long messages of escapes only (6 bytes each), and escapes among multi-byte UTF-8.
        let controls = "\u{1}".repeat(3000);
        assert_eq!(render(|w| w.str(&controls)), escape_reference(&controls));
        let mixed = "é\"ü\\\n€\t\u{7f}ß\r".repeat(500);
        let s = render(|w| {
            w.begin_object();
            w.kv_str("message", &mixed);
            w.kv_str("fix", "plain");
            w.end_object();
        });
        assert_eq!(
            s,
            format!(
                "{{\"message\":{},\"fix\":\"plain\"}}",
                escape_reference(&mixed)
            )
        );
        for len in 0..40 {
            let s = "a\"".repeat(len);
            assert_eq!(render(|w| w.str(&s)), escape_reference(&s));
        }
    }

    #[test]
    fn a_trace_record_renders_exactly() {
        let mut buf = Vec::with_capacity(16);
        buf.extend_from_slice(b"old");
        buf.clear();
        let mut w = JsonOut::new(&mut buf);
        w.begin_object();
        w.kv_u64("seq", 1214);
        w.kv_u64("t", 10165227);
        w.kv_i64("tid", 27223);
        w.kv_ident("fn", "cuDeviceCanAccessPeer");
        w.key("a");
        w.begin_object();
        w.key_deref("canAccessPeer");
        w.i64(1);
        w.key("dev");
        w.i64(0);
        w.key("peerDev");
        w.i64(1);
        w.end_object();
        w.kv_i64("r", 0);
        w.key("forwarded");
        w.bool(false);
        w.end_object();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            r#"{"seq":1214,"t":10165227,"tid":27223,"fn":"cuDeviceCanAccessPeer","a":{"*canAccessPeer":1,"dev":0,"peerDev":1},"r":0,"forwarded":false}"#
        );
    }

    #[test]
    fn records_begin_and_end_in_one_step() {
        for (seq, t, tid) in [
            (0, 0, 0),
            (1214, 10165227, 27223),
            (u64::MAX, u64::MAX, i64::MIN),
        ] {
            let s = render(|w| {
                w.begin_record(seq, t, tid);
                w.kv_ident("fn", "f");
                w.end_record();
                w.begin_record(seq, t, tid);
                w.end_record();
            });
            let line = format!("{{\"seq\":{seq},\"t\":{t},\"tid\":{tid}");
            assert_eq!(s, format!("{line},\"fn\":\"f\"}}\n{line}}}\n"));
        }
    }

    #[test]
    fn a_call_record_begun_in_one_step_matches_its_separate_steps() {
        // A function's `record_head`, as the declaration list makes it.
        let head = ",\"fn\":\"cuMemcpyPeerAsync\",\"a\":{";
        for (seq, t, tid) in [
            (0, 0, 0),
            (1214, 10165227, 27223),
            (u64::MAX, u64::MAX, i64::from(i32::MIN)),
        ] {
            let tid_member = format!(",\"tid\":{tid}");
            let fused = render(|w| {
                w.begin_call_record(seq, t, tid_member.as_bytes(), head);
                w.kv_u64("ByteCount", 4);
                w.end_object();
                w.end_record();
            });
            let separate = render(|w| {
                w.begin_record(seq, t, tid);
                w.kv_ident("fn", "cuMemcpyPeerAsync");
                w.key_begin_object("a");
                w.kv_u64("ByteCount", 4);
                w.end_object();
                w.end_record();
            });
            assert_eq!(fused, separate);
        }
    }

    #[test]
    fn short_copies_of_every_length_up_to_80_are_exact() {
        let src: Vec<u8> = (0..80u8).map(|b| b + 1).collect();
        for len in 0..=80 {
            let mut dst = vec![0u8; 96];
            // SAFETY: `dst` holds 96 bytes, more than `len`; the two do not overlap.
            unsafe { copy_short(&src[..len], dst.as_mut_ptr()) };
            assert_eq!(&dst[..len], &src[..len], "len {len}");
            assert!(
                dst[len..].iter().all(|&b| b == 0),
                "len {len} wrote past its end"
            );
        }
    }

    #[test]
    fn fused_members_match_their_separate_steps() {
        let fused = render(|w| {
            w.begin_object();
            w.kv_hex("dptr", 0x7f00_dead_0000);
            w.kv_deref_i64("canAccessPeer", i64::MIN);
            w.kv_deref_u64("count", u64::MAX);
            w.kv_deref_hex("pdptr", 0);
            w.key_begin_object("a");
            w.kv_hex("z", u64::MAX);
            w.end_object();
            w.end_record();
            w.begin_array();
            w.end_array();
        });
        let separate = render(|w| {
            w.begin_object();
            w.key("dptr");
            w.hex(0x7f00_dead_0000);
            w.key_deref("canAccessPeer");
            w.i64(i64::MIN);
            w.key_deref("count");
            w.u64(u64::MAX);
            w.key_deref("pdptr");
            w.hex(0);
            w.key("a");
            w.begin_object();
            w.key("z");
            w.hex(u64::MAX);
            w.end_object();
            w.end_object();
        }) + "\n[]";
        assert_eq!(fused, separate);
        assert_eq!(
            fused,
            "{\"dptr\":\"0x7f00dead0000\",\"*canAccessPeer\":-9223372036854775808,\
             \"*count\":18446744073709551615,\"*pdptr\":\"0x0\",\"a\":{\"z\":\"0xffffffffffffffff\"}}\n[]"
        );
    }

    #[test]
    fn numbers_and_strings_render_exactly_on_the_fast_paths() {
        assert_eq!(
            render(|w| w.str("cuDeviceCanAccessPeer")),
            "\"cuDeviceCanAccessPeer\""
        );
        assert_eq!(render(|w| w.str("a\"b\\c\n")), r#""a\"b\\c\n""#);
        assert_eq!(render(|w| w.i64(-1234567)), "-1234567");
        assert_eq!(render(|w| w.str("")), "\"\"");
    }
}

//! Keyed fingerprints of capability bytes (IPC and fabric handles).
//!
//! A handle lets anyone who holds it map the memory, so its bytes never reach a trace or a log.
//! SipHash-2-4 under a 128-bit job key stands in: equal for the same handle in every process of
//! one job, and useless for mapping anything. The processes of a job share the key through
//! `SHARECHECK_JOB_KEY`: `sharecheck run` sets a random one, and a process started without one
//! (the shim preloaded by hand) makes a random one when it is loaded and puts it in its
//! environment, so its children inherit it. The key is never derived from anything another user
//! of the host could read.

use sharecheck_core::schema::env;
use siphasher::sip::SipHasher24;
use std::hash::Hasher;
use std::sync::OnceLock;

static KEY: OnceLock<(u64, u64)> = OnceLock::new();

/// Called when the shim is loaded (process start): takes the job's key from the environment, or
/// makes a random one and hands it down to the children through the environment.
pub fn establish_key() {
    let _ = key();
}

fn key() -> (u64, u64) {
    *KEY.get_or_init(|| {
        if let Some(k) = std::env::var(env::JOB_KEY)
            .ok()
            .as_deref()
            .and_then(parse_key)
        {
            return k;
        }
        let k = random_key();
        let text = format!("{:016x}{:016x}", k.0, k.1);
        if let (Ok(name), Ok(value)) = (
            std::ffi::CString::new(env::JOB_KEY),
            std::ffi::CString::new(text),
        ) {
            // SAFETY: two NUL-terminated strings; setenv copies them. Done when the shim is
            // loaded, before the program's own threads run.
            unsafe { libc::setenv(name.as_ptr(), value.as_ptr(), 1) };
        }
        k
    })
}

/// 128 random bits from the kernel (`getrandom`), or, where that fails, from the clock and the
/// process's identity mixed by SipHash under a stack address (still nothing another user reads).
fn random_key() -> (u64, u64) {
    let mut bytes = [0u8; 16];
    // SAFETY: writes at most 16 bytes into the 16-byte local array.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n == bytes.len() as isize {
        let (a, b) = bytes.split_at(8);
        return (
            u64::from_le_bytes(a.try_into().expect("8 bytes")),
            u64::from_le_bytes(b.try_into().expect("8 bytes")),
        );
    }
    let mut h = SipHasher24::new_with_keys(&bytes as *const _ as u64, 0x7368_6172_6563_6b31);
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live local clock_gettime fills.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    h.write_i64(ts.tv_sec);
    h.write_i64(ts.tv_nsec);
    // SAFETY: getpid has no preconditions.
    h.write_i32(unsafe { libc::getpid() });
    let a = h.finish();
    h.write_u8(1);
    (a, h.finish())
}

/// Parses 32 hex digits.
fn parse_key(text: &str) -> Option<(u64, u64)> {
    let text = text.trim();
    if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        crate::log::warn_once(
            "job-key",
            format_args!("{} must be 32 hex digits; ignoring it", env::JOB_KEY),
        );
        return None;
    }
    Some((
        u64::from_str_radix(&text[..16], 16).ok()?,
        u64::from_str_radix(&text[16..], 16).ok()?,
    ))
}

/// The keyed fingerprint of `bytes`. The thread's last one is remembered (issue 24: an export,
/// its record and the checks of one call fingerprint the same handle up to three times, and a
/// program that exports the same memory again gets the same handle): a handle equal to the last
/// one, compared through [`quick`], gets the same fingerprint without SipHash's rounds. Nothing of
/// the memo leaves the process's memory.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let q = quick(bytes);
    let memo = MEMO.with(|m| m as *const Memo);
    // SAFETY: the thread-local lives as long as this thread, which is the only one to use it.
    let memo = unsafe { &*memo };
    // A signal handler that interrupts this thread here finds the memo busy and leaves it alone;
    // this thread never nests otherwise.
    if memo.busy.replace(true) {
        return keyed(bytes);
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    let fp = match memo.last.get() {
        Some((last_q, fp)) if last_q == q => fp,
        _ => {
            let fp = keyed(bytes);
            memo.last.set(Some((q, fp)));
            fp
        }
    };
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    memo.busy.set(false);
    fp
}

/// SipHash-2-4 of `bytes` under the job's key.
fn keyed(bytes: &[u8]) -> u64 {
    let (k0, k1) = key();
    let mut h = SipHasher24::new_with_keys(k0, k1);
    h.write(bytes);
    h.finish()
}

/// A fast 128-bit digest of `bytes`, for recognising the same bytes again: unkeyed and not a
/// fingerprint, it never leaves the memo. Every byte and the length move it (a test changes each
/// byte of a handle).
#[inline]
pub fn quick(bytes: &[u8]) -> (u64, u64) {
    // Four independent lanes (no dependency between them): a changed word changes its lane's
    // value, since each step is a bijection of the lane and of the word.
    if let Ok(handle) = <&[u8; 64]>::try_from(bytes) {
        // An IPC handle (the call path's case): the same digest, unrolled.
        let w =
            |i: usize| u64::from_le_bytes(handle[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        let h = [
            step(step(64, w(0)), w(4)),
            step(step(1, w(1)), w(5)),
            step(step(2, w(2)), w(6)),
            step(step(3, w(3)), w(7)),
        ];
        return (step(h[0], h[2]), step(h[1], h[3]));
    }
    quick_any(bytes)
}

/// [`quick`] of any length.
fn quick_any(bytes: &[u8]) -> (u64, u64) {
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(w)
    };
    let mut h = [bytes.len() as u64, 1, 2, 3];
    let blocks = bytes.chunks_exact(32);
    let tail = blocks.remainder();
    for block in blocks {
        for (lane, w) in h.iter_mut().zip(block.chunks_exact(8)) {
            *lane = step(*lane, u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
    }
    for (lane, w) in h.iter_mut().zip(tail.chunks(8)) {
        *lane = step(*lane, word(w));
    }
    (step(h[0], h[2]), step(h[1], h[3]))
}

/// One step of a [`quick`] lane: a bijection of the lane and of the word.
#[inline(always)]
fn step(h: u64, w: u64) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15; // odd: a multiply by it is a bijection
    (h ^ w).wrapping_mul(K).rotate_left(29)
}

/// This thread's last fingerprint: the digest of its bytes and the fingerprint.
struct Memo {
    busy: std::cell::Cell<bool>,
    last: std::cell::Cell<Option<((u64, u64), u64)>>,
}

crate::fast_thread_local! {
    static MEMO: Memo = Memo {
        busy: std::cell::Cell::new(false),
        last: std::cell::Cell::new(None),
    }; "sharecheck_tls_fingerprint_memo"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unrolled_digest_of_a_handle_is_the_general_one() {
        for seed in 0..64u8 {
            let handle: [u8; 64] = std::array::from_fn(|i| (i as u8).wrapping_mul(31) ^ seed);
            assert_eq!(quick(&handle), quick_any(&handle), "seed {seed}");
        }
    }

    #[test]
    fn keys_parse_only_from_32_hex_digits() {
        assert_eq!(
            parse_key("000102030405060708090a0b0c0d0e0f"),
            Some((0x0001020304050607, 0x08090a0b0c0d0e0f))
        );
        assert_eq!(parse_key("xyz"), None);
        assert_eq!(parse_key("000102030405060708090a0b0c0d0e0"), None);
    }

    #[test]
    fn fingerprints_separate_handles() {
        let a = fingerprint(&[1; 64]);
        assert_eq!(a, fingerprint(&[1; 64]));
        assert_ne!(a, fingerprint(&[2; 64]));
    }

    #[test]
    fn the_remembered_fingerprint_is_the_keyed_one_and_only_for_the_same_bytes() {
        let mut handle = [7u8; 64];
        let first = fingerprint(&handle);
        assert_eq!(first, keyed(&handle));
        // Every byte matters: the memo gives the last fingerprint only to the same bytes.
        for i in 0..64 {
            handle[i] ^= 1;
            assert_eq!(fingerprint(&handle), keyed(&handle), "byte {i} changed");
            assert_ne!(fingerprint(&handle), first, "byte {i} changed");
            handle[i] ^= 1;
            assert_eq!(fingerprint(&handle), first);
        }
        // Lengths differ too.
        assert_ne!(quick(&[0u8; 8]), quick(&[0u8; 16]));
    }
}

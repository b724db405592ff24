//! Keyed fingerprints of capability bytes (IPC and fabric handles).
//!
//! A handle lets anyone who holds it map the memory, so its bytes never reach a trace or a log.
//! SipHash-2-4 under a 128-bit job key stands in: equal for the same handle in every process of
//! one job (they share the key through `SHARECHECK_JOB_KEY`, which `sharecheck run` sets), and
//! useless for mapping anything.

use once_cell::sync::OnceCell;
use sharecheck_core::schema::env;
use siphasher::sip::SipHasher24;
use std::hash::Hasher;

static KEY: OnceCell<(u64, u64)> = OnceCell::new();

fn key() -> (u64, u64) {
    *KEY.get_or_init(|| {
        if let Some(k) = std::env::var(env::JOB_KEY)
            .ok()
            .as_deref()
            .and_then(parse_key)
        {
            return k;
        }
        // Without a job key the processes of one login session still agree: the key is derived
        // from the session id, the user and the boot.
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let mut h = SipHasher24::new_with_keys(0x7368_6172_6563_6865, 0x636b_2d6b_6579_0001);
        h.write(boot.trim().as_bytes());
        // SAFETY: getuid has no preconditions and cannot fail.
        h.write_u32(unsafe { libc::getuid() });
        // SAFETY: getsid(0) asks for the calling process's session: no pointer, no precondition.
        h.write_i32(unsafe { libc::getsid(0) });
        let a = h.finish();
        h.write_u8(1);
        (a, h.finish())
    })
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

pub fn fingerprint(bytes: &[u8]) -> u64 {
    let (k0, k1) = key();
    let mut h = SipHasher24::new_with_keys(k0, k1);
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

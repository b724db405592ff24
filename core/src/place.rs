//! Where a call acted, as its trace record says (`"ctx"`, `"dev"`, `"uuid"`, `"unreachable"`):
//! written by the shim (a record it formats itself, or one the ring carries compact, whose line
//! the writer formats: [`crate::ring`]) and read by the report's cross-process checks.

use crate::json::JsonOut;

/// Where a call acted, as its trace record says (`"ctx"`, `"dev"`, `"uuid"`, `"unreachable"`):
/// an IPC open's context (the mapping lives and dies with it), the context of the memory an IPC
/// export exported; that context's device, the device's UUID (which names it alike in every
/// process) and the UUIDs of the devices it cannot access (`cuDeviceCanAccessPeer` 0).
#[derive(Debug, Default)]
pub struct Place {
    pub context: Option<u64>,
    pub device: Option<i32>,
    pub uuid: Option<[u8; 16]>,
    pub unreachable: Vec<[u8; 16]>,
}

/// A record's `"ctx"`, `"dev"`, `"uuid"` and `"unreachable"` (what it knows of them).
pub fn encode_place(w: &mut JsonOut, place: &Place) {
    if let Some(ctx) = place.context {
        w.kv_hex("ctx", ctx);
    }
    if let Some(dev) = place.device {
        w.kv_i64("dev", i64::from(dev));
    }
    if let Some(uuid) = place.uuid {
        w.kv_str("uuid", &uuid_text(&uuid));
    }
    if !place.unreachable.is_empty() {
        w.key("unreachable");
        w.begin_array();
        for uuid in &place.unreachable {
            w.str(&uuid_text(uuid));
        }
        w.end_array();
    }
}

/// A device UUID as `nvidia-smi` writes it: `GPU-` and 32 hex digits in groups of 8-4-4-4-12.
/// Written into a fixed buffer: a record of the call path allocates nothing for it.
pub fn uuid_text(uuid: &[u8; 16]) -> UuidText {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = *b"GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    let mut at = 4;
    for (i, byte) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1; // the '-' already there
        }
        text[at] = DIGITS[usize::from(byte >> 4)];
        text[at + 1] = DIGITS[usize::from(byte & 15)];
        at += 2;
    }
    UuidText(text)
}

/// [`uuid_text`]'s answer: 40 ASCII bytes.
pub struct UuidText([u8; 40]);

impl std::ops::Deref for UuidText {
    type Target = str;
    fn deref(&self) -> &str {
        // Only ASCII is ever written into it.
        std::str::from_utf8(&self.0).unwrap_or("GPU-?")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The groups of `nvidia-smi -L`, each byte as two lowercase digits, high nibble first.
    #[test]
    fn uuids_are_written_as_nvidia_smi_writes_them() {
        let uuid: [u8; 16] = [
            0x0f, 0xc6, 0x13, 0x3d, 0x8d, 0x03, 0x18, 0x08, 0xc6, 0xf9, 0xfa, 0x4a, 0x25, 0x79,
            0x9d, 0x19,
        ];
        assert_eq!(
            &*uuid_text(&uuid),
            "GPU-0fc6133d-8d03-1808-c6f9-fa4a25799d19"
        );
        assert_eq!(
            &*uuid_text(&[0xff; 16]),
            "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff"
        );
    }
}

//! Opaque handles handed to the application.
//!
//! Contexts, streams, events and generic allocation handles are small integers tagged with their
//! kind in the upper bits, not pointers: a garbage or wrong-kind handle is simply not found in its
//! table, and nothing is ever dereferenced. (Device pointers are the exception: they are real
//! mappings, so that copies move real bytes.)

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Context = 0xC7,
    Stream = 0x57,
    Event = 0xE7,
    Allocation = 0xA1,
    /// A device's default memory pool (`CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`): id = device + 1.
    MemPool = 0xB0,
    /// A multicast object (`cuMulticastCreate`), a generic allocation handle too.
    Multicast = 0xAC,
}

const TAG_SHIFT: u32 = 40;

/// The handle of entry `id` of kind `kind`.
pub fn encode(kind: Kind, id: u64) -> u64 {
    ((kind as u64) << TAG_SHIFT) | id
}

/// The id inside `handle`, if it is a handle of kind `kind`.
pub fn decode(kind: Kind, handle: u64) -> Option<u64> {
    let id = handle & ((1 << TAG_SHIFT) - 1);
    (handle >> TAG_SHIFT == kind as u64 && id != 0).then_some(id)
}

pub fn to_ptr(handle: u64) -> *mut std::ffi::c_void {
    handle as usize as *mut std::ffi::c_void
}

pub fn from_ptr(ptr: *mut std::ffi::c_void) -> u64 {
    ptr as usize as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_kind_check() {
        let h = encode(Kind::Stream, 5);
        assert_eq!(decode(Kind::Stream, h), Some(5));
        assert_eq!(decode(Kind::Event, h), None);
        assert_eq!(decode(Kind::Stream, 0), None);
        assert_eq!(decode(Kind::Stream, 2), None);
    }
}

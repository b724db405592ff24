//! ABI-exact argument types of the interposed functions.
//!
//! Each type is `#[repr(transparent)]` (or `#[repr(C)]` for by-value structs) over the C type it
//! stands for, so it can appear directly in an `extern "C"` signature. The type, not the position,
//! decides how an argument is traced: a `CUdevice` is written as a device ordinal, a
//! `CUipcMemHandle` as a keyed fingerprint, an `AttachFlags` by flag name.

#![allow(non_camel_case_types)]

use crate::codes;
use crate::json::{Fingerprinter, JsonOut};
use std::ffi::{c_int, c_uint, c_ulonglong, c_void};

pub type CUresult = c_int;
pub type hipError_t = c_int;

// The C spellings of shared result codes; the values are [`crate::codes`]'s.
pub const CUDA_SUCCESS: CUresult = codes::SUCCESS;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = codes::INVALID_VALUE;
pub const CUDA_ERROR_NOT_SUPPORTED: CUresult = codes::NOT_SUPPORTED;
pub const HIP_SUCCESS: hipError_t = codes::SUCCESS;
pub const HIP_ERROR_INVALID_VALUE: hipError_t = codes::INVALID_VALUE;
pub const HIP_ERROR_NOT_SUPPORTED: hipError_t = codes::NOT_SUPPORTED;

/// What happened to the call when an argument is encoded: out-parameters are read only after the
/// driver itself wrote them (it returned success), and inputs only where the driver read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The driver was not called (missing driver or symbol, or a strict-mode refusal).
    NotCalled,
    /// The driver returned this code.
    Returned(c_int),
}

impl Outcome {
    pub fn succeeded(self) -> bool {
        matches!(self, Outcome::Returned(0))
    }
}

/// An argument type of an interposed function.
///
/// A compact trace record ([`crate::ring`]) holds an argument as a snapshot: one 64-bit word and
/// a tag byte, taken when the call is recorded ([`Self::snap`]: an out-parameter's value is read
/// then, exactly where [`Self::encode_named`] would read it, and a capability is fingerprinted
/// then) and written as JSON later, by whoever appends the record to the trace
/// ([`Self::encode_snap`], which writes exactly what [`Self::encode_named`] writes). Types whose
/// JSON needs more than a word (a structure read through a pointer) are not `COMPACT`: calls with
/// them are recorded as JSON at once.
pub trait ArgValue: Copy + 'static {
    /// The C spelling of this type, as the vendor header writes it (checked by the ABI test).
    fn c_type() -> String;
    /// Writes the argument's JSON value.
    fn encode(&self, w: &mut JsonOut, outcome: Outcome);
    /// Writes `"name":value` into the record's `"a"` object (an out-parameter changes the key).
    #[inline]
    fn encode_named(&self, w: &mut JsonOut, name: &'static str, outcome: Outcome) {
        w.key(name);
        self.encode(w, outcome);
    }
    /// Whether a snapshot holds everything [`Self::encode_named`] writes.
    const COMPACT: bool = false;
    /// The snapshot: a word and a tag (only for `COMPACT` types).
    #[inline(always)]
    fn snap(&self, _outcome: Outcome, _fingerprint: Fingerprinter) -> (u64, u8) {
        (0, 0)
    }
    /// Writes `"name":value` from a snapshot, as [`Self::encode_named`] wrote it when the
    /// snapshot was taken. Any word and tag are accepted (a damaged record writes wrong values,
    /// never fails).
    fn encode_snap(_word: u64, _tag: u8, w: &mut JsonOut, name: &'static str) {
        w.key(name);
        w.null();
    }
    /// For a call checked after its caller's stack is gone (a signal handler's, see the shim's
    /// `deferred`): copies into `keep` what the checks and the record read through this
    /// argument once the call returned `outcome`, and points the argument at the copy. False
    /// when the copy does not fit. Arguments that are not pointers read by the shim keep
    /// nothing.
    #[inline]
    fn detach(&mut self, _outcome: Outcome, _keep: &mut Keep) -> bool {
        true
    }
    /// The shareable handle type this argument names (`CUmemAllocationHandleType` of an export
    /// or import), which says what a shareable handle argument of the same call is: the call's
    /// [`Linked`] value. `None` for every other type.
    #[inline(always)]
    fn handle_type(&self) -> Option<c_uint> {
        None
    }
    /// [`Self::encode_named`], knowing the call's shareable handle type (see
    /// [`Self::handle_type`]); only a shareable handle argument needs it.
    #[inline(always)]
    fn encode_linked(&self, w: &mut JsonOut, name: &'static str, outcome: Outcome, _: Linked) {
        self.encode_named(w, name, outcome);
    }
    /// [`Self::snap`], knowing the call's shareable handle type.
    #[inline(always)]
    fn snap_linked(&self, outcome: Outcome, fingerprint: Fingerprinter, _: Linked) -> (u64, u8) {
        self.snap(outcome, fingerprint)
    }
    /// [`Self::detach`], knowing the call's shareable handle type.
    #[inline(always)]
    fn detach_linked(&mut self, outcome: Outcome, keep: &mut Keep, _: Linked) -> bool {
        self.detach(outcome, keep)
    }
}

/// What one argument of a call tells the others: the call's shareable handle type, where one of
/// its arguments is a `CUmemAllocationHandleType` ([`ArgValue::handle_type`]).
pub type Linked = Option<c_uint>;

/// Room for copies of what a call's pointers point to ([`ArgValue::detach`]).
pub struct Keep<'a> {
    room: &'a mut [u8],
}

impl<'a> Keep<'a> {
    pub fn new(room: &'a mut [u8]) -> Keep<'a> {
        Keep { room }
    }

    /// Copies `value` into the room: where the copy is, or `None` when it does not fit.
    pub fn put<T: Copy>(&mut self, value: T) -> Option<*mut T> {
        let pad = self.room.as_ptr().align_offset(std::mem::align_of::<T>());
        let end = pad.checked_add(std::mem::size_of::<T>())?;
        if end > self.room.len() {
            return None;
        }
        let (used, rest) = std::mem::take(&mut self.room).split_at_mut(end);
        let at = used[pad..].as_mut_ptr().cast::<T>();
        // SAFETY: `at` is aligned for `T` (`pad`), with `size_of::<T>()` bytes of the room
        // behind it, which this `Keep` hands out once.
        unsafe { at.write(value) };
        self.room = rest;
        Some(at)
    }
}

/// A type an out-parameter can point to: how its value is written once the driver filled it.
pub trait Pointee: Copy + 'static {
    fn c_type() -> String;
    fn encode_value(&self, w: &mut JsonOut);
    /// Writes `"*name":value` (see [`Out`]).
    #[inline]
    fn encode_deref(&self, w: &mut JsonOut, name: &'static str) {
        w.key_deref(name);
        self.encode_value(w);
    }
    /// Whether a word holds what [`Self::encode_deref`] writes (see [`ArgValue::snap`]).
    const COMPACT: bool = false;
    /// The value as one word (a capability: its fingerprint).
    #[inline(always)]
    fn to_word(&self, _fingerprint: Fingerprinter) -> u64 {
        0
    }
    /// Writes `"*name":value` from [`Self::to_word`]'s word.
    fn encode_deref_word(_word: u64, w: &mut JsonOut, name: &'static str) {
        w.key_deref(name);
        w.null();
    }
}

/// The bits of a value of at most 8 bytes (an integer or a pointer), as a word.
#[inline(always)]
fn word_of<T: Copy>(value: &T) -> u64 {
    const { assert!(std::mem::size_of::<T>() <= 8) };
    let mut word = 0u64;
    // SAFETY: copies the value's `size_of::<T>() <= 8` bytes into a local word.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (value as *const T).cast::<u8>(),
            (&mut word as *mut u64).cast::<u8>(),
            std::mem::size_of::<T>(),
        );
    };
    word
}

/// A value back from [`word_of`]'s word. Only for the types of [`plain_snapshot!`]: integers and
/// raw pointers (never dereferenced), for which every bit pattern is a value.
#[inline(always)]
fn from_word<T: Copy>(word: u64) -> T {
    const { assert!(std::mem::size_of::<T>() <= 8) };
    // SAFETY: `T` is an integer or pointer newtype of at most 8 bytes (the macro's callers), so
    // the word's first bytes are a valid `T`.
    unsafe { std::ptr::read_unaligned((&word as *const u64).cast::<T>()) }
}

/// `ArgValue`'s snapshot items for a type that is its own bits (an integer or a pointer, at most
/// 8 bytes): the word is the value, and it is written as the value is.
macro_rules! plain_snapshot {
    () => {
        const COMPACT: bool = true;
        #[inline(always)]
        fn snap(&self, _: Outcome, _: Fingerprinter) -> (u64, u8) {
            (word_of(self), 0)
        }
        fn encode_snap(word: u64, _: u8, w: &mut JsonOut, name: &'static str) {
            from_word::<Self>(word).encode_named(w, name, Outcome::NotCalled)
        }
    };
}

/// `Pointee`'s word items for a type that is its own bits.
macro_rules! plain_word {
    () => {
        const COMPACT: bool = true;
        #[inline(always)]
        fn to_word(&self, _: Fingerprinter) -> u64 {
            word_of(self)
        }
        fn encode_deref_word(word: u64, w: &mut JsonOut, name: &'static str) {
            from_word::<Self>(word).encode_deref(w, name)
        }
    };
}

macro_rules! opaque_handle {
    ($(#[$doc:meta])* $name:ident, $c:literal) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name(pub *mut c_void);
        // Handles are opaque numbers to the shim; it never dereferences them.
        impl $name {
            pub const NULL: $name = $name(std::ptr::null_mut());
            pub fn addr(self) -> u64 {
                self.0 as usize as u64
            }
        }
        impl Pointee for $name {
            fn c_type() -> String {
                $c.into()
            }
            fn encode_value(&self, w: &mut JsonOut) {
                w.hex(self.addr());
            }
            #[inline]
            fn encode_deref(&self, w: &mut JsonOut, name: &'static str) {
                w.kv_deref_hex(name, self.addr());
            }
            plain_word!();
        }
        impl ArgValue for $name {
            fn c_type() -> String {
                $c.into()
            }
            fn encode(&self, w: &mut JsonOut, _: Outcome) {
                self.encode_value(w);
            }
            #[inline]
            fn encode_named(&self, w: &mut JsonOut, name: &'static str, _: Outcome) {
                w.kv_hex(name, self.addr());
            }
            plain_snapshot!();
        }
    };
}

opaque_handle!(CUcontext, "CUcontext");
opaque_handle!(
    /// A memory pool (`cuMemPoolCreate`, an import, or a device's default pool).
    CUmemoryPool,
    "CUmemoryPool"
);
opaque_handle!(CUevent, "CUevent");
opaque_handle!(hipEvent_t, "hipEvent_t");
opaque_handle!(
    /// A HIP memory pool (`hipMemPoolCreate`, an import, or a device's default pool).
    hipMemPool_t,
    "hipMemPool_t"
);
opaque_handle!(
    /// `void *`: a host or (HIP) device address.
    VoidPtr,
    "void *"
);

macro_rules! stream_handle {
    ($name:ident, $c:literal, $legacy:literal, $per_thread:literal) => {
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name(pub *mut c_void);
        impl $name {
            pub fn addr(self) -> u64 {
                self.0 as usize as u64
            }
        }
        impl Pointee for $name {
            fn c_type() -> String {
                $c.into()
            }
            fn encode_value(&self, w: &mut JsonOut) {
                w.hex(self.addr());
            }
            #[inline]
            fn encode_deref(&self, w: &mut JsonOut, name: &'static str) {
                w.kv_deref_hex(name, self.addr());
            }
            plain_word!();
        }
        impl ArgValue for $name {
            plain_snapshot!();
            fn c_type() -> String {
                $c.into()
            }
            fn encode(&self, w: &mut JsonOut, _: Outcome) {
                // The two special handles are written by name: they change which stream is meant.
                match self.addr() {
                    1 => w.str($legacy),
                    2 => w.str($per_thread),
                    a => w.hex(a),
                }
            }
        }
    };
}

stream_handle!(
    CUstream,
    "CUstream",
    "CU_STREAM_LEGACY",
    "CU_STREAM_PER_THREAD"
);
stream_handle!(
    hipStream_t,
    "hipStream_t",
    "hipStreamLegacy",
    "hipStreamPerThread"
);

/// A pointer argument the shim records as an address and never reads.
macro_rules! const_pointer {
    ($(#[$doc:meta])* $name:ident, $c:literal) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name(pub *const c_void);
        impl $name {
            pub fn addr(self) -> u64 {
                self.0 as usize as u64
            }
        }
        impl ArgValue for $name {
            plain_snapshot!();
            fn c_type() -> String {
                $c.into()
            }
            fn encode(&self, w: &mut JsonOut, _: Outcome) {
                w.hex(self.addr());
            }
            #[inline]
            fn encode_named(&self, w: &mut JsonOut, name: &'static str, _: Outcome) {
                w.kv_hex(name, self.addr());
            }
        }
    };
}

const_pointer!(
    /// `const void *`
    ConstVoidPtr,
    "const void *"
);
const_pointer!(
    /// `const CUmemAccessDesc *` of `cuMemSetAccess` (recorded as its address).
    MemAccessDescPtr,
    "const CUmemAccessDesc *"
);
const_pointer!(
    /// `const hipMemAccessDesc *` of `hipMemSetAccess` (recorded as its address).
    HipMemAccessDescPtr,
    "const hipMemAccessDesc *"
);
const_pointer!(
    /// `const hipMemPoolProps *` of `hipMemPoolCreate` (recorded as its address; the check reads
    /// its handle types, as the runtime does).
    HipMemPoolPropsPtr,
    "const hipMemPoolProps *"
);
const_pointer!(
    /// `const hipMemAllocationProp *` of `hipMemCreate` (recorded as its address).
    HipMemAllocationPropPtr,
    "const hipMemAllocationProp *"
);

macro_rules! number {
    ($(#[$doc:meta])* $name:ident($inner:ty), $c:literal, $write:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub $inner);
        impl Pointee for $name {
            fn c_type() -> String {
                $c.into()
            }
            fn encode_value(&self, w: &mut JsonOut) {
                number!(@write w, self.0, $write);
            }
            #[inline(always)]
            fn encode_deref(&self, w: &mut JsonOut, name: &'static str) {
                number!(@deref w, name, self.0, $write);
            }
            plain_word!();
        }
        impl ArgValue for $name {
            plain_snapshot!();
            fn c_type() -> String {
                $c.into()
            }
            fn encode(&self, w: &mut JsonOut, _: Outcome) {
                self.encode_value(w);
            }
            #[inline(always)]
            fn encode_named(&self, w: &mut JsonOut, name: &'static str, _: Outcome) {
                number!(@named w, name, self.0, $write);
            }
        }
    };
    (@write $w:ident, $v:expr, signed) => { $w.i64($v as i64) };
    (@write $w:ident, $v:expr, unsigned) => { $w.u64($v as u64) };
    (@write $w:ident, $v:expr, hex) => { $w.hex($v as u64) };
    (@named $w:ident, $k:ident, $v:expr, signed) => { $w.kv_i64($k, $v as i64) };
    (@named $w:ident, $k:ident, $v:expr, unsigned) => { $w.kv_u64($k, $v as u64) };
    (@named $w:ident, $k:ident, $v:expr, hex) => { $w.kv_hex($k, $v as u64) };
    (@deref $w:ident, $k:ident, $v:expr, signed) => { $w.kv_deref_i64($k, $v as i64) };
    (@deref $w:ident, $k:ident, $v:expr, unsigned) => { $w.kv_deref_u64($k, $v as u64) };
    (@deref $w:ident, $k:ident, $v:expr, hex) => { $w.kv_deref_hex($k, $v as u64) };
}

number!(
    /// A CUDA device ordinal.
    CUdevice(c_int),
    "CUdevice",
    signed
);
number!(
    /// A HIP device id (`int` in HIP's prototypes).
    HipDevice(c_int),
    "int",
    signed
);
number!(
    /// A device address.
    CUdeviceptr(u64),
    "CUdeviceptr",
    hex
);
number!(
    /// A byte count (`size_t`).
    Size(usize),
    "size_t",
    unsigned
);
number!(
    /// A 32-bit count (`cuuint32_t`).
    Count32(u32),
    "cuuint32_t",
    unsigned
);
number!(
    /// A 64-bit size or offset (`cuuint64_t`).
    U64(u64),
    "cuuint64_t",
    unsigned
);
number!(
    /// A plain C `int` (an out-value such as `canAccessPeer` or `queryStatus`).
    Int(c_int),
    "int",
    signed
);
number!(
    /// A logical endpoint id.
    CUlogicalEndpointId(u32),
    "CUlogicalEndpointId",
    unsigned
);
number!(
    /// A generic allocation handle from `cuMemCreate`.
    CUmemGenericAllocationHandle(u64),
    "CUmemGenericAllocationHandle",
    hex
);
number!(
    /// HIP's generic allocation handle (`hipMemCreate`; a pointer in C, a word here).
    hipMemGenericAllocationHandle_t(u64),
    "hipMemGenericAllocationHandle_t",
    hex
);
number!(
    /// The byte value of `cuMemsetD8Async`.
    UChar(u8),
    "unsigned char",
    unsigned
);
number!(
    /// An `unsigned int` value (`cuMemsetD32Async`'s word).
    Uint(c_uint),
    "unsigned int",
    unsigned
);
number!(
    /// Flags documented as reserved: "must be 0".
    ReservedFlags(c_uint),
    "unsigned int",
    unsigned
);
number!(
    /// 64-bit flags documented as reserved (logical endpoint binds).
    ReservedFlags64(c_ulonglong),
    "unsigned long long",
    unsigned
);

/// Writes a flag word as `NAME|NAME|0x..` (unknown bits in hex), or `0`.
fn write_flag_names(w: &mut JsonOut, value: u64, names: &[(u64, &str)]) {
    if value == 0 {
        if let Some((_, zero)) = names.iter().find(|(bit, _)| *bit == 0) {
            w.str(zero);
        } else {
            w.str("0");
        }
        return;
    }
    // Names and hex digits, joined by `|`, on the stack: a traced call allocates nothing.
    let mut text = StackText::default();
    let mut rest = value;
    for &(bit, name) in names {
        if bit != 0 && rest & bit == bit {
            if !text.is_empty() {
                text.push_str("|");
            }
            text.push_str(name);
            rest &= !bit;
        }
    }
    if rest != 0 {
        use std::fmt::Write as _;
        if !text.is_empty() {
            text.push_str("|");
        }
        let _ = write!(text, "{rest:#x}");
    }
    match text.as_str() {
        Some(joined) => w.str(joined),
        // Longer than the stack buffer, which no flag set of the API is: the value in hex.
        None => {
            let mut hex = StackText::default();
            let _ = std::fmt::Write::write_fmt(&mut hex, format_args!("{value:#x}"));
            w.str(hex.as_str().unwrap_or("?"));
        }
    }
}

/// Text built on the stack, up to 512 bytes; past that it says it overflowed.
struct StackText {
    buf: [u8; 512],
    len: usize,
    overflow: bool,
}

impl Default for StackText {
    fn default() -> Self {
        StackText {
            buf: [0; 512],
            len: 0,
            overflow: false,
        }
    }
}

impl StackText {
    fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn push_str(&mut self, s: &str) {
        match self.buf.get_mut(self.len..self.len + s.len()) {
            Some(room) if !self.overflow => {
                room.copy_from_slice(s.as_bytes());
                self.len += s.len();
            }
            _ => self.overflow = true,
        }
    }
    /// The text, unless it overflowed.
    fn as_str(&self) -> Option<&str> {
        if self.overflow {
            return None;
        }
        std::str::from_utf8(&self.buf[..self.len]).ok()
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

macro_rules! flags {
    ($(#[$doc:meta])* $name:ident($inner:ty), $c:literal, [$(($bit:expr, $flag:literal)),* $(,)?] $($handle_type:ident)?) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name(pub $inner);
        impl $name {
            pub const NAMES: &'static [(u64, &'static str)] = &[$(($bit, $flag)),*];
        }
        impl ArgValue for $name {
            plain_snapshot!();
            fn c_type() -> String {
                $c.into()
            }
            fn encode(&self, w: &mut JsonOut, _: Outcome) {
                write_flag_names(w, self.0 as u64, Self::NAMES);
            }
            $(
                /// The call's shareable handle type (see [`ArgValue::handle_type`]).
                #[inline(always)]
                fn $handle_type(&self) -> Option<c_uint> {
                    Some(self.0 as c_uint)
                }
            )?
        }
    };
}

flags!(
    /// `CUevent_flags` of `cuEventCreate`.
    EventFlags(c_uint),
    "unsigned int",
    [
        (0x1, "CU_EVENT_BLOCKING_SYNC"),
        (0x2, "CU_EVENT_DISABLE_TIMING"),
        (0x4, "CU_EVENT_INTERPROCESS")
    ]
);
flags!(
    /// The flags of `hipEventCreateWithFlags`.
    HipEventFlags(c_uint),
    "unsigned int",
    [
        (0x1, "hipEventBlockingSync"),
        (0x2, "hipEventDisableTiming"),
        (0x4, "hipEventInterprocess")
    ]
);
flags!(
    /// `CUstream_flags` of `cuStreamCreate`.
    StreamFlags(c_uint),
    "unsigned int",
    [(0x1, "CU_STREAM_NON_BLOCKING")]
);
flags!(
    /// `CUipcMem_flags` of `cuIpcOpenMemHandle`.
    IpcMemFlags(c_uint),
    "unsigned int",
    [(0x1, "CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS")]
);
flags!(
    /// `hipIpcOpenMemHandle` flags (`hipIpcMemLazyEnablePeerAccess` is 0 in HIP 5.x, 1 later).
    HipIpcMemFlags(c_uint),
    "unsigned int",
    [(0x1, "hipIpcMemLazyEnablePeerAccess(1)")]
);
flags!(
    /// `CUmemAttach_flags` of `cuStreamAttachMemAsync`.
    AttachFlags(c_uint),
    "unsigned int",
    [
        (0x1, "CU_MEM_ATTACH_GLOBAL"),
        (0x2, "CU_MEM_ATTACH_HOST"),
        (0x4, "CU_MEM_ATTACH_SINGLE")
    ]
);
flags!(
    /// `hipMemAttach*` flags of `hipStreamAttachMemAsync`.
    HipAttachFlags(c_uint),
    "unsigned int",
    [
        (0x1, "hipMemAttachGlobal"),
        (0x2, "hipMemAttachHost"),
        (0x4, "hipMemAttachSingle")
    ]
);
flags!(
    /// `CUlogicalEndpointIpcHandleType` (an enum; written by name).
    CUlogicalEndpointIpcHandleType(c_uint),
    "CUlogicalEndpointIpcHandleType",
    [
        (0x0, "CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_NONE"),
        (0x1, "CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC")
    ]
);

flags!(
    /// `CUmemAllocationGranularity_flags` (an enum; written by name).
    GranularityFlags(c_uint),
    "CUmemAllocationGranularity_flags",
    [
        (0x0, "CU_MEM_ALLOC_GRANULARITY_MINIMUM"),
        (0x1, "CU_MEM_ALLOC_GRANULARITY_RECOMMENDED")
    ]
);

flags!(
    /// `CUmulticastGranularity_flags` (an enum; written by name).
    MulticastGranularityFlags(c_uint),
    "CUmulticastGranularity_flags",
    [
        (0x0, "CU_MULTICAST_GRANULARITY_MINIMUM"),
        (0x1, "CU_MULTICAST_GRANULARITY_RECOMMENDED")
    ]
);

flags!(
    /// `CUmemAllocationHandleType` (a mask in `requestedHandleTypes`, one value as an argument).
    MemHandleTypes(c_uint),
    "CUmemAllocationHandleType",
    [
        (0x0, "CU_MEM_HANDLE_TYPE_NONE"),
        (0x1, "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"),
        (0x2, "CU_MEM_HANDLE_TYPE_WIN32"),
        (0x4, "CU_MEM_HANDLE_TYPE_WIN32_KMT"),
        (0x8, "CU_MEM_HANDLE_TYPE_FABRIC")
    ]
    handle_type
);

flags!(
    /// `hipMemAllocationHandleType` (HIP 5.2: no FABRIC).
    HipMemHandleTypes(c_uint),
    "hipMemAllocationHandleType",
    [
        (0x0, "hipMemHandleTypeNone"),
        (0x1, "hipMemHandleTypePosixFileDescriptor"),
        (0x2, "hipMemHandleTypeWin32"),
        (0x4, "hipMemHandleTypeWin32Kmt")
    ]
    handle_type
);

macro_rules! capability_handle {
    ($(#[$doc:meta])* $name:ident, $c:literal) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub struct $name {
            pub reserved: [u8; 64],
        }
        impl Pointee for $name {
            fn c_type() -> String {
                $c.into()
            }
            fn encode_value(&self, w: &mut JsonOut) {
                // A capability: only its keyed fingerprint is ever written.
                w.fingerprint_of(&self.reserved);
            }
            // The word is the fingerprint: the bytes are never kept.
            const COMPACT: bool = true;
            #[inline]
            fn to_word(&self, fingerprint: Fingerprinter) -> u64 {
                fingerprint(&self.reserved)
            }
            fn encode_deref_word(word: u64, w: &mut JsonOut, name: &'static str) {
                w.key_deref(name);
                w.fingerprint_value(word);
            }
        }
        impl ArgValue for $name {
            fn c_type() -> String {
                $c.into()
            }
            fn encode(&self, w: &mut JsonOut, _: Outcome) {
                self.encode_value(w);
            }
            const COMPACT: bool = true;
            #[inline]
            fn snap(&self, _: Outcome, fingerprint: Fingerprinter) -> (u64, u8) {
                (fingerprint(&self.reserved), 0)
            }
            fn encode_snap(word: u64, _: u8, w: &mut JsonOut, name: &'static str) {
                w.key(name);
                w.fingerprint_value(word);
            }
        }
    };
}

capability_handle!(
    /// `CUipcMemHandle`: 64 opaque bytes, passed by value.
    CUipcMemHandle,
    "CUipcMemHandle"
);
capability_handle!(
    /// `CUipcEventHandle`: 64 opaque bytes, passed by value.
    CUipcEventHandle,
    "CUipcEventHandle"
);
capability_handle!(
    /// `hipIpcMemHandle_t`: 64 opaque bytes, passed by value.
    hipIpcMemHandle_t,
    "hipIpcMemHandle_t"
);
capability_handle!(
    /// `hipIpcEventHandle_t`: 64 opaque bytes, passed by value.
    hipIpcEventHandle_t,
    "hipIpcEventHandle_t"
);

/// An out-parameter: the application's pointer, read only after the driver succeeded.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Out<T: Pointee>(pub *mut T);

impl<T: Pointee> Out<T> {
    pub fn addr(self) -> u64 {
        self.0 as usize as u64
    }
    /// The value the driver wrote, in place, if it succeeded: for a type of alignment 1 (a
    /// 64-byte capability, say), which a pointer of any address may name. A check reads it where
    /// it is, without a copy (issue 24: a 64-byte `memcpy` call on every traced-or-not export).
    pub fn written_in_place(&self, outcome: Outcome) -> Option<&T> {
        const { assert!(std::mem::align_of::<T>() == 1) };
        if outcome.succeeded() && !self.0.is_null() {
            // SAFETY: the driver returned success, so it wrote a `T` through this pointer, which
            // any address may hold (alignment 1); the program owns it for the call's duration.
            Some(unsafe { &*self.0 })
        } else {
            None
        }
    }
    /// The value the driver wrote, if it succeeded. Never reads a pointer the driver did not write.
    pub fn written(self, outcome: Outcome) -> Option<T> {
        if outcome.succeeded() && !self.0.is_null() {
            // SAFETY: the driver returned success, so it wrote a `T` through this pointer.
            Some(unsafe { self.0.read_unaligned() })
        } else {
            None
        }
    }
}

impl<T: Pointee> ArgValue for Out<T> {
    fn c_type() -> String {
        format!("{} *", T::c_type())
    }
    /// The pointer itself: `"0x7ffc..."`, or `null`.
    fn encode(&self, w: &mut JsonOut, _: Outcome) {
        if self.0.is_null() {
            w.null();
        } else {
            w.hex(self.addr());
        }
    }
    /// `"*name":value` once the driver wrote the value (C's dereference: what the pointer points
    /// to), else `"name":pointer`.
    #[inline(always)]
    fn encode_named(&self, w: &mut JsonOut, name: &'static str, outcome: Outcome) {
        match self.written(outcome) {
            Some(value) => value.encode_deref(w, name),
            None if self.0.is_null() => {
                w.key(name);
                w.null();
            }
            None => w.kv_hex(name, self.addr()),
        }
    }
    const COMPACT: bool = T::COMPACT;
    /// Tag 1: the value the driver wrote (its word); tag 0: the pointer.
    #[inline(always)]
    fn snap(&self, outcome: Outcome, fingerprint: Fingerprinter) -> (u64, u8) {
        match self.written(outcome) {
            Some(value) => (value.to_word(fingerprint), 1),
            None => (self.addr(), 0),
        }
    }
    fn detach(&mut self, outcome: Outcome, keep: &mut Keep) -> bool {
        match self.written(outcome) {
            Some(value) => keep.put(value).map(|at| self.0 = at).is_some(),
            None => true,
        }
    }
    fn encode_snap(word: u64, tag: u8, w: &mut JsonOut, name: &'static str) {
        match (tag, word) {
            (1, _) => T::encode_deref_word(word, w, name),
            (_, 0) => {
                w.key(name);
                w.null();
            }
            _ => w.kv_hex(name, word),
        }
    }
}

impl Pointee for VoidPtrOut {
    fn c_type() -> String {
        "void *".into()
    }
    fn encode_value(&self, w: &mut JsonOut) {
        w.hex(self.0 as usize as u64);
    }
    #[inline]
    fn encode_deref(&self, w: &mut JsonOut, name: &'static str) {
        w.kv_deref_hex(name, self.0 as usize as u64);
    }
    plain_word!();
}

/// A `void *` written by the driver through a `void **` (HIP's `devPtr` out-parameters).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoidPtrOut(pub *mut c_void);

/// `CUlogicalEndpointType`.
pub const CU_LOGICAL_ENDPOINT_TYPE_INVALID: c_uint = 0;
pub const CU_LOGICAL_ENDPOINT_TYPE_UNICAST: c_uint = 1;
pub const CU_LOGICAL_ENDPOINT_TYPE_MULTICAST: c_uint = 2;

/// `CUlogicalEndpointProp` (CUDA 13.3): 24 bytes, fields at 0, 4, 8, 16, 20.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CUlogicalEndpointProp {
    /// `CUlogicalEndpointType`
    pub type_: c_uint,
    /// `unicast.device` or `multicast.numDevices`, by `type_`.
    pub device_or_num_devices: c_int,
    pub size: c_ulonglong,
    pub ipc_handle_types: c_uint,
    pub flags: c_uint,
}

/// A pointer to an input structure the driver reads, decoded field by field (`$encode`) when the
/// call succeeded: only a call that succeeded is sure to have read it (a failing one may have
/// stopped before, e.g. NOT_INITIALIZED). A deferred check keeps the structure by value.
macro_rules! input_ptr {
    ($(#[$doc:meta])* $name:ident($pointee:ty), $c:literal, $encode:expr) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name(pub *const $pointee);

        impl $name {
            /// The structure, if the driver accepted this pointer (a call that succeeded read
            /// it).
            pub fn read(self, outcome: Outcome) -> Option<$pointee> {
                if outcome.succeeded() && !self.0.is_null() {
                    // SAFETY: the driver read this documented input structure (at least as
                    // long as the type read here) and succeeded.
                    Some(unsafe { self.0.read_unaligned() })
                } else {
                    None
                }
            }
        }

        impl ArgValue for $name {
            fn c_type() -> String {
                $c.into()
            }
            fn detach(&mut self, outcome: Outcome, keep: &mut Keep) -> bool {
                match self.read(outcome) {
                    Some(value) => keep.put(value).map(|at| self.0 = at.cast_const()).is_some(),
                    None => true,
                }
            }
            fn encode(&self, w: &mut JsonOut, outcome: Outcome) {
                match self.read(outcome) {
                    Some(p) => {
                        let encode: fn(&mut JsonOut, &$pointee) = $encode;
                        encode(w, &p);
                    }
                    None => w.hex(self.0 as usize as u64),
                }
            }
        }
    };
}

input_ptr!(
    /// `const CUlogicalEndpointProp *`.
    LogicalEndpointPropPtr(CUlogicalEndpointProp),
    "const CUlogicalEndpointProp *",
    |w, p| {
        w.begin_object();
        w.key("type");
        match p.type_ {
            CU_LOGICAL_ENDPOINT_TYPE_INVALID => w.str("CU_LOGICAL_ENDPOINT_TYPE_INVALID"),
            CU_LOGICAL_ENDPOINT_TYPE_UNICAST => w.str("CU_LOGICAL_ENDPOINT_TYPE_UNICAST"),
            CU_LOGICAL_ENDPOINT_TYPE_MULTICAST => w.str("CU_LOGICAL_ENDPOINT_TYPE_MULTICAST"),
            other => w.u64(u64::from(other)),
        }
        if p.type_ == CU_LOGICAL_ENDPOINT_TYPE_MULTICAST {
            w.kv_u64(
                "multicast.numDevices",
                u64::from(p.device_or_num_devices as u32),
            );
        } else {
            w.kv_i64("unicast.device", i64::from(p.device_or_num_devices));
        }
        w.kv_u64("size", p.size);
        w.key("ipcHandleTypes");
        write_flag_names(
            w,
            u64::from(p.ipc_handle_types),
            CUlogicalEndpointIpcHandleType::NAMES,
        );
        w.key("flags");
        write_flag_names(
            w,
            u64::from(p.flags),
            &[
                (0, "CU_LOGICAL_ENDPOINT_FLAG_NONE"),
                (1, "CU_LOGICAL_ENDPOINT_FLAG_COUNTED_OPS"),
            ],
        );
        w.end_object();
    }
);

/// `CUmulticastObjectProp` (CUDA 12.1; 32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CUmulticastObjectProp {
    pub num_devices: c_uint,
    pub size: usize,
    pub handle_types: c_ulonglong,
    pub flags: c_ulonglong,
}

input_ptr!(
    /// `const CUmulticastObjectProp *` of `cuMulticastCreate` and `cuMulticastGetGranularity`.
    MulticastObjectPropPtr(CUmulticastObjectProp),
    "const CUmulticastObjectProp *",
    |w, p| {
        w.begin_object();
        w.kv_u64("numDevices", u64::from(p.num_devices));
        w.kv_u64("size", p.size as u64);
        w.key("handleTypes");
        write_flag_names(w, p.handle_types, MemHandleTypes::NAMES);
        w.kv_u64("flags", p.flags);
        w.end_object();
    }
);

/// The size of the capabilities passed by pointer (`CU_IPC_HANDLE_SIZE`): a logical endpoint's
/// `CUlogicalEndpointFabricHandle`, the one handle type of CUDA 13.3 and 13.4
/// (`CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_NONE` has no handle), and a pool pointer's export data
/// (`CUmemPoolPtrExportData`).
pub const CAPABILITY_SIZE: usize = 64;

/// The bytes behind a capability pointer, once a call succeeded: an export wrote them, an import
/// read them; a failed call may have done neither.
fn capability_bytes(ptr: *const c_void, outcome: Outcome) -> Option<[u8; CAPABILITY_SIZE]> {
    if outcome.succeeded() && !ptr.is_null() {
        // SAFETY: the driver succeeded, so it wrote (export) or read (import) the 64 bytes there
        // (a logical endpoint call succeeds only with the FABRIC handle's 64 bytes).
        Some(unsafe { ptr.cast::<[u8; CAPABILITY_SIZE]>().read_unaligned() })
    } else {
        None
    }
}

/// A pointer to 64 capability bytes (a logical endpoint's FABRIC handle, a pool pointer's export
/// data) in a record: `"*handle":"fp:..."` (only its keyed fingerprint, never its bytes) once the
/// call succeeded, else the address.
macro_rules! capability_ptr {
    ($(#[$doc:meta])* $name:ident($ptr:ty), $c:literal) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name(pub $ptr);
        impl $name {
            /// The bytes, once the call succeeded (for their fingerprint only).
            pub fn bytes(self, outcome: Outcome) -> Option<[u8; CAPABILITY_SIZE]> {
                capability_bytes(self.0 as *const c_void, outcome)
            }
        }
        impl ArgValue for $name {
            fn c_type() -> String {
                $c.into()
            }
            fn encode(&self, w: &mut JsonOut, outcome: Outcome) {
                match self.bytes(outcome) {
                    Some(bytes) => w.fingerprint_of(&bytes),
                    None => w.hex(self.0 as usize as u64),
                }
            }
            #[inline]
            fn encode_named(&self, w: &mut JsonOut, name: &'static str, outcome: Outcome) {
                match self.bytes(outcome) {
                    Some(bytes) => {
                        w.key_deref(name);
                        w.fingerprint_of(&bytes);
                    }
                    None => w.kv_hex(name, self.0 as usize as u64),
                }
            }
            const COMPACT: bool = true;
            /// Tag 1: the handle's fingerprint; tag 0: the pointer.
            #[inline]
            fn snap(&self, outcome: Outcome, fingerprint: Fingerprinter) -> (u64, u8) {
                match self.bytes(outcome) {
                    Some(bytes) => (fingerprint(&bytes), 1),
                    None => (self.0 as usize as u64, 0),
                }
            }
            fn encode_snap(word: u64, tag: u8, w: &mut JsonOut, name: &'static str) {
                if tag == 1 {
                    w.key_deref(name);
                    w.fingerprint_value(word);
                } else {
                    w.kv_hex(name, word);
                }
            }
            fn detach(&mut self, outcome: Outcome, keep: &mut Keep) -> bool {
                match self.bytes(outcome) {
                    Some(bytes) => keep.put(bytes).map(|at| self.0 = at.cast::<c_void>() as $ptr).is_some(),
                    None => true,
                }
            }
        }
    };
}

capability_ptr!(
    /// The `void *handle` a logical endpoint export writes the handle through.
    LogicalEndpointHandlePtr(*mut c_void),
    "void *"
);
capability_ptr!(
    /// The `const void *handle` a logical endpoint import reads the handle from.
    LogicalEndpointHandleConstPtr(*const c_void),
    "const void *"
);
capability_ptr!(
    /// The `CUmemPoolPtrExportData *` a pool pointer's export writes, or its import reads (the
    /// data lets a process holding the pool map the memory: a capability).
    PoolExportDataPtr(*mut c_void),
    "CUmemPoolPtrExportData *"
);
capability_ptr!(
    /// HIP's `hipMemPoolPtrExportData *` (64 bytes, a capability as CUDA's is).
    HipPoolExportDataPtr(*mut c_void),
    "hipMemPoolPtrExportData *"
);

/// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`.
pub const CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_uint = 1;
/// `CUDA_ERROR_NOT_PERMITTED`: what an import of a FABRIC handle answers where the importer has
/// no access to the exporter's IMEX channel.
const NOT_PERMITTED: c_int = 800;

/// Reads memory the driver may not have read (a failed call's input), without trusting the
/// pointer: set once by the shim (`process_vm_readv`, which fails where a plain read would
/// fault). Where none is set, such memory is not read.
static UNTRUSTED_READER: std::sync::OnceLock<
    fn(*const c_void, &mut [u8; CAPABILITY_SIZE]) -> bool,
> = std::sync::OnceLock::new();

/// Sets the reader of [`UNTRUSTED_READER`] (the first call wins).
pub fn set_untrusted_reader(read: fn(*const c_void, &mut [u8; CAPABILITY_SIZE]) -> bool) {
    let _ = UNTRUSTED_READER.set(read);
}

/// What a shareable handle argument of an export or import is, by the call's handle type
/// ([`Linked`]): a POSIX file descriptor's number, a FABRIC handle (64 capability bytes: only their
/// keyed fingerprint is written), or an address (another type, or nothing the shim may read).
#[derive(Clone, Copy)]
enum Shared {
    Fd(c_int),
    Fabric([u8; CAPABILITY_SIZE]),
    Address(u64),
}

/// Snapshot tags of a shareable handle argument: its address, a FABRIC handle's fingerprint, an fd.
const SHARED_ADDRESS: u8 = 0;
const SHARED_FABRIC: u8 = 1;
const SHARED_FD: u8 = 2;

impl Shared {
    /// Writes `"name":fd`, `"*name":"fp:..."` or `"name":"0x..."`.
    fn encode(self, w: &mut JsonOut, name: &'static str, deref_fd: bool) {
        match self {
            Shared::Fd(fd) => {
                if deref_fd {
                    w.key_deref(name);
                } else {
                    w.key(name);
                }
                w.i64(i64::from(fd));
            }
            Shared::Fabric(bytes) => {
                w.key_deref(name);
                w.fingerprint_of(&bytes);
            }
            Shared::Address(at) => w.kv_hex(name, at),
        }
    }
    fn snap(self, fingerprint: Fingerprinter) -> (u64, u8) {
        match self {
            Shared::Fd(fd) => (fd as u32 as u64, SHARED_FD),
            Shared::Fabric(bytes) => (fingerprint(&bytes), SHARED_FABRIC),
            Shared::Address(at) => (at, SHARED_ADDRESS),
        }
    }
    fn encode_snap(word: u64, tag: u8, w: &mut JsonOut, name: &'static str, deref_fd: bool) {
        match tag {
            SHARED_FD => {
                if deref_fd {
                    w.key_deref(name);
                } else {
                    w.key(name);
                }
                w.i64(i64::from(word as u32 as c_int));
            }
            SHARED_FABRIC => {
                w.key_deref(name);
                w.fingerprint_value(word);
            }
            _ => w.kv_hex(name, word),
        }
    }
}

/// The `ArgValue` of a shareable handle argument, by what its `shared` says: `$out` for an export's
/// (its fd is what the pointer points to, `"*name":fd`, and is kept by a detached call), false
/// for an import's (the fd is the argument itself, `"name":fd`).
macro_rules! shareable_arg {
    ($name:ident, $out:expr) => {
        impl ArgValue for $name {
            fn c_type() -> String {
                "void *".into()
            }
            /// Without the call's handle type: the address.
            fn encode(&self, w: &mut JsonOut, _: Outcome) {
                w.hex(self.0 as usize as u64);
            }
            fn encode_linked(
                &self,
                w: &mut JsonOut,
                name: &'static str,
                outcome: Outcome,
                linked: Linked,
            ) {
                self.shared(outcome, linked).encode(w, name, $out);
            }
            const COMPACT: bool = true;
            fn snap_linked(
                &self,
                outcome: Outcome,
                fingerprint: Fingerprinter,
                linked: Linked,
            ) -> (u64, u8) {
                self.shared(outcome, linked).snap(fingerprint)
            }
            fn encode_snap(word: u64, tag: u8, w: &mut JsonOut, name: &'static str) {
                Shared::encode_snap(word, tag, w, name, $out);
            }
            fn detach_linked(&mut self, outcome: Outcome, keep: &mut Keep, linked: Linked) -> bool {
                match self.shared(outcome, linked) {
                    Shared::Fd(fd) if $out => keep.put(fd).map(|at| self.0 = at.cast()).is_some(),
                    Shared::Fabric(bytes) => keep.put(bytes).map(|at| self.0 = at.cast()).is_some(),
                    Shared::Fd(_) | Shared::Address(_) => true,
                }
            }
        }
    };
}

/// The `void *shareableHandle` an export (`cuMemExportToShareableHandle`,
/// `cuMemPoolExportToShareableHandle`) writes the shareable handle through: once the call
/// succeeded, `"*name":fd` for a POSIX file descriptor (an `int`), `"*name":"fp:..."` for a
/// FABRIC handle (`CUmemFabricHandle`, 64 bytes: its keyed fingerprint only); else the address.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareableHandleOut(pub *mut c_void);

impl ShareableHandleOut {
    /// The descriptor a POSIX-fd export wrote, once it succeeded (`None` for another handle type,
    /// a failure or a null pointer).
    pub fn written_fd(self, outcome: Outcome, handle_type: c_uint) -> Option<c_int> {
        match self.shared(outcome, Some(handle_type)) {
            Shared::Fd(fd) => Some(fd),
            _ => None,
        }
    }

    fn shared(self, outcome: Outcome, handle_type: Linked) -> Shared {
        let at = self.0 as usize as u64;
        if !outcome.succeeded() || self.0.is_null() {
            return Shared::Address(at);
        }
        match handle_type {
            Some(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) => {
                // SAFETY: the export succeeded, so the driver wrote an `int` there (the handle
                // type "defines type and size of the shareableHandle output parameter").
                Shared::Fd(unsafe { self.0.cast::<c_int>().read_unaligned() })
            }
            Some(CU_MEM_HANDLE_TYPE_FABRIC) => {
                capability_bytes(self.0, outcome).map_or(Shared::Address(at), Shared::Fabric)
            }
            _ => Shared::Address(at),
        }
    }
}

shareable_arg!(ShareableHandleOut, true);

/// The `void *osHandle` an import (`cuMemImportFromShareableHandle`,
/// `cuMemPoolImportFromShareableHandle`) reads: for a POSIX file descriptor, the descriptor's
/// number itself (`"name":fd`); for a FABRIC handle, a pointer to its 64 bytes (`"*name":"fp:..."`,
/// once the call succeeded, or answered NOT_PERMITTED where the shim can read them without
/// trusting the pointer: the IMEX check an export and its import are matched for); else the
/// address.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareableHandleIn(pub *mut c_void);

impl ShareableHandleIn {
    fn shared(self, outcome: Outcome, handle_type: Linked) -> Shared {
        let at = self.0 as usize as u64;
        match handle_type {
            // The descriptor's number cast to a pointer, as the document says.
            Some(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) => Shared::Fd(at as c_int),
            Some(CU_MEM_HANDLE_TYPE_FABRIC) if !self.0.is_null() => {
                if let Some(bytes) = capability_bytes(self.0, outcome) {
                    return Shared::Fabric(bytes);
                }
                let mut bytes = [0u8; CAPABILITY_SIZE];
                match (outcome, UNTRUSTED_READER.get()) {
                    (Outcome::Returned(NOT_PERMITTED), Some(read)) if read(self.0, &mut bytes) => {
                        Shared::Fabric(bytes)
                    }
                    _ => Shared::Address(at),
                }
            }
            _ => Shared::Address(at),
        }
    }
}

shareable_arg!(ShareableHandleIn, false);

/// `CUmemLocationType` values.
pub const CU_MEM_LOCATION_TYPE_DEVICE: c_uint = 1;
pub const CU_MEM_LOCATION_TYPE_HOST_NUMA: c_uint = 3;
/// `CU_MEM_HANDLE_TYPE_FABRIC`.
pub const CU_MEM_HANDLE_TYPE_FABRIC: c_uint = 8;

/// The first 16 bytes of `CUmemAllocationProp` (32 bytes): type, requested handle types and
/// location, the fields the checks read.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CUmemAllocationPropHead {
    pub type_: c_uint,
    pub requested_handle_types: c_uint,
    pub location_type: c_uint,
    pub location_id: c_int,
}

/// A [`CUmemAllocationPropHead`] as a JSON object, its fields named as in their structure.
fn encode_prop_head(
    w: &mut JsonOut,
    p: &CUmemAllocationPropHead,
    type_key: &'static str,
    types_key: &'static str,
) {
    w.begin_object();
    w.kv_u64(type_key, u64::from(p.type_));
    w.key(types_key);
    write_flag_names(
        w,
        u64::from(p.requested_handle_types),
        MemHandleTypes::NAMES,
    );
    w.key("location.type");
    match p.location_type {
        CU_MEM_LOCATION_TYPE_DEVICE => w.str("CU_MEM_LOCATION_TYPE_DEVICE"),
        CU_MEM_LOCATION_TYPE_HOST_NUMA => w.str("CU_MEM_LOCATION_TYPE_HOST_NUMA"),
        other => w.u64(u64::from(other)),
    }
    w.kv_i64("location.id", i64::from(p.location_id));
    w.end_object();
}

input_ptr!(
    /// `const CUmemAllocationProp *` of `cuMemCreate` (32 bytes; its first 16 are read).
    MemAllocationPropPtr(CUmemAllocationPropHead),
    "const CUmemAllocationProp *",
    |w, p| encode_prop_head(w, p, "type", "requestedHandleTypes")
);
input_ptr!(
    /// `const CUmemPoolProps *` of `cuMemPoolCreate` (88 bytes; its allocation type, handle types
    /// and location lead it as they lead `CUmemAllocationProp`).
    MemPoolPropsPtr(CUmemAllocationPropHead),
    "const CUmemPoolProps *",
    |w, p| encode_prop_head(w, p, "allocType", "handleTypes")
);

#[cfg(test)]
mod tests {
    use super::*;

    fn render<A: ArgValue>(a: A, outcome: Outcome) -> String {
        let mut buf = Vec::new();
        let mut w = JsonOut::with_fingerprint(&mut buf, |_| 0x1234);
        a.encode(&mut w, outcome);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn multicast_prop_layout_matches_cuda_h() {
        assert_eq!(std::mem::size_of::<CUmulticastObjectProp>(), 32);
        assert_eq!(std::mem::offset_of!(CUmulticastObjectProp, size), 8);
        assert_eq!(
            std::mem::offset_of!(CUmulticastObjectProp, handle_types),
            16
        );
        assert_eq!(std::mem::offset_of!(CUmulticastObjectProp, flags), 24);
    }

    #[test]
    fn prop_layout_matches_cuda_13_3() {
        assert_eq!(std::mem::size_of::<CUlogicalEndpointProp>(), 24);
        assert_eq!(std::mem::offset_of!(CUlogicalEndpointProp, type_), 0);
        assert_eq!(
            std::mem::offset_of!(CUlogicalEndpointProp, device_or_num_devices),
            4
        );
        assert_eq!(std::mem::offset_of!(CUlogicalEndpointProp, size), 8);
        assert_eq!(
            std::mem::offset_of!(CUlogicalEndpointProp, ipc_handle_types),
            16
        );
        assert_eq!(std::mem::offset_of!(CUlogicalEndpointProp, flags), 20);
        assert_eq!(std::mem::size_of::<CUipcMemHandle>(), 64);
    }

    #[test]
    fn flags_are_written_by_name_with_unknown_bits_in_hex() {
        let none = Outcome::NotCalled;
        assert_eq!(render(AttachFlags(4), none), "\"CU_MEM_ATTACH_SINGLE\"");
        assert_eq!(render(AttachFlags(9), none), "\"CU_MEM_ATTACH_GLOBAL|0x8\"");
        assert_eq!(render(AttachFlags(0), none), "\"0\"");
        assert_eq!(
            render(CUlogicalEndpointIpcHandleType(0), none),
            "\"CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_NONE\""
        );
    }

    #[test]
    fn a_flag_text_longer_than_the_stack_buffer_is_the_value_in_hex() {
        let long = "X".repeat(300);
        let names = [(1u64, long.as_str()), (2, long.as_str())];
        let mut buf = Vec::new();
        let mut w = JsonOut::new(&mut buf);
        write_flag_names(&mut w, 3, &names);
        assert_eq!(String::from_utf8(buf).unwrap(), "\"0x3\"");
        let mut buf = Vec::new();
        let mut w = JsonOut::new(&mut buf);
        write_flag_names(&mut w, 5, &names[..1]);
        assert_eq!(String::from_utf8(buf).unwrap(), format!("\"{long}|0x4\""));
    }

    #[test]
    fn special_streams_are_named() {
        let none = Outcome::NotCalled;
        assert_eq!(
            render(CUstream(std::ptr::dangling_mut::<c_void>()), none),
            "\"CU_STREAM_LEGACY\""
        );
        assert_eq!(
            render(CUstream(2 as *mut c_void), none),
            "\"CU_STREAM_PER_THREAD\""
        );
        assert_eq!(render(CUstream(0x5000 as *mut c_void), none), "\"0x5000\"");
    }

    fn render_named<A: ArgValue>(a: A, outcome: Outcome) -> String {
        let mut buf = Vec::new();
        let mut w = JsonOut::with_fingerprint(&mut buf, |_| 0x1234);
        w.begin_object();
        a.encode_named(&mut w, "p", outcome);
        w.end_object();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn out_values_are_read_only_after_success() {
        let mut v = Int(7);
        let out = Out(&mut v as *mut Int);
        let at = format!("0x{:x}", out.addr());
        assert_eq!(render_named(out, Outcome::Returned(0)), "{\"*p\":7}");
        assert_eq!(
            render_named(out, Outcome::Returned(1)),
            format!("{{\"p\":\"{at}\"}}")
        );
        assert_eq!(
            render_named(out, Outcome::NotCalled),
            format!("{{\"p\":\"{at}\"}}")
        );
        // A NULL out-pointer is never read, even on success.
        let null: Out<Int> = Out(std::ptr::null_mut());
        assert_eq!(render_named(null, Outcome::Returned(0)), "{\"p\":null}");
    }

    /// A detached out-parameter points at an aligned copy in the room, and only after success
    /// (a failed call's pointer is kept as it was, never read); a copy that does not fit is
    /// refused.
    #[test]
    fn detached_arguments_point_at_their_copies() {
        let mut room = [0u8; 64];
        let mut keep = Keep::new(&mut room[1..]);
        let mut v = Int(7);
        let mut out = Out(&mut v as *mut Int);
        assert!(out.detach(Outcome::Returned(1), &mut keep));
        assert_eq!(out.0, &mut v as *mut Int, "a failed call's pointer stays");
        assert!(out.detach(Outcome::Returned(0), &mut keep));
        assert_ne!(out.0, &mut v as *mut Int);
        assert_eq!(out.0 as usize % std::mem::align_of::<Int>(), 0);
        v = Int(8);
        assert_eq!(render_named(out, Outcome::Returned(0)), "{\"*p\":7}");
        let mut handle = LogicalEndpointHandlePtr([0x41u8; 64].as_mut_ptr().cast());
        assert!(
            !handle.detach(Outcome::Returned(0), &mut keep),
            "64 bytes do not fit in what is left"
        );
        assert_eq!(v.0, 8);
    }

    #[test]
    fn ipc_handles_are_fingerprinted() {
        let h = CUipcMemHandle {
            reserved: [0x41; 64],
        };
        let s = render(h, Outcome::NotCalled);
        assert_eq!(s, "\"fp:0000000000001234\"");
        assert!(!s.contains("41"));
    }

    #[test]
    fn prop_is_decoded_only_when_the_driver_accepted_it() {
        let p = CUlogicalEndpointProp {
            type_: CU_LOGICAL_ENDPOINT_TYPE_UNICAST,
            device_or_num_devices: 1,
            size: 1 << 21,
            ipc_handle_types: 1,
            flags: 0,
        };
        let ptr = LogicalEndpointPropPtr(&p);
        let s = render(ptr, Outcome::Returned(0));
        assert!(s.contains("\"unicast.device\":1"), "{s}");
        assert!(
            s.contains("CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC"),
            "{s}"
        );
        // Not called, or failed (the driver may not have looked at it): only the address.
        assert!(render(ptr, Outcome::NotCalled).starts_with("\"0x"));
        assert!(render(ptr, Outcome::Returned(3)).starts_with("\"0x"));
    }
}

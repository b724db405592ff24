//! Names and descriptions of result codes, as NUL-terminated strings that live forever
//! (`cuGetErrorName`, `cuGetErrorString`, `hipGetErrorName`, `hipGetErrorString`).

use sharecheck_core::names::{cuda_result_name, hip_result_name};
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::sync::LazyLock;

/// Descriptions of the codes the simulator returns; other codes get one made from their name.
const DESCRIPTIONS: &[(i32, &str)] = &[
    (0, "no error"),
    (1, "invalid argument"),
    (2, "out of memory"),
    (3, "initialization error"),
    (9, "invalid configuration argument"),
    (17, "invalid device pointer"),
    (100, "no CUDA-capable device is detected"),
    (101, "invalid device ordinal"),
    (201, "invalid device context"),
    (205, "mapping of buffer object failed"),
    (208, "resource already mapped"),
    (
        217,
        "peer access is not supported between these two devices",
    ),
    (400, "invalid resource handle"),
    (500, "named symbol not found"),
    (600, "device not ready"),
    (704, "peer access is already enabled"),
    (705, "peer access has not been enabled"),
    (711, "peer mapping resources exhausted"),
    (709, "context is destroyed"),
    (800, "operation not permitted"),
    (801, "operation not supported"),
    (999, "unknown error"),
];

/// `hipError_t` values whose enumerator the header wraps onto two lines, which
/// `sharecheck_core::names` (generated line by line) does not list.
fn hip_wrapped_name(code: i32) -> Option<&'static str> {
    Some(match code {
        704 => "hipErrorPeerAccessAlreadyEnabled",
        705 => "hipErrorPeerAccessNotEnabled",
        712 => "hipErrorHostMemoryAlreadyRegistered",
        713 => "hipErrorHostMemoryNotRegistered",
        719 => "hipErrorLaunchFailure",
        720 => "hipErrorCooperativeLaunchTooLarge",
        _ => return None,
    })
}

fn hip_known_name(code: i32) -> Option<&'static str> {
    hip_result_name(code).or_else(|| hip_wrapped_name(code))
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Table {
    CudaName,
    CudaString,
    HipName,
    HipString,
}

static STRINGS: LazyLock<parking_lot::Mutex<HashMap<(Table, i32), &'static CString>>> =
    LazyLock::new(Default::default);

fn interned(
    table: Table,
    code: i32,
    make: impl FnOnce() -> Option<String>,
) -> Option<*const c_char> {
    let mut strings = STRINGS.lock();
    if let Some(s) = strings.get(&(table, code)) {
        return Some(s.as_ptr());
    }
    let text = make()?;
    let leaked: &'static CString = Box::leak(Box::new(CString::new(text).ok()?));
    strings.insert((table, code), leaked);
    Some(leaked.as_ptr())
}

fn description(code: i32, name: &str) -> String {
    DESCRIPTIONS
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, d)| d.to_string())
        .unwrap_or_else(|| {
            let words = name
                .trim_start_matches("CUDA_ERROR_")
                .trim_start_matches("hipError")
                .replace('_', " ");
            words.to_ascii_lowercase()
        })
}

/// `cuGetErrorName`: `None` for a code `cuda.h` does not define.
pub fn cuda_name(code: i32) -> Option<*const c_char> {
    interned(Table::CudaName, code, || {
        cuda_result_name(code).map(str::to_owned)
    })
}

/// `cuGetErrorString`.
pub fn cuda_string(code: i32) -> Option<*const c_char> {
    interned(Table::CudaString, code, || {
        cuda_result_name(code).map(|n| description(code, n))
    })
}

/// `hipGetErrorName`: unknown codes are named `hipErrorUnknown`, as the HIP runtime does.
pub fn hip_name(code: i32) -> *const c_char {
    let name = hip_known_name(code).unwrap_or("hipErrorUnknown");
    interned(Table::HipName, code, || Some(name.to_owned())).unwrap_or(c"hipErrorUnknown".as_ptr())
}

/// `hipGetErrorString`.
pub fn hip_string(code: i32) -> *const c_char {
    let text = match hip_known_name(code) {
        Some(name) => description(code, name),
        None => "unknown error".to_owned(),
    };
    interned(Table::HipString, code, || Some(text)).unwrap_or(c"unknown error".as_ptr())
}

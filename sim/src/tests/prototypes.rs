//! The simulator's exports against the headers: CUDA's against CUDA 13.5 `cuda.h`, HIP's against
//! `hip_runtime_api.h`. Every export of an `exports!` block (its table: name and parameter types)
//! is declared by the header, with the same number of parameters and parameters of the same ABI
//! (the same type; or integers, and enums, of the same size and signedness; or pointers to such,
//! with the same constness, `void *` standing for any pointer), checked by the C++ compiler. A
//! negative self-test shows a wrong prototype failing by name.
//!
//! Headers: `SHARECHECK_CUDA_INCLUDE` (default `.deps/cuda/nvidia/cu13/include` of the
//! workspace, from `scripts/fetch-deps.sh`), `SHARECHECK_HIP_INCLUDE` (default `/usr/include`,
//! Debian's `libamdhip64-dev`); compiler: `SHARECHECK_CXX` (default `g++`). HIP's C++ overloads
//! are left out (`__HIP_DISABLE_CPP_FUNCTIONS__`); the overloaded names the simulator exports
//! whatever that macro says (`hipMallocAsync`, with a pool in C++, and `hipMallocFromPoolAsync`)
//! are taken at their C prototypes.

use crate::cuda_exports::CUDA_EXPORTS;
use crate::hip_exports::HIP_EXPORTS;
use crate::procaddress::lookups::{CUDA_LOOKUPS, HIP_LOOKUPS};
use std::path::PathBuf;
use std::process::Command;

fn cuda_include() -> PathBuf {
    std::env::var_os("SHARECHECK_CUDA_INCLUDE").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.deps/cuda/nvidia/cu13/include"),
        PathBuf::from,
    )
}

/// A Rust parameter type of the simulator, as `stringify!` writes it, in C (`uuid`: the API's
/// name of the 16-byte UUID struct).
fn c_type(rust: &str, uuid: &str) -> String {
    let rust = rust.trim();
    for (prefix, cv) in [("*mut", ""), ("*const", "const ")] {
        if let Some(rest) = rust.strip_prefix(prefix) {
            return format!("{cv}{} *", c_type(rest, uuid));
        }
    }
    match rust {
        "c_int" | "i32" => "int",
        "c_uint" | "u32" => "unsigned int",
        "c_char" => "char",
        "c_uchar" | "u8" => "unsigned char",
        "c_void" => "void",
        "c_ulonglong" => "unsigned long long",
        "c_longlong" | "i64" => "long long",
        "u64" => "unsigned long long",
        "usize" => "size_t",
        "isize" => "ptrdiff_t",
        "f32" => "float",
        // `CUuuid`, `hipUUID`: 16 bytes (`struct { char bytes[16]; }`), which the simulator
        // writes as such.
        "[u8; 16]" => uuid,
        other => other, // the simulator's types carry cuda.h's names
    }
    .to_string()
}

/// The C++ that compares prototypes, after the header's include.
const PRELUDE: &str = r#"
#include <cstddef>
#include <type_traits>
template <class T, bool = std::is_enum<T>::value> struct plain { using type = T; };
template <class T> struct plain<T, true> { using type = typename std::underlying_type<T>::type; };
template <class X, class Y, bool enums> struct same_integer
    : std::bool_constant<sizeof(X) == sizeof(Y) &&
                         (enums || std::is_signed<X>::value == std::is_signed<Y>::value)> {};
template <class A, class B> struct abi_eq {
    using X = typename plain<A>::type;
    using Y = typename plain<B>::type;
    static constexpr bool value =
        std::disjunction<std::is_same<X, Y>,
                         std::conjunction<std::is_integral<X>, std::is_integral<Y>,
                                          same_integer<X, Y, std::is_enum<A>::value ||
                                                                 std::is_enum<B>::value>>>::value;
};
template <class A> struct abi_eq<A, A> { static constexpr bool value = true; };
template <class A> struct abi_eq<A *, A *> { static constexpr bool value = true; };
template <class A, class B> struct abi_eq<A *, B *> {
    static constexpr bool value =
        std::is_const<A>::value == std::is_const<B>::value &&
        (std::is_void<A>::value || std::is_void<B>::value ||
         abi_eq<typename std::remove_cv<A>::type, typename std::remove_cv<B>::type>::value);
};
template <class R1, class... A1, class R2, class... A2>
constexpr bool same_abi(R1 (*)(A1...), R2 (*)(A2...)) {
    if constexpr (sizeof...(A1) != sizeof...(A2)) {
        return false;
    } else {
        return abi_eq<R1, R2>::value && (true && ... && abi_eq<A1, A2>::value);
    }
}
"#;

/// One API's header and how the check names it.
struct Api {
    /// What goes before [`PRELUDE`]: the header's include.
    include: &'static str,
    header: &'static str,
    uuid: &'static str,
}

const CUDA: Api = Api {
    include: "#include <cuda.h>\n",
    header: "cuda.h",
    uuid: "CUuuid",
};

const HIP: Api = Api {
    include: "#define __HIP_PLATFORM_AMD__\n#define __HIP_DISABLE_CPP_FUNCTIONS__\n\
              #include <hip/hip_runtime_api.h>\n",
    header: "hip_runtime_api.h",
    uuid: "hipUUID",
};

/// HIP names C++ overloads whatever `__HIP_DISABLE_CPP_FUNCTIONS__` says: the simulator's
/// parameter types, exactly, pick the C prototype (a cast that fails if no overload has them).
const HIP_OVERLOADED: &[&str] = &["hipMallocAsync", "hipMallocFromPoolAsync"];

/// C++ asserting that each `(name, parameters)` has the header's prototype (returning `int`).
fn source(api: &Api, exports: &[(&str, Vec<String>)]) -> String {
    let mut s = format!("{}{PRELUDE}", api.include);
    let header = api.header;
    for (name, params) in exports {
        let params = if params.is_empty() {
            "void".to_string()
        } else {
            params.join(", ")
        };
        let function = if HIP_OVERLOADED.contains(name) {
            format!("static_cast<hipError_t (*)({params})>(&::{name})")
        } else {
            format!("&::{name}")
        };
        s.push_str(&format!(
            "static_assert(same_abi({function}, (int (*)({params}))nullptr), \
             \"{name}: the simulator's prototype differs from {header}\");\n"
        ));
    }
    s
}

/// Compiles `source` (C++17, cuda.h with its legacy declarations); the compiler's output on
/// failure.
fn compile(name: &str, source: &str) -> Result<(), String> {
    let include = cuda_include();
    assert!(
        include.join("cuda.h").exists(),
        "{} has no cuda.h: run scripts/fetch-deps.sh (or set SHARECHECK_CUDA_INCLUDE)",
        include.display()
    );
    let hip = std::env::var_os("SHARECHECK_HIP_INCLUDE").map(PathBuf::from);
    let dir = std::env::temp_dir().join(format!("sharecheck-sim-proto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.cpp"));
    std::fs::write(&file, source).unwrap();
    let cxx = std::env::var("SHARECHECK_CXX").unwrap_or_else(|_| "g++".into());
    let out = Command::new(&cxx)
        .args([
            "-std=c++17",
            "-fsyntax-only",
            "-D__CUDA_API_VERSION_INTERNAL",
            "-isystem",
        ])
        .arg(&include)
        .args(
            hip.iter()
                .flat_map(|h| [std::ffi::OsStr::new("-isystem"), h.as_os_str()]),
        )
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{cxx}: {e} (set SHARECHECK_CXX)"));
    let _ = std::fs::remove_file(&file);
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn cuda_exports() -> Vec<(&'static str, Vec<String>)> {
    CUDA_EXPORTS
        .iter()
        .chain(CUDA_LOOKUPS)
        .map(|(name, params)| (*name, params.iter().map(|p| c_type(p, CUDA.uuid)).collect()))
        .collect()
}

/// What the simulator exports from ROCm releases newer than the HIP 5.2 headers, which do not
/// declare it.
const NEWER_THAN_HIP_HEADERS: &[&str] = &["hipGetProcAddress"];

fn hip_exports() -> Vec<(&'static str, Vec<String>)> {
    HIP_EXPORTS
        .iter()
        .chain(HIP_LOOKUPS)
        .filter(|(name, _)| !NEWER_THAN_HIP_HEADERS.contains(name))
        .map(|(name, params)| (*name, params.iter().map(|p| c_type(p, HIP.uuid)).collect()))
        .collect()
}

#[test]
fn every_hip_export_has_the_prototype_of_hip_runtime_api_h() {
    let exports = hip_exports();
    assert!(exports.len() > 30, "{} exports", exports.len());
    if let Err(e) = compile("hip", &source(&HIP, &exports)) {
        let failed: Vec<&str> = e
            .lines()
            .filter(|l| l.contains("differs from hip_runtime_api.h") || l.contains("error:"))
            .collect();
        panic!("{}\n--- compiler output ---\n{e}", failed.join("\n"));
    }
}

/// The HIP check can fail too: a parameter of the wrong size, named by the compiler.
#[test]
fn a_wrong_hip_prototype_fails_by_name() {
    let mut exports = hip_exports();
    let i = exports
        .iter()
        .position(|(n, _)| *n == "hipDeviceCanAccessPeer")
        .unwrap();
    exports[i].1[1] = "long long".into();
    let err = compile("hip_wrong_size", &source(&HIP, &exports)).unwrap_err();
    assert!(
        err.contains(
            "hipDeviceCanAccessPeer: the simulator's prototype differs from \
                      hip_runtime_api.h"
        ),
        "{err}"
    );
}

#[test]
fn every_cuda_export_has_the_prototype_of_cuda_h() {
    let exports = cuda_exports();
    assert!(exports.len() > 100, "{} exports", exports.len());
    if let Err(e) = compile("cuda", &source(&CUDA, &exports)) {
        let failed: Vec<&str> = e
            .lines()
            .filter(|l| l.contains("differs from cuda.h") || l.contains("error:"))
            .collect();
        panic!("{}\n--- compiler output ---\n{e}", failed.join("\n"));
    }
}

/// The check can fail: one parameter of the wrong size, one missing, and a name the header does
/// not declare, each named by the compiler.
#[test]
fn a_wrong_prototype_fails_by_name() {
    let mut exports = cuda_exports();
    let at = |exports: &mut Vec<(&str, Vec<String>)>, name: &str| {
        exports.iter().position(|(n, _)| *n == name).unwrap()
    };
    let i = at(&mut exports, "cuDeviceCanAccessPeer");
    exports[i].1[1] = "long long".into();
    let err = compile("wrong_size", &source(&CUDA, &exports)).unwrap_err();
    assert!(
        err.contains("cuDeviceCanAccessPeer: the simulator's prototype differs"),
        "{err}"
    );
    let mut exports = cuda_exports();
    let i = at(&mut exports, "cuIpcGetMemHandle");
    exports[i].1.pop();
    let err = compile("missing", &source(&CUDA, &exports)).unwrap_err();
    assert!(
        err.contains("cuIpcGetMemHandle: the simulator's prototype differs"),
        "{err}"
    );
}

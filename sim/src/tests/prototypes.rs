//! The simulator's CUDA exports against CUDA 13.5 `cuda.h`: every export of an `exports!` block
//! (its table: name and parameter types) is declared by the header, with the same number of
//! parameters and parameters of the same ABI (the same type; or integers, and enums, of the same
//! size and signedness; or pointers to such, with the same constness, `void *` standing for any
//! pointer), checked by the C++ compiler. A negative self-test shows a wrong prototype failing by
//! name.
//!
//! Headers: `SHARECHECK_CUDA_INCLUDE` (default `.deps/cuda/nvidia/cu13/include` of the
//! workspace, from `scripts/fetch-deps.sh`); compiler: `SHARECHECK_CXX` (default `g++`).
//! HIP's exports are not checked here yet: `hip_runtime_api.h` overloads some of them in C++.

use crate::cuda_exports::CUDA_EXPORTS;
use crate::procaddress::lookups::CUDA_LOOKUPS;
use std::path::PathBuf;
use std::process::Command;

fn cuda_include() -> PathBuf {
    std::env::var_os("SHARECHECK_CUDA_INCLUDE").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.deps/cuda/nvidia/cu13/include"),
        PathBuf::from,
    )
}

/// A Rust parameter type of the simulator, as `stringify!` writes it, in C.
fn c_type(rust: &str) -> String {
    let rust = rust.trim();
    for (prefix, cv) in [("*mut", ""), ("*const", "const ")] {
        if let Some(rest) = rust.strip_prefix(prefix) {
            return format!("{cv}{} *", c_type(rest));
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
        // `CUuuid`: 16 bytes (`struct { char bytes[16]; }`), which the simulator writes as such.
        "[u8; 16]" => "CUuuid",
        other => other, // the simulator's types carry cuda.h's names
    }
    .to_string()
}

const PRELUDE: &str = r#"
#include <cuda.h>
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

/// C++ asserting that each `(name, parameters)` has the header's prototype (returning `int`).
fn source(exports: &[(&str, Vec<String>)]) -> String {
    let mut s = PRELUDE.to_string();
    for (name, params) in exports {
        let params = if params.is_empty() {
            "void".to_string()
        } else {
            params.join(", ")
        };
        s.push_str(&format!(
            "static_assert(same_abi(&::{name}, (int (*)({params}))nullptr), \
             \"{name}: the simulator's prototype differs from cuda.h\");\n"
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
        .map(|(name, params)| (*name, params.iter().map(|p| c_type(p)).collect()))
        .collect()
}

#[test]
fn every_cuda_export_has_the_prototype_of_cuda_h() {
    let exports = cuda_exports();
    assert!(exports.len() > 100, "{} exports", exports.len());
    if let Err(e) = compile("cuda", &source(&exports)) {
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
    let err = compile("wrong_size", &source(&exports)).unwrap_err();
    assert!(
        err.contains("cuDeviceCanAccessPeer: the simulator's prototype differs"),
        "{err}"
    );
    let mut exports = cuda_exports();
    let i = at(&mut exports, "cuIpcGetMemHandle");
    exports[i].1.pop();
    let err = compile("missing", &source(&exports)).unwrap_err();
    assert!(
        err.contains("cuIpcGetMemHandle: the simulator's prototype differs"),
        "{err}"
    );
}

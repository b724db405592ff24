//! ABI check of the declaration list against the real vendor headers.
//!
//! For every entry of [`sharecheck_core::FUNCTIONS`] this generates C that includes CUDA's
//! `cuda.h` + `cudaTypedefs.h` (CUDA 13.5, from `scripts/fetch-deps.sh`) or HIP's
//! `hip/hip_runtime_api.h` (Debian's HIP 5.2) and statically asserts that our prototype, spelled
//! from each parameter's `c_type()`, is exactly the header's:
//!
//! - CUDA: `__builtin_types_compatible_p(PFN_<base>_v<since>[_ptds|_ptsz], CUresult (CUDAAPI *)(...))`,
//!   once as applications compile (`cuda.h` plain) for every typedef visible there, and once with
//!   `-D__CUDA_API_VERSION_INTERNAL` for all of them, which also declares the legacy typedefs
//!   (`PFN_cuIpcOpenMemHandle_v4010`) and every exported symbol under its own name, so there the
//!   declared type of the symbol itself (`cuMemcpyPeer_ptds`, `cuIpcOpenMemHandle_v2`, ...) is
//!   checked against its typedef too;
//! - HIP: `__builtin_types_compatible_p(__typeof__(&hipX), hipError_t (*)(...))`;
//! - every parameter's Rust type has the size and alignment of its C type, the by-value structs
//!   and `CUlogicalEndpointProp` have the header's layout, and the shim's `cuGetProcAddress`
//!   wrappers have the prototypes of `PFN_cuGetProcAddress_v11030` / `_v12000`.
//!
//! C's type compatibility treats an enum as its underlying integer type, so every prototype is
//! checked a second time as C++17 with `std::is_same`, where only the identical type passes.
//! A negative self-test proves that a wrong prototype does fail, naming its function.
//!
//! Headers: `SHARECHECK_CUDA_INCLUDE` (default `.deps/cuda/nvidia/cu13/include`) and
//! `SHARECHECK_HIP_INCLUDE` (default: the system's `/usr/include`); compilers: `SHARECHECK_CC`
//! (default `cc`) and `SHARECHECK_CXX` (default `c++`). Missing headers fail the test: run
//! `scripts/fetch-deps.sh`.

use sharecheck_core::schema::env;
use sharecheck_core::{Api, FnInfo, FUNCTIONS};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const FETCH_HINT: &str = "run scripts/fetch-deps.sh (it installs libamdhip64-dev, gcc, g++ and the CUDA 13.5 headers into .deps/cuda)";

// ---- Rust-side layouts of every parameter, from the same declaration list -----------------------

/// For each declared function: its symbol and, per parameter, (name, size, align) of the Rust type.
type RustLayouts = Vec<(&'static str, Vec<(&'static str, usize, usize)>)>;

macro_rules! rust_layouts {
    ($( $api:ident $sym:ident [$base:ident $since:literal $variant:ident $($role:ident)?] ( $( $arg:ident : $ty:ty ),* $(,)? ); )*) => {
        pub fn get() -> super::RustLayouts {
            vec![ $( (stringify!($sym), vec![ $( (
                stringify!($arg),
                std::mem::size_of::<$ty>(),
                std::mem::align_of::<$ty>(),
            ), )* ]), )* ]
        }
    };
}

mod rust_layouts {
    #[allow(unused_imports)]
    use sharecheck_core::ffi::*;
    sharecheck_core::interposed_functions!(rust_layouts);
}

// ---- Languages --------------------------------------------------------------------------------

/// The language a unit is compiled as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lang {
    /// `cc -std=c11`: `__builtin_types_compatible_p` (C compatibility: an enum matches its
    /// underlying integer type, a typedef its target).
    C,
    /// `c++ -x c++ -std=c++17`: `std::is_same` (identical types only; typedefs still alias).
    Cxx,
}

impl Lang {
    fn ext(self) -> &'static str {
        match self {
            Lang::C => "c",
            Lang::Cxx => "cc",
        }
    }
    fn compiler(self) -> String {
        match self {
            Lang::C => std::env::var(env::dev::CC).unwrap_or_else(|_| "cc".into()),
            Lang::Cxx => std::env::var(env::dev::CXX).unwrap_or_else(|_| "c++".into()),
        }
    }
    fn std_flags(self) -> &'static [&'static str] {
        match self {
            Lang::C => &["-std=c11"],
            Lang::Cxx => &["-x", "c++", "-std=c++17"],
        }
    }
    /// A static assertion that types `a` and `b` are the same.
    fn same_type(self, a: &str, b: &str, message: &str) -> String {
        match self {
            Lang::C => {
                format!("_Static_assert(__builtin_types_compatible_p({a}, {b}), \"{message}\");")
            }
            Lang::Cxx => format!("static_assert(std::is_same<{a}, {b}>::value, \"{message}\");"),
        }
    }
    /// The type of `&symbol`.
    fn type_of_address(self, symbol: &str) -> String {
        match self {
            Lang::C => format!("__typeof__(&{symbol})"),
            Lang::Cxx => format!("decltype(&{symbol})"),
        }
    }
}

// ---- Generated C, with each line owned by the function (or check) it is about ------------------

/// A generated translation unit. Every line knows which check it belongs to, so a compiler
/// diagnostic can be traced back to the function whose prototype is wrong.
struct CSource {
    name: String,
    lang: Lang,
    lines: Vec<(String, Option<String>)>,
}

impl CSource {
    fn new(name: &str, lang: Lang) -> Self {
        CSource {
            name: name.into(),
            lang,
            lines: Vec::new(),
        }
    }
    fn line(&mut self, text: impl Into<String>) {
        self.owned(None, text);
    }
    fn owned(&mut self, owner: Option<&str>, text: impl Into<String>) {
        for l in text.into().split('\n') {
            self.lines.push((l.to_string(), owner.map(str::to_string)));
        }
    }
    fn text(&self) -> String {
        self.lines.iter().map(|(l, _)| format!("{l}\n")).collect()
    }
    /// Owner of 1-based line `n`.
    fn owner_of(&self, n: usize) -> Option<&str> {
        self.lines
            .get(n.checked_sub(1)?)
            .and_then(|(_, o)| o.as_deref())
    }
}

/// How a unit failed to compile.
#[derive(Debug)]
struct CompileFailure {
    /// The checks (function symbols, or labels such as `sizeof(CUipcMemHandle)`) the diagnostics
    /// point at; `<headers>` when a header itself failed, `<unattributed>` when none could be.
    owners: BTreeSet<String>,
    report: String,
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("abi");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run_compiler(lang: Lang, cmd: &mut Command) -> std::process::Output {
    cmd.output().unwrap_or_else(|e| {
        panic!(
            "cannot run the {lang:?} compiler `{}`: {e}; {FETCH_HINT}",
            lang.compiler()
        )
    })
}

/// Compiles `src` with `-Wall -Wextra -Werror -fsyntax-only` plus `flags`.
fn compile(src: &CSource, flags: &[String]) -> Result<(), CompileFailure> {
    let path = out_dir().join(format!("{}.{}", src.name, src.lang.ext()));
    std::fs::write(&path, src.text()).unwrap();
    let mut cmd = Command::new(src.lang.compiler());
    cmd.args(src.lang.std_flags())
        .args([
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-fdiagnostics-color=never",
        ])
        .args(flags)
        .arg(&path);
    let out = run_compiler(src.lang, &mut cmd);
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let prefix = format!("{}:", path.display());
    let mut owners = BTreeSet::new();
    for diag in stderr.lines() {
        if !(diag.contains(": error:") || diag.contains(": warning:")) {
            continue;
        }
        let owner = diag
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split(':').next())
            .and_then(|n| n.parse::<usize>().ok())
            .map(|n| {
                src.owner_of(n)
                    .unwrap_or("<generated preamble>")
                    .to_string()
            })
            .unwrap_or_else(|| "<headers>".to_string());
        owners.insert(owner);
    }
    if owners.is_empty() {
        owners.insert("<unattributed>".into());
    }
    let report = format!(
        "ABI check `{}` failed for: {}\ncommand: {:?}\nsource: {}\n--- compiler output ---\n{}",
        src.name,
        owners.iter().cloned().collect::<Vec<_>>().join(", "),
        cmd,
        path.display(),
        stderr
    );
    Err(CompileFailure { owners, report })
}

fn assert_compiles(src: &CSource, flags: &[String]) {
    if let Err(f) = compile(src, flags) {
        panic!("{}", f.report);
    }
}

// ---- Header locations -------------------------------------------------------------------------

fn cuda_include() -> PathBuf {
    let dir = match std::env::var_os(env::dev::CUDA_INCLUDE) {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/cuda/nvidia/cu13/include"),
    };
    for h in ["cuda.h", "cudaTypedefs.h"] {
        assert!(
            dir.join(h).is_file(),
            "CUDA header {} not found: {FETCH_HINT} (or point {} at a CUDA 13.3+ include directory)",
            dir.join(h).display(),
            env::dev::CUDA_INCLUDE
        );
    }
    dir
}

/// `internal`: with `-D__CUDA_API_VERSION_INTERNAL`.
fn cuda_flags(internal: bool) -> Vec<String> {
    let mut flags = vec!["-isystem".to_string(), cuda_include().display().to_string()];
    if internal {
        flags.push("-D__CUDA_API_VERSION_INTERNAL".into());
    }
    flags
}

fn hip_flags() -> Vec<String> {
    let dir = std::env::var_os(env::dev::HIP_INCLUDE).map(PathBuf::from);
    let header = dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("/usr/include"))
        .join("hip/hip_runtime_api.h");
    assert!(
        header.is_file(),
        "HIP header {} not found: {FETCH_HINT} (or point {} at a HIP include directory)",
        header.display(),
        env::dev::HIP_INCLUDE
    );
    match dir {
        Some(d) => vec!["-isystem".into(), d.display().to_string()],
        None => Vec::new(),
    }
}

// ---- Generators -------------------------------------------------------------------------------

fn c_types(f: &FnInfo) -> Vec<String> {
    f.params.iter().map(|p| (p.c_type)()).collect()
}

fn param_list(types: &[String]) -> String {
    if types.is_empty() {
        "void".into()
    } else {
        types.join(", ")
    }
}

fn cuda_fns() -> impl Iterator<Item = &'static FnInfo> {
    FUNCTIONS.iter().filter(|f| f.api == Api::Cuda)
}

fn hip_fns() -> impl Iterator<Item = &'static FnInfo> {
    FUNCTIONS.iter().filter(|f| f.api == Api::Hip)
}

fn pfn(f: &FnInfo) -> String {
    f.pfn_typedef()
        .expect("a CUDA function has a cudaTypedefs.h typedef")
}

/// Asserts that `PFN_x` is the function pointer type with these parameter types.
fn cuda_prototype_assert(lang: Lang, symbol: &str, pfn: &str, types: &[String]) -> String {
    let ours = format!("CUresult (CUDAAPI *)({})", param_list(types));
    lang.same_type(
        pfn,
        &ours,
        &format!("{symbol}: prototype differs from {pfn}"),
    )
}

/// Asserts that the symbol `cuda.h` declares under this name has the type `PFN_x`.
fn cuda_declaration_assert(lang: Lang, symbol: &str, pfn: &str) -> String {
    lang.same_type(
        &lang.type_of_address(symbol),
        pfn,
        &format!("{symbol}: cuda.h declares this symbol with another prototype than {pfn}"),
    )
}

fn hip_prototype_assert(lang: Lang, symbol: &str, types: &[String]) -> String {
    let ours = format!("hipError_t (*)({})", param_list(types));
    match lang {
        // C++ adds template overloads of some names (`hipMalloc(T **, size_t)`): there, the check
        // is that an overload of exactly this type exists (the cast selects it, or fails).
        Lang::Cxx => format!(
            "static_assert(std::is_same<decltype(static_cast<{ours}>(&{symbol})), {ours}>::value, \
             \"{symbol}: prototype differs from hip_runtime_api.h\");"
        ),
        Lang::C => lang.same_type(
            &lang.type_of_address(symbol),
            &ours,
            &format!("{symbol}: prototype differs from hip_runtime_api.h"),
        ),
    }
}

/// (C only) `sizeof`/`_Alignof` of each parameter's C type equal those of its Rust type.
fn param_layout_asserts(src: &mut CSource, f: &FnInfo, layouts: &RustLayouts) {
    assert_eq!(src.lang, Lang::C);
    let (sym, params) = layouts
        .iter()
        .find(|(s, _)| *s == f.symbol)
        .unwrap_or_else(|| panic!("{}: no Rust layout from interposed_functions!", f.symbol));
    assert_eq!(
        params.len(),
        f.params.len(),
        "{}: parameter count",
        f.symbol
    );
    for (p, (name, size, align)) in f.params.iter().zip(params) {
        assert_eq!(p.name, *name, "{}: parameter order", f.symbol);
        let t = (p.c_type)();
        src.owned(
            Some(f.symbol),
            format!(
                "_Static_assert(sizeof({t}) == {size} && _Alignof({t}) == {align}, \"{sym}: parameter {name}: C type {t} differs in size or alignment from its Rust type ({size}, align {align})\");"
            ),
        );
    }
}

fn cuda_preamble(name: &str, lang: Lang) -> CSource {
    let mut src = CSource::new(name, lang);
    src.line("/* Generated by tests/abi.rs: sharecheck's prototypes against CUDA's headers. */");
    src.line(if lang == Lang::C {
        "#include <stddef.h>"
    } else {
        "#include <type_traits>"
    });
    src.line("#include <cuda.h>");
    src.line("#include <cudaTypedefs.h>");
    src
}

fn hip_preamble(name: &str, lang: Lang) -> CSource {
    let mut src = CSource::new(name, lang);
    src.line("/* Generated by tests/abi.rs: sharecheck's prototypes against HIP's headers. */");
    src.line("#define __HIP_PLATFORM_AMD__");
    if lang == Lang::Cxx {
        src.line("#include <type_traits>");
    }
    src.line("#include <hip/hip_runtime_api.h>");
    src
}

/// The text of `cuda.h` + `cudaTypedefs.h` as applications compile them, preprocessed.
fn cuda_headers_preprocessed() -> String {
    let probe = out_dir().join("cuda_visible_probe.c");
    std::fs::write(&probe, "#include <cuda.h>\n#include <cudaTypedefs.h>\n").unwrap();
    let mut cmd = Command::new(Lang::C.compiler());
    cmd.args(["-std=c11", "-E", "-P"])
        .args(cuda_flags(false))
        .arg(&probe);
    let out = run_compiler(Lang::C, &mut cmd);
    assert!(
        out.status.success(),
        "preprocessing cuda.h + cudaTypedefs.h failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn contains_token(text: &str, token: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(token).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + token.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

// ---- Tests ------------------------------------------------------------------------------------

#[test]
fn declaration_list_is_covered() {
    let layouts = rust_layouts::get();
    assert_eq!(layouts.len(), FUNCTIONS.len());
    for (f, (sym, _)) in FUNCTIONS.iter().zip(&layouts) {
        assert_eq!(f.symbol, *sym);
    }
    assert!(cuda_fns().count() > 0 && hip_fns().count() > 0);
    assert_eq!(cuda_fns().count() + hip_fns().count(), FUNCTIONS.len());
    for f in FUNCTIONS {
        let prefix = match f.api {
            Api::Cuda => "cu",
            Api::Hip => "hip",
        };
        assert!(
            f.symbol.starts_with(prefix),
            "{}: api {:?}",
            f.symbol,
            f.api
        );
        assert!(
            f.symbol.starts_with(f.base),
            "{}: base {}",
            f.symbol,
            f.base
        );
    }
}

/// Every CUDA prototype against its typedef, as applications see `cudaTypedefs.h`, plus each
/// parameter's size and alignment against its Rust type. The typedefs only declared under
/// `__CUDA_API_VERSION_INTERNAL` are checked by `cuda_prototypes_match_in_internal_mode`.
#[test]
fn cuda_prototypes_match_cuda_typedefs() {
    let visible = cuda_headers_preprocessed();
    let layouts = rust_layouts::get();
    let mut internal_only = Vec::new();
    for lang in [Lang::C, Lang::Cxx] {
        let mut src = cuda_preamble("cuda_prototypes", lang);
        src.owned(
            Some("CUresult"),
            lang.same_type(
                "CUresult",
                "enum cudaError_enum",
                "CUresult is not enum cudaError_enum",
            ),
        );
        for f in cuda_fns() {
            let pfn = pfn(f);
            if contains_token(&visible, &pfn) {
                src.owned(
                    Some(f.symbol),
                    cuda_prototype_assert(lang, f.symbol, &pfn, &c_types(f)),
                );
            } else if lang == Lang::C {
                internal_only.push(format!("{} ({pfn})", f.symbol));
            }
            if lang == Lang::C {
                param_layout_asserts(&mut src, f, &layouts);
            }
        }
        if lang == Lang::C {
            src.owned(
                Some("CUresult"),
                "_Static_assert(sizeof(CUresult) == sizeof(int), \"CUresult is not int-sized\");",
            );
        }
        assert_compiles(&src, &cuda_flags(false));
    }
    println!("typedefs declared only under __CUDA_API_VERSION_INTERNAL: {internal_only:?}");
    assert!(
        internal_only.len() < cuda_fns().count() / 2,
        "most of our PFN typedefs are missing from cudaTypedefs.h: wrong header? {internal_only:?}"
    );
}

/// All CUDA prototypes with `-D__CUDA_API_VERSION_INTERNAL`, where `cudaTypedefs.h` also has the
/// legacy typedefs (`PFN_cuIpcOpenMemHandle_v4010`) and `cuda.h` declares every exported symbol
/// under its own name, so the declared type of each symbol is checked against its typedef too.
#[test]
fn cuda_prototypes_match_in_internal_mode() {
    for lang in [Lang::C, Lang::Cxx] {
        let mut src = cuda_preamble("cuda_prototypes_internal", lang);
        for f in cuda_fns() {
            let pfn = pfn(f);
            src.owned(
                Some(f.symbol),
                cuda_prototype_assert(lang, f.symbol, &pfn, &c_types(f)),
            );
            src.owned(
                Some(f.symbol),
                cuda_declaration_assert(lang, f.symbol, &pfn),
            );
        }
        assert_compiles(&src, &cuda_flags(true));
    }
}

/// By-value structs and `CUlogicalEndpointProp`: the header's layout is the one the Rust side
/// (`sharecheck_core::ffi`) uses.
#[test]
fn cuda_struct_layouts_match() {
    use sharecheck_core::ffi;
    use std::mem::{align_of, offset_of, size_of};
    type Prop = ffi::CUlogicalEndpointProp;
    let checks = [
        ("sizeof(CUlogicalEndpointProp)", size_of::<Prop>(), 24),
        ("_Alignof(CUlogicalEndpointProp)", align_of::<Prop>(), 8),
        (
            "offsetof(CUlogicalEndpointProp, type)",
            offset_of!(Prop, type_),
            0,
        ),
        (
            "offsetof(CUlogicalEndpointProp, unicast.device)",
            offset_of!(Prop, device_or_num_devices),
            4,
        ),
        (
            "offsetof(CUlogicalEndpointProp, multicast.numDevices)",
            offset_of!(Prop, device_or_num_devices),
            4,
        ),
        (
            "offsetof(CUlogicalEndpointProp, size)",
            offset_of!(Prop, size),
            8,
        ),
        (
            "offsetof(CUlogicalEndpointProp, ipcHandleTypes)",
            offset_of!(Prop, ipc_handle_types),
            16,
        ),
        (
            "offsetof(CUlogicalEndpointProp, flags)",
            offset_of!(Prop, flags),
            20,
        ),
        (
            "sizeof(((CUlogicalEndpointProp *)0)->type)",
            size_of::<std::ffi::c_uint>(),
            4,
        ),
        (
            "sizeof(((CUlogicalEndpointProp *)0)->unicast.device)",
            size_of::<std::ffi::c_int>(),
            4,
        ),
        (
            "sizeof(((CUlogicalEndpointProp *)0)->size)",
            size_of::<std::ffi::c_ulonglong>(),
            8,
        ),
        (
            "sizeof(CUipcMemHandle)",
            size_of::<ffi::CUipcMemHandle>(),
            64,
        ),
        (
            "sizeof(CUipcEventHandle)",
            size_of::<ffi::CUipcEventHandle>(),
            64,
        ),
        (
            "sizeof(CUipcMemHandle) == sizeof(CUipcEventHandle) ? 64 : 0",
            64,
            64,
        ),
        (
            "sizeof(CUlogicalEndpointId)",
            size_of::<ffi::CUlogicalEndpointId>(),
            4,
        ),
        (
            "sizeof(CUmemGenericAllocationHandle)",
            size_of::<ffi::CUmemGenericAllocationHandle>(),
            8,
        ),
    ];
    let mut src = cuda_preamble("cuda_layouts", Lang::C);
    for (expr, rust_value, expected) in checks {
        assert_eq!(rust_value, expected, "Rust side: {expr}");
        src.owned(
            Some(expr),
            format!("_Static_assert({expr} == {expected}, \"{expr} is not {expected}\");"),
        );
    }
    assert_compiles(&src, &cuda_flags(false));
}

/// The shim's `cuGetProcAddress` resolver wrappers (v1 and v2) have the typedefs' prototypes.
#[test]
fn cuda_get_proc_address_wrappers_match() {
    let wrappers = [
        ("cuGetProcAddress", "PFN_cuGetProcAddress_v11030", "CUresult (*)(const char *, void **, int, cuuint64_t)"),
        (
            "cuGetProcAddress_v2",
            "PFN_cuGetProcAddress_v12000",
            "CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *)",
        ),
    ];
    for lang in [Lang::C, Lang::Cxx] {
        for internal in [false, true] {
            let name = if internal {
                "cuda_get_proc_address_internal"
            } else {
                "cuda_get_proc_address"
            };
            let mut src = cuda_preamble(name, lang);
            for (sym, pfn, proto) in wrappers {
                let msg = format!("{sym}: wrapper prototype differs from {pfn}");
                src.owned(Some(sym), lang.same_type(pfn, proto, &msg));
                if internal {
                    src.owned(Some(sym), cuda_declaration_assert(lang, sym, pfn));
                }
            }
            assert_compiles(&src, &cuda_flags(internal));
        }
    }
}

/// Every HIP prototype against the function `hip_runtime_api.h` declares, plus each parameter's
/// size and alignment against its Rust type and the IPC handle sizes.
#[test]
fn hip_prototypes_match_hip_runtime_api() {
    use sharecheck_core::ffi;
    let layouts = rust_layouts::get();
    for lang in [Lang::C, Lang::Cxx] {
        let mut src = hip_preamble("hip_prototypes", lang);
        if lang == Lang::C {
            src.owned(Some("hipError_t"), "_Static_assert(sizeof(hipError_t) == sizeof(int), \"hipError_t is not int-sized\");");
            for (t, size) in [
                (
                    "hipIpcMemHandle_t",
                    std::mem::size_of::<ffi::hipIpcMemHandle_t>(),
                ),
                (
                    "hipIpcEventHandle_t",
                    std::mem::size_of::<ffi::hipIpcEventHandle_t>(),
                ),
            ] {
                assert_eq!(size, 64, "Rust side: sizeof({t})");
                src.owned(
                    Some(t),
                    format!("_Static_assert(sizeof({t}) == 64, \"sizeof({t}) is not 64\");"),
                );
            }
        }
        for f in hip_fns() {
            src.owned(
                Some(f.symbol),
                hip_prototype_assert(lang, f.symbol, &c_types(f)),
            );
            if lang == Lang::C {
                param_layout_asserts(&mut src, f, &layouts);
            }
        }
        assert_compiles(&src, &hip_flags());
    }
}

fn find(symbol: &str) -> &'static FnInfo {
    FUNCTIONS
        .iter()
        .find(|f| f.symbol == symbol)
        .unwrap_or_else(|| panic!("{symbol} not declared"))
}

fn expect_failure(src: &CSource, flags: &[String], symbol: &str, message: &str) {
    let failure = match compile(src, flags) {
        Ok(()) => panic!(
            "the {:?} ABI checker accepted a deliberately wrong prototype of {symbol}",
            src.lang
        ),
        Err(f) => f,
    };
    assert!(
        failure.report.contains(message),
        "expected `{message}` in:\n{}",
        failure.report
    );
    assert_eq!(
        failure.owners,
        BTreeSet::from([symbol.to_string()]),
        "the failure must be attributed to {symbol} alone:\n{}",
        failure.report
    );
    assert!(
        failure.report.contains(&format!("failed for: {symbol}\n")),
        "{}",
        failure.report
    );
}

/// The checker can fail: swapping two parameters of cuMemcpyPeer (and of hipMemcpyPeer) is
/// rejected, naming the function, while the same generator with the right order passes.
#[test]
fn checker_rejects_a_wrong_prototype() {
    for lang in [Lang::C, Lang::Cxx] {
        let tag = lang.ext();
        // CUDA: `CUdeviceptr dstDevice, CUcontext dstContext` swapped.
        let f = find("cuMemcpyPeer");
        let pfn = pfn(f);
        let right = c_types(f);
        let mut wrong = right.clone();
        wrong.swap(0, 1);
        assert_ne!(wrong, right, "the swap must change the prototype");
        let mut src = cuda_preamble(&format!("negative_cuda_control_{tag}"), lang);
        src.owned(
            Some(f.symbol),
            cuda_prototype_assert(lang, f.symbol, &pfn, &right),
        );
        assert_compiles(&src, &cuda_flags(false));
        let mut src = cuda_preamble(&format!("negative_cuda_{tag}"), lang);
        src.owned(
            Some(f.symbol),
            cuda_prototype_assert(lang, f.symbol, &pfn, &wrong),
        );
        expect_failure(
            &src,
            &cuda_flags(false),
            f.symbol,
            "cuMemcpyPeer: prototype differs from PFN_cuMemcpyPeer_v4000",
        );

        // HIP: `void *dst, int dstDeviceId` swapped.
        let f = find("hipMemcpyPeer");
        let right = c_types(f);
        let mut wrong = right.clone();
        wrong.swap(0, 1);
        assert_ne!(wrong, right);
        let mut src = hip_preamble(&format!("negative_hip_control_{tag}"), lang);
        src.owned(Some(f.symbol), hip_prototype_assert(lang, f.symbol, &right));
        assert_compiles(&src, &hip_flags());
        let mut src = hip_preamble(&format!("negative_hip_{tag}"), lang);
        src.owned(Some(f.symbol), hip_prototype_assert(lang, f.symbol, &wrong));
        expect_failure(
            &src,
            &hip_flags(),
            f.symbol,
            "hipMemcpyPeer: prototype differs from hip_runtime_api.h",
        );
    }

    // Only C++ tells an enum from its underlying integer type: `unsigned int` for the
    // `CUlogicalEndpointIpcHandleType handleType` of cuLogicalEndpointImport.
    let f = find("cuLogicalEndpointImport");
    let pfn = pfn(f);
    let mut loose = c_types(f);
    let last = loose.len() - 1;
    assert_eq!(loose[last], "CUlogicalEndpointIpcHandleType");
    loose[last] = "unsigned int".into();
    let mut src = cuda_preamble("negative_enum_c", Lang::C);
    src.owned(
        Some(f.symbol),
        cuda_prototype_assert(Lang::C, f.symbol, &pfn, &loose),
    );
    assert_compiles(&src, &cuda_flags(false));
    let mut src = cuda_preamble("negative_enum_cc", Lang::Cxx);
    src.owned(
        Some(f.symbol),
        cuda_prototype_assert(Lang::Cxx, f.symbol, &pfn, &loose),
    );
    expect_failure(
        &src,
        &cuda_flags(false),
        f.symbol,
        "cuLogicalEndpointImport: prototype differs from PFN_cuLogicalEndpointImport_v13030",
    );
}

/// A unit that fails for several functions names each of them.
#[test]
fn every_failing_function_is_named() {
    let mut src = cuda_preamble("negative_many", Lang::C);
    let mut expected = BTreeSet::new();
    for f in cuda_fns().filter(|f| f.params.len() >= 2).take(3) {
        let mut wrong = c_types(f);
        wrong.pop();
        src.owned(
            Some(f.symbol),
            cuda_prototype_assert(Lang::C, f.symbol, &pfn(f), &wrong),
        );
        expected.insert(f.symbol.to_string());
    }
    let good = find("cuCtxDisablePeerAccess");
    src.owned(
        Some(good.symbol),
        cuda_prototype_assert(Lang::C, good.symbol, &pfn(good), &c_types(good)),
    );
    let failure = compile(&src, &cuda_flags(false)).expect_err("three wrong prototypes must fail");
    assert_eq!(failure.owners, expected, "{}", failure.report);
    for sym in &expected {
        assert!(
            failure
                .report
                .contains(&format!("{sym}: prototype differs")),
            "{}",
            failure.report
        );
    }
}

#[test]
fn token_search_respects_identifier_boundaries() {
    assert!(contains_token("x (*PFN_a_v1)(int)", "PFN_a_v1"));
    assert!(!contains_token("x (*PFN_a_v10)(int)", "PFN_a_v1"));
    assert!(!contains_token("x (*XPFN_a_v1)(int)", "PFN_a_v1"));
}

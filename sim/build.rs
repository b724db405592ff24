//! Link flags of the simulated driver, built twice from `src/`: this package as
//! `libsharecheck_sim.so`, the CUDA driver (soname `libcuda.so.1`, the CUDA functions exported),
//! and `hip/` as `libsharecheck_sim_hip.so`, the HIP runtime (soname `libamdhip64.so.5`, the HIP
//! functions exported), as the vendor libraries are: a program linked against either records the
//! name the real library has, and so runs on a GPU machine unchanged; a program linked against
//! both gets each API from its own library.
//!
//! `-Bsymbolic` (DT_SYMBOLIC), as the real libcuda has: the library's own references, and the
//! function pointers its `cuGetProcAddress` hands out, bind to its own definitions even when an
//! LD_PRELOADed library (such as the sharecheck shim) exports the same names.
fn main() {
    link("libcuda.so.1", "hip");
}

/// The flags of the library named `soname`, whose `hidden` API's functions are not exported
/// (`cfg(sim_hides = ...)`, read by `entry::exports!`). Shared with `hip/build.rs`.
pub fn link(soname: &str, hidden: &str) {
    println!("cargo::rustc-check-cfg=cfg(sim_hides, values(\"cuda\", \"hip\"))");
    println!("cargo::rustc-cfg=sim_hides=\"{hidden}\"");
    println!("cargo::rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    println!("cargo::rerun-if-changed=build.rs");
}

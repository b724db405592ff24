//! Link flags of the simulated driver.
//!
//! `-Bsymbolic` (DT_SYMBOLIC), as the real libcuda has: the library's own references, and the
//! function pointers its `cuGetProcAddress` hands out, bind to its own definitions even when an
//! LD_PRELOADed library (such as the sharecheck shim) exports the same names. The soname stays the
//! default one: the library is found through symlinks named like the vendor libraries.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    println!("cargo:rerun-if-changed=build.rs");
}

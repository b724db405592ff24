//! Link flags of the shim's cdylib.
fn main() {
    // `-z nodelete`: a `dlclose` never unmaps the shim. Its writer thread and the pointers it
    // handed out (resolved symbols, hooks) outlive any handle the program holds.
    println!("cargo:rustc-link-arg-cdylib=-Wl,-z,nodelete");
    // `-z keep-text-section-prefix`: the functions of the call path, placed in
    // `.text.hot.sharecheck` (`#[link_section]`, src/dispatch.rs says which), stay together in
    // one output section `.text.hot` instead of among the other 5 MB of code (issue 24: after a
    // driver call on R580 every code page a call touches costs its TLB walk). rust-lld and GNU ld
    // both take it.
    println!("cargo:rustc-link-arg-cdylib=-Wl,-z,keep-text-section-prefix");
    println!("cargo:rerun-if-changed=build.rs");
}

//! Link flags of the shim's cdylib.
fn main() {
    // `-z nodelete`: a `dlclose` never unmaps the shim. Its writer thread and the pointers it
    // handed out (resolved symbols, hooks) outlive any handle the program holds.
    println!("cargo:rustc-link-arg-cdylib=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
}

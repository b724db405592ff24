//! Tells `sharecheck run` where this build puts the shim (`SHARECHECK_BUILD_DIR`, the profile's
//! target directory), so that a `sharecheck` copied elsewhere still finds it.

fn main() {
    if let Some(out) = std::env::var_os("OUT_DIR") {
        // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
        if let Some(profile_dir) = std::path::Path::new(&out).ancestors().nth(3) {
            println!(
                "cargo:rustc-env=SHARECHECK_BUILD_DIR={}",
                profile_dir.display()
            );
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

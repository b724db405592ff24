//! The simulated HIP runtime's link flags: see `sim/build.rs`.
#[path = "../build.rs"]
#[allow(dead_code)]
mod sim;

fn main() {
    sim::link("libamdhip64.so.5", "cuda");
    println!("cargo::rerun-if-changed=../build.rs");
}

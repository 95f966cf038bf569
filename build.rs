fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Relative relocations packed (DT_RELR: binutils ≥ 2.38, glibc ≥ 2.36): 50,000 pointers
    // that every process start relocates are read from a 14 KB table rather than 1.2 MB, a
    // few tenths of a millisecond of each short command (BENCHMARKS.md). The binary stays
    // position-independent.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bin=mailbroker=-Wl,-z,pack-relative-relocs");
    }
}

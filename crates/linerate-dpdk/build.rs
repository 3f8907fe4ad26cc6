//! With the `ffi` feature: compiles `csrc/shim.c` against DPDK (flags from
//! `pkg-config libdpdk`) and links DPDK's libraries. Without it: nothing.

fn main() {
    println!("cargo::rerun-if-changed=csrc/shim.c");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    #[cfg(feature = "ffi")]
    shim();
}

#[cfg(feature = "ffi")]
fn shim() {
    let flags = |what: &str| -> Vec<String> {
        let out = std::process::Command::new("pkg-config")
            .args([what, "libdpdk"])
            .output()
            .unwrap_or_else(|e| {
                panic!("the dpdk feature needs pkg-config and libdpdk-dev (apt-get install pkg-config libdpdk-dev): {e}")
            });
        assert!(
            out.status.success(),
            "pkg-config {what} libdpdk failed (is libdpdk-dev installed?): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .expect("pkg-config prints text")
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let mut build = cc::Build::new();
    build.file("csrc/shim.c").opt_level(3).warnings(true);
    let cflags = flags("--cflags");
    let mut it = cflags.iter();
    while let Some(f) = it.next() {
        if f == "-include" {
            // "-include rte_config.h": the header is the next word
            if let Some(h) = it.next() {
                build.flag("-include").flag(h);
            }
        } else if let Some(dir) = f.strip_prefix("-I") {
            build.include(dir);
        } else {
            build.flag(f);
        }
    }
    build.compile("linerate_dpdk_shim");
    for f in flags("--libs") {
        if let Some(dir) = f.strip_prefix("-L") {
            println!("cargo::rustc-link-search=native={dir}");
        } else if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo::rustc-link-lib={lib}");
        }
    }
}

//! With the `ffi` feature: compiles `csrc/shim.c` against DPDK (flags from
//! `pkg-config libdpdk`) and links DPDK's libraries, statically by default
//! (`LINERATE_DPDK_LINK=dynamic` links its shared libraries instead: see
//! docs/backends.md). Without the feature: nothing.

fn main() {
    println!("cargo::rerun-if-changed=csrc/shim.c");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    #[cfg(feature = "ffi")]
    shim();
}

/// DPDK's drivers a static build carries, each linked whole: a driver
/// registers itself from a constructor nothing else refers to. The buses
/// and the ring mempool (the pools' default) first, then the virtual
/// devices and the common NICs' poll-mode drivers, whose system libraries
/// (libxdp, libbpf, libpcap, libibverbs, libmlx5) libdpdk-dev depends on.
#[cfg(feature = "ffi")]
const STATIC_DRIVERS: &[&str] = &[
    "bus_pci",
    "bus_vdev",
    "bus_auxiliary",
    "mempool_ring",
    "mempool_stack",
    "common_iavf",
    "common_mlx5",
    "net_null",
    "net_ring",
    "net_af_packet",
    "net_af_xdp",
    "net_pcap",
    "net_tap",
    "net_memif",
    "net_virtio",
    "net_vmxnet3",
    "net_e1000",
    "net_ixgbe",
    "net_i40e",
    "net_iavf",
    "net_ice",
    "net_mlx5",
    "net_bnxt",
    "net_ena",
];

/// The shared system libraries DPDK's static libraries and the drivers
/// above call into (each library's own `NEEDED` list in Debian 12's
/// packages); `--as-needed` drops the ones a build does not use.
#[cfg(feature = "ffi")]
const STATIC_SYSTEM_LIBS: &[&str] = &[
    "numa", "fdt", "bsd", "m", "xdp", "bpf", "pcap", "mlx5", "ibverbs",
];

#[cfg(feature = "ffi")]
fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new("pkg-config")
        .args(args)
        .arg("libdpdk")
        .output()
        .unwrap_or_else(|e| {
            panic!("the dpdk feature needs pkg-config and libdpdk-dev (apt-get install pkg-config libdpdk-dev): {e}")
        });
    assert!(
        out.status.success(),
        "pkg-config {args:?} libdpdk failed (is libdpdk-dev installed?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("pkg-config prints text")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[cfg(feature = "ffi")]
fn shim() {
    println!("cargo::rerun-if-env-changed=LINERATE_DPDK_LINK");
    let mut build = cc::Build::new();
    build.file("csrc/shim.c").opt_level(3).warnings(true);
    let cflags = pkg_config(&["--cflags"]);
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
    let linked = match std::env::var("LINERATE_DPDK_LINK").as_deref() {
        Ok("static") | Err(_) => {
            link_static();
            "static"
        }
        Ok("dynamic") => {
            link_dynamic();
            "dynamic"
        }
        Ok(other) => panic!("LINERATE_DPDK_LINK={other}: expected static or dynamic"),
    };
    println!("cargo::rustc-env=LINERATE_DPDK_LINKED={linked}");
}

/// DPDK's shared libraries (`pkg-config --libs libdpdk`); the EAL loads
/// its drivers from its plugin directory at run time.
#[cfg(feature = "ffi")]
fn link_dynamic() {
    for f in pkg_config(&["--libs"]) {
        if let Some(dir) = f.strip_prefix("-L") {
            println!("cargo::rustc-link-search=native={dir}");
        } else if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo::rustc-link-lib={lib}");
        }
    }
}

/// DPDK's static libraries (`librte_*.a`, libdpdk-dev ships them): the
/// drivers of [`STATIC_DRIVERS`] whole, then the libraries
/// `pkg-config --libs libdpdk` names, in its order (each needing only
/// those after it), from which the linker takes what is used, then the
/// system libraries, shared. Left to the final link (`-bundle`), not
/// copied into this crate's rlib.
#[cfg(feature = "ffi")]
fn link_static() {
    let libdir = pkg_config(&["--variable=libdir"]).concat();
    println!("cargo::rustc-link-search=native={libdir}");
    for d in STATIC_DRIVERS {
        let archive = format!("{libdir}/librte_{d}.a");
        assert!(
            std::path::Path::new(&archive).exists(),
            "{archive} is missing (libdpdk-dev ships it); LINERATE_DPDK_LINK=dynamic links DPDK's shared libraries instead"
        );
        println!("cargo::rustc-link-lib=static:+whole-archive,-bundle=rte_{d}");
    }
    for f in pkg_config(&["--libs"]) {
        if let Some(lib) = f.strip_prefix("-lrte_") {
            println!("cargo::rustc-link-lib=static:-bundle=rte_{lib}");
        }
    }
    for lib in STATIC_SYSTEM_LIBS {
        println!("cargo::rustc-link-lib=dylib={lib}");
    }
}

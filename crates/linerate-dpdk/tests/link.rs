//! The build links DPDK as `LINKED` says: statically (the default), no
//! shared DPDK library is mapped into the process (that its drivers are
//! in the binary, tests/threads.rs and linerate's tests/dpdk_rig.rs show
//! by using them); dynamically (`LINERATE_DPDK_LINK=dynamic`), the EAL's
//! shared library is mapped from the start (a `NEEDED` of the binary).
#![cfg(feature = "ffi")]

#[test]
fn dpdk_is_linked_as_the_build_says() {
    // Refers to the shim, so that the linker keeps DPDK (`--as-needed`
    // drops a shared library nothing refers to).
    std::hint::black_box(linerate_dpdk::thread_lcore as fn() -> Option<u32>);
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let shared_eal = maps.lines().any(|l| l.contains("librte_eal.so"));
    match linerate_dpdk::LINKED {
        "static" => assert!(!shared_eal, "a static build has librte_eal.so mapped"),
        "dynamic" => assert!(shared_eal, "a dynamic build has no librte_eal.so mapped"),
        other => panic!("LINKED is {other:?}"),
    }
}

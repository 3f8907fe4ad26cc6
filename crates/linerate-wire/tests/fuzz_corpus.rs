//! Runs the fuzz target's seed corpus through the same entry point, so the
//! corpus stays valid and the parsers are exercised on it in every test run.

use std::path::Path;

#[test]
fn seed_corpus_parses_without_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/parse_frame");
    let mut n = 0;
    let mut parsed = 0;
    for entry in std::fs::read_dir(&dir).expect("seed corpus directory") {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        linerate_wire::parse::fuzz_all(&bytes);
        // Every prefix too: truncation is the commonest corruption.
        for cut in 0..bytes.len() {
            linerate_wire::parse::fuzz_all(&bytes[..cut]);
        }
        parsed += usize::from(linerate_wire::parse_frame(&bytes).is_ok());
        n += 1;
    }
    assert!(n >= 6, "seed corpus has only {n} files");
    assert!(parsed >= 5, "only {parsed} seeds are valid frames");
}

#[test]
fn seed_with_probe_carries_it() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/parse_frame/udp4_probe");
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len(), 60, "a minimum-size frame without FCS");
    let p = linerate_wire::parse_frame(&bytes).unwrap();
    let probe = p.probe.expect("probe parsed");
    assert_eq!(
        (probe.flow_id, probe.seq, probe.tx_ns),
        (7, 42, 123_456_789)
    );
}

#[test]
fn seed_behind_vxlan_carries_the_inner_probe() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/parse_frame/vxlan_udp4_probe");
    let bytes = std::fs::read(path).unwrap();
    let p = linerate_wire::parse_frame(&bytes).unwrap();
    assert_eq!(p.vxlan.map(|v| v.vni), Some(1000));
    let probe = p.probe.expect("the inner frame's probe");
    assert_eq!((probe.flow_id, probe.seq), (7, 42));
    assert_eq!(linerate_wire::probe_of(&bytes), Some(probe));
}

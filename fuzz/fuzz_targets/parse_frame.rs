//! Feeds arbitrary bytes to every parser of the wire layer. Run with
//! `cargo fuzz run parse_frame fuzz/corpus/parse_frame` (nightly).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    linerate_wire::parse::fuzz_all(data);
});

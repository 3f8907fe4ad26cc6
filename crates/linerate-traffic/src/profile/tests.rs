//! The profile's reading (errors with file, line and field), its frames
//! (same seed, same bytes) and its schedules (the gaps each pattern gives).

use super::*;
use crate::profile::field::Mode;
use std::path::Path;

const EXAMPLE: &str = include_str!("../../../../docs/profile-example.toml");

#[test]
fn the_docs_show_the_example_profile_as_it_is() {
    let page = include_str!("../../../../docs/profiles.md");
    assert!(
        page.contains(&format!("```toml\n{EXAMPLE}```")),
        "docs/profiles.md must show docs/profile-example.toml verbatim"
    );
    let dut = include_str!("../../../../docs/profile-dut.toml");
    assert!(Profile::parse(dut, Path::new("profile-dut.toml")).is_ok());
}

fn parse(text: &str) -> Result<Profile, ProfileError> {
    Profile::parse(text, Path::new("p.toml"))
}

/// A one-stream profile with `extra` lines in its stream table and `l4`
/// (its transport table).
fn one(extra: &str, l4: &str) -> String {
    format!(
        "seed = 9\n[[streams]]\nname = \"a\"\nrate = \"1000pps\"\n{extra}\n[streams.eth]\ndst = \"02:00:00:00:00:02\"\n[streams.ipv4]\nsrc = \"198.18.0.1\"\ndst = \"198.18.0.2\"\n{l4}\n"
    )
}

#[test]
fn the_example_profile_reads_as_written() {
    let p = parse(EXAMPLE).unwrap();
    assert_eq!(p.seed, 42);
    assert_eq!(p.line_rate_bps, Some(10e9));
    let names: Vec<_> = p.streams.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["voice", "video", "syn"]);
    assert_eq!(
        p.streams.iter().map(|s| s.id).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    let [voice, video, syn] = &p.streams[..] else {
        panic!("three streams")
    };
    assert_eq!(voice.rate, RateSpec::Pps(1000.0));
    assert_eq!(voice.count, Some(1000));
    assert_eq!(voice.headers.dscp, 46);
    assert_eq!(
        voice.headers.src_port,
        Field::Range {
            first: 16384,
            last: 16387,
            step: 1,
            mode: Mode::Increment
        }
    );
    assert_eq!(video.pattern, Pattern::Burst { frames: 16 });
    assert_eq!(video.start_delay, Duration::from_millis(100));
    assert_eq!(video.duration, Some(Duration::from_millis(800)));
    assert!(video.headers.ipv6);
    assert_eq!(video.headers.vlan, Some((Field::Fixed(100), 4)));
    assert_eq!(video.headers.dst_port, Field::List(vec![5000, 5002, 5004]));
    let Field::List(sizes) = &video.size else {
        panic!("IMIX is a list")
    };
    assert_eq!(sizes.len(), 12);
    assert_eq!(syn.pattern, Pattern::Poisson);
    assert_eq!(syn.headers.tcp_flags, Some(0x02));
    assert_eq!(
        syn.size,
        Field::Fixed(76),
        "no size: the smallest that carries TCP"
    );
    let rates = p.rates(None).unwrap();
    assert_eq!(
        rates[2],
        Rate::Bps {
            bps: 500_000.0,
            extra_bytes: 20
        }
    );
}

/// The error of `text`, as printed.
fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn a_wrong_field_names_the_file_the_line_and_the_field() {
    // An address that is not one: line 10 of the stream's ipv4 table.
    let text = one("", "").replace("src = \"198.18.0.1\"", "src = \"198.18.0.300\"");
    assert_eq!(
        error(&text),
        "p.toml:9: field 'streams[0].ipv4.src': '198.18.0.300' is not an IP address"
    );
    // The second stream's, with a typo in a key.
    let two = format!(
        "{}{}",
        one("", ""),
        one("", "[streams.udp]\nsrc = 1\ndts = 2")
            .replace("seed = 9\n", "")
            .replace("\"a\"", "\"b\"")
    );
    let e = parse(&two).unwrap_err();
    assert_eq!(e.field(), Some("streams[1].udp.dts"));
    assert_eq!(e.line(), Some(23));
    assert!(
        e.to_string()
            .starts_with("p.toml:23: field 'streams[1].udp.dts': unknown field"),
        "{e}"
    );
    // A wrong value's type, an IPv6 address under ipv4, a range backwards,
    // a size too small for its headers, a missing rate, a rate without unit.
    let cases = [
        (
            one("count = \"ten\"", ""),
            "p.toml:5: field 'streams[0].count': expected an integer, found string",
        ),
        (
            one("", "").replace("dst = \"198.18.0.2\"", "dst = \"2001:db8::2\""),
            "p.toml:10: field 'streams[0].ipv4.dst': '2001:db8::2' is not an IPv4 address",
        ),
        (
            one("", "[streams.udp]\ndst = { from = 2000, to = 1000 }"),
            "p.toml:12: field 'streams[0].udp.dst.to': below 'from'",
        ),
        (
            one("size = { list = [64, 9300] }", ""),
            "p.toml:5: field 'streams[0].size.list[1]': 9300 is not a frame size (64..9216 bytes, FCS included)",
        ),
        (
            one("size = 64", "")
                .replace("[streams.ipv4]", "[streams.vlan]\nid = 7\n[streams.ipv6]")
                .replace("198.18.0.1", "2001:db8::1")
                .replace("198.18.0.2", "2001:db8::2"),
            "p.toml:5: field 'streams[0].size': a 64-byte frame cannot carry the headers and linerate's 18-byte probe (needs at least 88 bytes)",
        ),
        (
            one("", "").replace("rate = \"1000pps\"\n", ""),
            "p.toml:2: field 'streams[0].rate': missing (this field is required)",
        ),
        (
            one("", "").replace("\"1000pps\"", "\"1000\""),
            "p.toml:4: field 'streams[0].rate': '1000' has no unit: write 1000pps, 50Mbps or 10% (of the line rate)",
        ),
        (
            one("pattern = { burst = 0 }", ""),
            "p.toml:5: field 'streams[0].pattern.burst': 0 is out of range (1..=65536)",
        ),
        (
            one("", "").replace("seed = 9", "seed = = 9"),
            "p.toml:1: not TOML: ",
        ),
    ];
    for (text, want) in cases {
        let got = error(&text);
        assert!(got.starts_with(want), "{text}\n got: {got}\nwant: {want}");
    }
}

#[test]
fn streams_need_their_own_names_and_ids_and_a_line_rate_for_percent() {
    let two = format!(
        "{}{}",
        one("", ""),
        one("id = 0", "")
            .replace("seed = 9\n", "")
            .replace("\"a\"", "\"b\"")
    );
    assert_eq!(
        error(&two),
        "p.toml:15: field 'streams[1].id': the same id as stream 'a' (each stream needs its own)"
    );
    let p = parse(&one("", "").replace("\"1000pps\"", "\"10%\"")).unwrap();
    let e = p.rates(None).unwrap_err().to_string();
    assert!(e.starts_with("p.toml:2: field 'streams[0].rate': 10% of the line rate, but the interface reports no speed"), "{e}");
    assert_eq!(
        p.rates(Some(1e9)).unwrap()[0],
        Rate::Bps {
            bps: 1e8,
            extra_bytes: 20
        }
    );
}

/// Every frame of every stream of `p` (the first `n` of each), written
/// with send time `t`.
fn frames_of(p: &Profile, n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for s in &p.streams {
        let mut f = StreamFrames::new(s, [2, 0, 0, 0, 0, 1], None).unwrap();
        for k in 0..n {
            let mut b = vec![0u8; 9216];
            let len = f.write(&mut b, 1_000 + k as u64);
            b.truncate(len);
            out.push(b);
        }
    }
    out
}

#[test]
fn the_same_seed_gives_the_same_frames_byte_for_byte_and_another_seed_others() {
    let p = parse(EXAMPLE).unwrap();
    let a = frames_of(&p, 300);
    assert_eq!(a, frames_of(&parse(EXAMPLE).unwrap(), 300), "same seed");
    let other = parse(&EXAMPLE.replace("seed = 42", "seed = 43")).unwrap();
    let b = frames_of(&other, 300);
    // Only the random fields move: the voice stream has none.
    assert_eq!(a[..300], b[..300], "no random field, no change");
    assert_ne!(a[300..], b[300..], "random sources follow the seed");
    // The frames check out, and the fields stay in their ranges.
    for f in &a {
        let parsed = linerate_wire::parse_frame(f).expect("a well-formed frame");
        assert!(parsed.probe.is_some(), "every frame carries the probe");
    }
    let video = &a[300..600];
    for f in video {
        assert_eq!(&f[12..16], &[0x81, 0x00, 0x80, 100], "VLAN 100, priority 4");
        let src = u128::from_be_bytes(f[18 + 8..18 + 24].try_into().unwrap());
        assert!((0x2001_0db8_u128 << 96 | 0x100..=0x2001_0db8_u128 << 96 | 0x1ff).contains(&src));
    }
    let sizes: Vec<usize> = video.iter().map(|f| f.len() + 4).collect();
    assert_eq!(
        sizes[..12],
        [128, 594, 128, 128, 594, 128, 1518, 128, 594, 128, 594, 128]
    );
    assert_eq!(
        sizes[..12],
        sizes[12..24],
        "the mix repeats every 12 frames"
    );
}

/// The departures (ns) of a stream's first `n` frames alone.
fn departures(s: &Stream, rate: Rate, n: usize) -> Vec<u64> {
    let mut p = Pacer::new(s, rate, 1.0);
    (0..n).map_while(|_| p.next(100)).collect()
}

fn gaps(t: &[u64]) -> Vec<f64> {
    t.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
}

fn mean_sd(g: &[f64]) -> (f64, f64) {
    let m = g.iter().sum::<f64>() / g.len() as f64;
    let v = g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (g.len() - 1) as f64;
    (m, v.sqrt())
}

#[test]
fn each_pattern_spaces_its_departures_as_it_says() {
    let mut s = parse(&one("count = 10000", "")).unwrap().streams.remove(0);
    let rate = Rate::Pps(10_000.0);
    // Evenly spaced: every gap 100 µs.
    let t = departures(&s, rate, 20_000);
    assert_eq!(t.len(), 10_000, "the count ends it");
    assert!(gaps(&t).iter().all(|&g| (g - 100_000.0).abs() <= 1.0));
    // Bursts of 8: 7 gaps of 0, then 800 µs; the mean stays 100 µs.
    s.pattern = Pattern::Burst { frames: 8 };
    let g = gaps(&departures(&s, rate, 8_000));
    assert_eq!(g.iter().filter(|&&g| g == 0.0).count(), 7_000);
    assert!(
        g.iter()
            .filter(|&&g| g > 0.0)
            .all(|&g| (g - 800_000.0).abs() <= 1.0)
    );
    // On 10 ms, off 30 ms: 100 frames each on period, then a 30.1 ms gap.
    s.pattern = Pattern::OnOff {
        on: Duration::from_millis(10),
        off: Duration::from_millis(30),
    };
    let t = departures(&s, rate, 1_000);
    assert_eq!(*t.last().unwrap(), 9 * 40_000_000 + 9_900_000);
    let long = gaps(&t)
        .into_iter()
        .filter(|&g| g > 1e6)
        .collect::<Vec<_>>();
    assert_eq!(long.len(), 9);
    assert!(long.iter().all(|&g| (g - 30_100_000.0).abs() <= 1.0));
    // Poisson: exponential gaps, mean 100 µs and spread as large (within
    // 3% over 10000 gaps), and the same gaps for the same seed.
    s.pattern = Pattern::Poisson;
    let t = departures(&s, rate, 10_000);
    let (m, sd) = mean_sd(&gaps(&t));
    assert!((m - 100_000.0).abs() < 3_000.0, "mean {m}");
    assert!(
        (sd / m - 1.0).abs() < 0.03,
        "coefficient of variation {}",
        sd / m
    );
    assert_eq!(t, departures(&s, rate, 10_000));
    // A start delay moves them all; a duration ends them.
    s.pattern = Pattern::Fixed;
    s.start_delay = Duration::from_millis(5);
    s.duration = Some(Duration::from_millis(10));
    let t = departures(&s, rate, 1_000);
    assert_eq!((t[0], t.len()), (5_000_000, 100));
}

#[test]
fn a_bit_rate_spaces_frames_by_their_size_and_the_schedule_merges_streams() {
    // 100 B frames at 1.2 Mbit/s on the wire: (100 + 20) x 8 bits = 800 µs.
    let r = Rate::Bps {
        bps: 1.2e6,
        extra_bytes: 20,
    };
    assert_eq!(r.gap_ns(100), 800_000.0);
    assert_eq!(r.scaled(2.0).gap_ns(100), 400_000.0);
    let p = parse(EXAMPLE).unwrap();
    let rates = p.rates(None).unwrap();
    let pacers = p
        .streams
        .iter()
        .zip(&rates)
        .map(|(s, r)| Pacer::new(s, *r, 1.0))
        .collect();
    let mut sched = Schedule::new(pacers, |_| 100);
    let mut last = 0;
    let mut per = [0u64; 3];
    while let Some(d) = sched.peek() {
        assert!(d.at_ns >= last, "in time order");
        last = d.at_ns;
        per[d.stream] += 1;
        sched.advance(100);
    }
    // voice: its count; syn: its count; video: 0.8 s at 20 Mbit/s of
    // 120-byte frames (960 bits): 16666.67 frames, in bursts of 16.
    assert_eq!(per, [1000, 16_672, 500]);
}

//! CLOCK_MONOTONIC, the clock iperf3 stamps UDP datagrams with.

/// One read of `clock` (each one this module names exists on every
/// Linux since 2.6.32, so the call cannot fail).
fn read(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock exists.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts
}

fn ns_of(ts: libc::timespec) -> u64 {
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Seconds and nanoseconds of CLOCK_MONOTONIC.
pub fn monotonic() -> (u64, u32) {
    let ts = read(libc::CLOCK_MONOTONIC);
    (ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    ns_of(read(libc::CLOCK_MONOTONIC))
}

/// CLOCK_MONOTONIC_COARSE in nanoseconds: CLOCK_MONOTONIC as of the
/// kernel's last tick (a few ms behind at most, never ahead), read from
/// the vDSO's data alone, without the time counter [`monotonic_ns`]
/// reads (6 ns against 29 on the project's VM): for a deadline a loop
/// checks every burst, where a tick's lateness does not matter (the end
/// of a run, the next look at a link).
pub fn coarse_ns() -> u64 {
    ns_of(read(libc::CLOCK_MONOTONIC_COARSE))
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, in nanoseconds: what turns a
/// kernel timestamp taken on the wall clock into a monotonic one.
pub fn realtime_offset_ns() -> i128 {
    let at = |clock| i128::from(ns_of(read(clock)));
    // Wall clock read on both sides of the monotonic one: their midpoint.
    let r0 = at(libc::CLOCK_REALTIME);
    let m = at(libc::CLOCK_MONOTONIC);
    let r1 = at(libc::CLOCK_REALTIME);
    (r0 + r1) / 2 - m
}

/// Process CPU time (user, system) in seconds.
pub fn process_cpu_s() -> (f64, f64) {
    // SAFETY: rusage is plain old data; zeroed is a valid value, and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage struct.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Lets this thread's sleeps end within `ns` of their deadline
/// (PR_SET_TIMERSLACK; the default slack is 50 µs).
pub fn set_timer_slack_ns(ns: u64) -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes a plain integer argument.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_clock_is_the_monotonic_one_a_tick_behind() {
        let c0 = coarse_ns();
        let m = monotonic_ns();
        let c1 = coarse_ns();
        // never ahead of the fine clock read after it, at most a tick
        // (1-10 ms by CONFIG_HZ; 50 ms allows a preempted test) behind
        assert!(c0 <= m, "{c0} {m}");
        assert!(m - c0 < 50_000_000, "{c0} {m}");
        assert!(c1 >= c0);
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert!(
            coarse_ns() >= c0 + 10_000_000,
            "the coarse clock stood still"
        );
    }

    #[test]
    fn monotonic_moves_forward() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b > a + 1_000_000, "{a} {b}");
        let (u, s) = process_cpu_s();
        assert!(u >= 0.0 && s >= 0.0);
        // The offset is steady from one call to the next (no clock step here).
        let (o1, o2) = (realtime_offset_ns(), realtime_offset_ns());
        assert!((o1 - o2).abs() < 1_000_000, "{o1} {o2}");
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i128;
        let from_mono = i128::from(monotonic_ns()) + o1;
        assert!((wall - from_mono).abs() < 50_000_000, "{wall} {from_mono}");
    }
}

/// The local wall-clock time formatted by strftime(3) `format` (iperf3's
/// `--timestamps`); an empty string if the format is unusable.
pub fn strftime_local(format: &str) -> String {
    let Ok(fmt) = std::ffi::CString::new(format) else {
        return String::new();
    };
    let mut now: libc::time_t = 0;
    // SAFETY: `now` is a valid, writable time_t.
    unsafe { libc::time(&mut now) };
    // SAFETY: an all-zero tm is a valid value for localtime_r to fill.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::localtime_r(&now, &mut tm) }.is_null() {
        return String::new();
    }
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length, `fmt` is NUL-terminated and
    // `tm` was filled by localtime_r.
    let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), &tm) };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Detaches the process into the background as iperf3's `-D` does (fork,
/// new session, working directory `/`, standard streams on /dev/null).
/// Call it before any thread is started.
pub fn daemonize() -> std::io::Result<()> {
    nix::unistd::daemon(false, false).map_err(std::io::Error::from)
}

#[cfg(test)]
mod wall_tests {
    #[test]
    fn strftime_formats_the_local_time() {
        let y = super::strftime_local("%Y");
        assert_eq!(y.len(), 4, "{y}");
        assert!(y.starts_with("20"), "{y}");
        assert_eq!(super::strftime_local("x%%y"), "x%y");
    }
}

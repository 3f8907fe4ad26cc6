//! CPUs: which ones this process may use, pinning a thread to one, and the
//! CPU-list syntax every command takes (`0-3,8`).

use std::io;

/// Highest CPU number handled (the kernel's `cpu_set_t` holds 1024).
pub const CPU_MAX: usize = 1023;

/// Parses a CPU list: numbers and ranges separated by commas (`0,2`,
/// `0-3,8`); order is kept and a CPU may repeat (two workers on one CPU is
/// a choice the doctor warns about, not a syntax error).
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    let num = |t: &str| -> Result<usize, String> {
        t.trim()
            .parse::<usize>()
            .ok()
            .filter(|c| *c <= CPU_MAX)
            .ok_or_else(|| format!("'{t}' is not a CPU number (0-{CPU_MAX})"))
    };
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    return Err(format!("CPU range '{part}' runs backwards"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    if out.is_empty() {
        return Err("give at least one CPU (e.g. 0,1 or 0-3)".into());
    }
    Ok(out)
}

/// A CPU list as people write it: `0-3,8` (runs folded, order kept).
pub fn format_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}-{}", cpus[i], cpus[j])
        } else {
            cpus[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs this process may run on (taskset, cgroups); empty if unknown.
pub fn allowed() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `set`, which outlives the call.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads the set within its bounds (c <= CPU_MAX).
    (0..=CPU_MAX)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// The CPUs of `cores` this process may not use (none if that is unknown).
pub fn not_allowed(cores: &[usize]) -> Vec<usize> {
    let ok = allowed();
    if ok.is_empty() {
        return Vec::new();
    }
    cores.iter().copied().filter(|c| !ok.contains(c)).collect()
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) -> io::Result<()> {
    if cpu > CPU_MAX {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu <= CPU_MAX is within the set.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Pins the calling worker thread to `cpu`; the error says which CPU.
pub fn pin_worker(cpu: usize) -> Result<(), String> {
    pin(cpu).map_err(|e| format!("cannot pin a worker to CPU {cpu}: {e}"))
}

/// Workers one CPU list may ask for (a CPU may be named more than once).
pub const LIST_MAX: usize = 256;

/// A CPU list (`--cores`, `--stream-cpus`) checked against this process's
/// CPUs before anything is opened: every CPU one it may run on, at most
/// [`LIST_MAX`] entries.
pub fn checked_list(s: &str) -> Result<Vec<usize>, String> {
    let list = parse_list(s)?;
    let bad = not_allowed(&list);
    if !bad.is_empty() {
        return Err(format!(
            "CPU(s) {} are not online or not allowed for this process (it may run on {})",
            format_list(&bad),
            format_list(&allowed())
        ));
    }
    if list.len() > LIST_MAX {
        return Err(format!(
            "{} CPUs: at most {LIST_MAX} (one worker each)",
            list.len()
        ));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_list_is_written_as_people_write_it() {
        assert_eq!(format_list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(format_list(&[5]), "5");
        assert_eq!(format_list(&[2, 3, 7, 8, 9, 1]), "2-3,7-9,1");
        assert_eq!(format_list(&[]), "");
    }

    use super::*;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse_list("0-3,8").unwrap(), [0, 1, 2, 3, 8]);
        assert_eq!(parse_list("1,1").unwrap(), [1, 1]);
        assert_eq!(parse_list(" 2 ").unwrap(), [2]);
        assert!(parse_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_list("x").unwrap_err().contains("not a CPU"));
        assert!(parse_list("2000").is_err());
        assert!(parse_list(",").is_err());
    }

    #[test]
    fn this_thread_can_be_pinned_to_an_allowed_cpu() {
        let ok = allowed();
        assert!(!ok.is_empty());
        let before = ok.clone();
        std::thread::spawn(move || {
            pin(before[0]).unwrap();
            assert_eq!(allowed(), [before[0]]);
        })
        .join()
        .unwrap();
        assert!(not_allowed(&[CPU_MAX]).contains(&CPU_MAX) || ok.contains(&CPU_MAX));
        assert!(pin_worker(CPU_MAX + 1).unwrap_err().contains("CPU 1024"));
    }
}

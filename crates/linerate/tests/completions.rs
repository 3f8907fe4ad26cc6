//! `linerate completions SHELL` and `linerate man` (issue 40 item 3):
//! generated from the clap definitions, they name every subcommand, the
//! shells accept their scripts (`bash -n`, `zsh -n`, `fish --no-execute`:
//! zsh and fish are installed by scripts/test; without them those checks
//! skip, and fail under LINERATE_STRICT=1) and man renders every page
//! without a warning.

use linerate_testkit::{require_program, should_skip};
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Every subcommand, nested ones as `rr client`. A subcommand added to the
/// CLI and not here fails `the_list_is_the_cli_s`.
const SUBCOMMANDS: &[&str] = &[
    "selftest",
    "server",
    "client",
    "blast",
    "sink",
    "fwd",
    "rr",
    "rr server",
    "rr client",
    "doctor",
    "calc",
    "rfc2544",
    "lab",
    "lab up",
    "lab down",
    "lab status",
    "plot",
    "report",
    "compare",
    "pscheduler",
    "pscheduler enumerate",
    "pscheduler can-run",
    "pscheduler duration",
    "pscheduler participant-data",
    "pscheduler run",
    "pscheduler merged-results",
    "agent",
    "completions",
    "man",
];

fn linerate(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("run linerate");
    assert!(
        out.status.success(),
        "linerate {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(args: &[&str]) -> String {
    String::from_utf8(linerate(args).stdout).expect("UTF-8")
}

/// The subcommands `--help` lists under "Commands:" (of `linerate` or of
/// a subcommand), `help` left out.
fn listed(args: &[&str]) -> Vec<String> {
    let help = text(args);
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A description wrapped onto the next line is indented further.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_list_is_the_cli_s() {
    let mut cli: Vec<String> = Vec::new();
    for top in listed(&["--help"]) {
        let nested = listed(&[top.as_str(), "--help"]);
        cli.push(top.clone());
        cli.extend(nested.iter().map(|n| format!("{top} {n}")));
    }
    let mut ours: Vec<String> = SUBCOMMANDS.iter().map(|s| s.to_string()).collect();
    cli.sort();
    ours.sort();
    assert_eq!(cli, ours, "the CLI's subcommands and this test's list");
}

/// Whether `script` names every subcommand (the last word of each path).
fn names_every_subcommand(shell: &str, script: &str) {
    for sub in SUBCOMMANDS {
        let word = sub.rsplit(' ').next().unwrap();
        assert!(
            script.contains(word),
            "the {shell} completions do not name {sub}"
        );
    }
}

/// Runs `program args` with `script` on standard input; it must succeed.
fn check_syntax(program: &str, args: &[&str], script: &str) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?} refuses the completions: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bash_completions_name_every_subcommand_and_parse() {
    let script = text(&["completions", "bash"]);
    assert!(script.contains("complete -F _linerate"), "{script}");
    names_every_subcommand("bash", &script);
    check_syntax("bash", &["-n"], &script);
}

#[test]
fn zsh_completions_name_every_subcommand_and_parse() {
    let script = text(&["completions", "zsh"]);
    assert!(script.starts_with("#compdef linerate"), "{script}");
    names_every_subcommand("zsh", &script);
    if should_skip("zsh -n on the completions", &[require_program("zsh")]) {
        return;
    }
    // zsh -n reads the script from standard input without running it.
    check_syntax("zsh", &["-n"], &script);
}

#[test]
fn fish_completions_name_every_subcommand_and_parse() {
    let script = text(&["completions", "fish"]);
    assert!(script.contains("complete -c linerate"), "{script}");
    names_every_subcommand("fish", &script);
    if should_skip(
        "fish --no-execute on the completions",
        &[require_program("fish")],
    ) {
        return;
    }
    check_syntax("fish", &["--no-execute"], &script);
}

#[test]
fn a_broken_script_is_refused() {
    // The syntax check can fail: a truncated bash script is refused.
    let script = text(&["completions", "bash"]);
    let cut = &script[..script.len() / 2];
    let out = Command::new("bash")
        .args(["-n"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(cut.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(!out.status.success(), "bash -n took half a script");
}

#[test]
fn man_writes_one_page_per_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let listed = text(&["man", "--dir", dir.path().to_str().unwrap()]);
    let mut want: Vec<String> = std::iter::once("linerate.1".to_owned())
        .chain(
            SUBCOMMANDS
                .iter()
                .map(|s| format!("linerate-{}.1", s.replace(' ', "-"))),
        )
        .collect();
    let mut got: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(listed.lines().count(), want.len(), "{listed}");
    let page = std::fs::read_to_string(dir.path().join("linerate-rr-client.1")).unwrap();
    let version = format!("\"linerate {}\"", env!("CARGO_PKG_VERSION"));
    assert!(
        page.starts_with(".ie") && page.contains(".TH linerate-rr-client 1"),
        "{page}"
    );
    assert!(
        page.contains(&version) && page.contains("\\-\\-outstanding"),
        "{page}"
    );
    // One page printed is the page written.
    let one = linerate(&["man", "rr", "client"]).stdout;
    assert_eq!(String::from_utf8(one).unwrap(), page);
    if should_skip("man renders the pages", &[require_program("man")]) {
        return;
    }
    for name in &want {
        let out = Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z"])
            .arg(dir.path().join(name))
            .env("MANWIDTH", "80")
            .stdout(Stdio::null())
            .output()
            .unwrap();
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.is_empty(),
            "man warns on {name}: {warnings}"
        );
    }
}

#[test]
fn man_of_an_unknown_subcommand_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["man", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no such subcommand: nosuch"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

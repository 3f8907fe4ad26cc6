//! The packages end to end (issue 40 item 2): `scripts/package` builds
//! linerate and pscheduler-tool-linerate as .debs and .rpms from the
//! tree (one release build, in this test's target directory); lintian
//! finds no error or warning in the .debs; `rpm -qlp` lists exactly the
//! files expected; the .debs are installed on this machine with
//! `apt-get install ./….deb`, then `linerate --version`, `man -w` and each
//! pScheduler method run from the installed paths; the packages are then
//! purged and nothing of them is left. A guard purges them too when a
//! check fails.
//!
//! Needs root, apt-get, dpkg-deb, dpkg-shlibdeps, rpmbuild, rpm, lintian
//! and man (scripts/test installs them); skips without, fails without
//! under LINERATE_STRICT=1. Refuses to run where linerate is installed
//! already (it would remove what it did not install).

mod support;

use linerate_testkit::{require_program, require_root, should_skip};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const PACKAGES: [&str; 2] = ["linerate", "pscheduler-tool-linerate"];
const DEB_TOOL_DIR: &str = "/usr/lib/pscheduler/classes/tool/linerate";
const RPM_TOOL_DIR: &str = "/usr/libexec/pscheduler/classes/tool/linerate";
const METHODS: [&str; 6] = [
    "enumerate",
    "can-run",
    "duration",
    "participant-data",
    "run",
    "merged-results",
];

fn tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `program args`, which must succeed; its standard output.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether dpkg has package `name` installed (or half-installed).
fn dpkg_knows(name: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${db:Status-Status}", name])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty() && o.stdout != b"not-installed")
}

/// The packages installed by this test: purged when dropped, also while
/// a failed check unwinds.
struct Installed;

impl Installed {
    fn purge() -> Output {
        Command::new("apt-get")
            .args(["remove", "--purge", "-y", "-q"])
            .args(PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .expect("apt-get remove")
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if PACKAGES.iter().any(|p| dpkg_knows(p)) {
            let out = Self::purge();
            eprintln!(
                "packages: purged {PACKAGES:?} after a failure: {}",
                out.status
            );
        }
    }
}

/// The four packages scripts/package made.
struct Built {
    deb: PathBuf,
    tool_deb: PathBuf,
    rpm: PathBuf,
    tool_rpm: PathBuf,
}

fn build(out: &Path) -> Built {
    // The release build goes where this test's own build is (target/ or
    // $CARGO_TARGET_DIR): made once, reused by later runs.
    let target = Path::new(env!("CARGO_BIN_EXE_linerate"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf();
    let began = Instant::now();
    let status = Command::new(tree().join("scripts/package"))
        .arg("--out")
        .arg(out)
        .env("CARGO", env!("CARGO"))
        .env("CARGO_TARGET_DIR", &target)
        .stdout(Stdio::inherit())
        .status()
        .expect("scripts/package");
    assert!(status.success(), "scripts/package: {status}");
    eprintln!("packages: scripts/package took {:?}", began.elapsed());
    let arch = run("dpkg", &["--print-architecture"]);
    let rpm_arch = run("uname", &["-m"]);
    let built = Built {
        deb: out.join(format!("linerate_{VERSION}_{}.deb", arch.trim())),
        tool_deb: out.join(format!("pscheduler-tool-linerate_{VERSION}_all.deb")),
        rpm: out.join(format!("linerate-{VERSION}-1.{}.rpm", rpm_arch.trim())),
        tool_rpm: out.join(format!("pscheduler-tool-linerate-{VERSION}-1.noarch.rpm")),
    };
    for p in [&built.deb, &built.tool_deb, &built.rpm, &built.tool_rpm] {
        assert!(p.is_file(), "no {}", p.display());
    }
    built
}

/// The man pages the binary writes (tests/completions.rs checks there is
/// one per subcommand).
fn man_pages() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let listed = run(
        env!("CARGO_BIN_EXE_linerate"),
        &["man", "--dir", dir.path().to_str().unwrap()],
    );
    let pages: Vec<String> = listed
        .lines()
        .map(|l| {
            Path::new(l)
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(pages.contains(&"linerate-blast.1".to_owned()), "{pages:?}");
    pages
}

/// Every file of the tree's docs/ (the documentation both packages of
/// linerate carry), relative to docs/.
fn docs_files() -> Vec<String> {
    let mut files = Vec::new();
    for sub in ["", "img"] {
        for e in std::fs::read_dir(tree().join("docs").join(sub)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            // The pages, their profiles and images (scripts/package's
            // list); the docs' example scripts stay in the source tree.
            let shipped = !sub.is_empty() || name.ends_with(".md") || name.ends_with(".toml");
            if e.file_type().unwrap().is_file() && shipped {
                files.push(if sub.is_empty() {
                    name
                } else {
                    format!("{sub}/{name}")
                });
            }
        }
    }
    files
}

fn set(items: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    items.into_iter().collect()
}

fn check_rpms(built: &Built, pages: &[String]) {
    let doc = "/usr/share/doc/linerate";
    let licences = "/usr/share/licenses/linerate";
    let want = set(["/usr/bin/linerate".to_owned()]
        .into_iter()
        .chain(pages.iter().map(|p| format!("/usr/share/man/man1/{p}.gz")))
        .chain(
            [
                "/usr/share/bash-completion/completions/linerate",
                "/usr/share/zsh/site-functions/_linerate",
                "/usr/share/fish/vendor_completions.d/linerate.fish",
            ]
            .map(String::from),
        )
        .chain([doc, &format!("{doc}/README.md"), &format!("{doc}/docs")].map(String::from))
        .chain([format!("{doc}/docs/img")])
        .chain(docs_files().iter().map(|f| format!("{doc}/docs/{f}")))
        .chain([licences.to_owned()])
        .chain(["LICENSE-MIT", "LICENSE-APACHE"].map(|f| format!("{licences}/{f}"))));
    let got = set(run("rpm", &["-qlp", built.rpm.to_str().unwrap()])
        .lines()
        .map(String::from));
    assert_eq!(got, want, "rpm -qlp {}", built.rpm.display());

    let tool_doc = "/usr/share/doc/pscheduler-tool-linerate";
    let tool_licences = "/usr/share/licenses/pscheduler-tool-linerate";
    let want = set([RPM_TOOL_DIR.to_owned()]
        .into_iter()
        .chain(METHODS.iter().map(|m| format!("{RPM_TOOL_DIR}/{m}")))
        .chain([tool_doc.to_owned(), format!("{tool_doc}/README.md")])
        .chain([tool_licences.to_owned()])
        .chain(["LICENSE-MIT", "LICENSE-APACHE"].map(|f| format!("{tool_licences}/{f}"))));
    let got = set(run("rpm", &["-qlp", built.tool_rpm.to_str().unwrap()])
        .lines()
        .map(String::from));
    assert_eq!(got, want, "rpm -qlp {}", built.tool_rpm.display());
    let requires = run(
        "rpm",
        &["-qp", "--requires", built.tool_rpm.to_str().unwrap()],
    );
    assert!(
        requires
            .lines()
            .any(|l| l == format!("linerate >= {VERSION}")),
        "{requires}"
    );
}

fn check_lintian(built: &Built) {
    let out = Command::new("lintian")
        .args(["--fail-on", "error,warning"])
        .arg(&built.deb)
        .arg(&built.tool_deb)
        .output()
        .expect("lintian");
    let said = String::from_utf8_lossy(&out.stdout);
    let tags: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("E:") || l.starts_with("W:"))
        .collect();
    assert!(
        out.status.success() && tags.is_empty(),
        "lintian: {said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn install(built: &Built) -> Installed {
    for p in PACKAGES {
        assert!(!dpkg_knows(p), "{p} is installed on this machine already");
    }
    assert!(
        !Path::new("/usr/bin/linerate").exists() && !Path::new(DEB_TOOL_DIR).exists(),
        "/usr/bin/linerate or {DEB_TOOL_DIR} exists outside the packages"
    );
    let guard = Installed;
    let out = Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .arg(&built.deb)
        .arg(&built.tool_deb)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .expect("apt-get install");
    assert!(
        out.status.success(),
        "apt-get install: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    guard
}

fn check_installed() {
    let version = run("/usr/bin/linerate", &["--version"]);
    assert_eq!(version.trim(), format!("linerate {VERSION}"));
    for (page, path) in [
        ("linerate", "/usr/share/man/man1/linerate.1.gz"),
        ("linerate-blast", "/usr/share/man/man1/linerate-blast.1.gz"),
        (
            "linerate-pscheduler-run",
            "/usr/share/man/man1/linerate-pscheduler-run.1.gz",
        ),
    ] {
        assert_eq!(run("man", &["-w", page]).trim(), path);
    }
    let bash = "/usr/share/bash-completion/completions/linerate";
    run("bash", &["-n", bash]);
    for f in [
        "/usr/share/zsh/vendor-completions/_linerate",
        "/usr/share/fish/vendor_completions.d/linerate.fish",
        "/usr/share/doc/linerate/copyright",
        "/usr/share/doc/linerate/docs/pscheduler.md",
        "/usr/share/doc/pscheduler-tool-linerate/copyright",
    ] {
        assert!(Path::new(f).is_file(), "{f} not installed");
    }
}

/// Runs the installed tool's METHOD with `input`, as pScheduler does (a
/// plain PATH); its JSON answer, which must have exited 0.
fn method(name: &str, input: &Value, config: &Path) -> Value {
    let mut child = Command::new(format!("{DEB_TOOL_DIR}/{name}"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LINERATE_PSCHEDULER_CONFIG", config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{DEB_TOOL_DIR}/{name}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    // enumerate reads nothing: it may have closed its input already.
    let _ = stdin.write_all(input.to_string().as_bytes());
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/pscheduler/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn check_methods() {
    // Each wrapper calls the installed binary by its path.
    for m in METHODS {
        let text = std::fs::read_to_string(format!("{DEB_TOOL_DIR}/{m}")).unwrap();
        assert_eq!(
            text,
            format!("#!/bin/sh\nexec /usr/bin/linerate pscheduler {m}\n")
        );
    }
    let conf = tempfile::NamedTempFile::new().unwrap();
    let port = support::free_port();
    std::fs::write(conf.path(), format!("server_port = {port}\n")).unwrap();
    let conf = conf.path();
    let e = method("enumerate", &json!({}), conf);
    assert_eq!(
        (&e["name"], &e["version"]),
        (&json!("linerate"), &json!(VERSION))
    );
    let mut run_input = fixture("run-throughput.json");
    run_input["test"]["spec"]["loopback"] = json!(true);
    run_input["test"]["spec"]["duration"] = json!("PT1S");
    run_input["participant-data"] = json!([{ "schema": 1 }]);
    let test = &run_input["test"];
    assert_eq!(method("can-run", test, conf), json!({ "can-run": true }));
    // Set-up 4 s + 1 s + the client's wait 3 s + the server's end 2 s.
    assert_eq!(
        method("duration", test, conf),
        json!({ "duration": "PT10S" })
    );
    let d = method("participant-data", &fixture("participant-data.json"), conf);
    assert_eq!((&d["schema"], &d["server_port"]), (&json!(3), &json!(port)));
    assert!(d["_auth"]["password"].is_string(), "{d}");
    let r = method("run", &run_input, conf);
    assert_eq!(r["succeeded"], json!(true), "{r}");
    let m = method(
        "merged-results",
        &json!({ "test": test, "results": [r] }),
        conf,
    );
    assert_eq!(m["succeeded"], json!(true), "{m}");
    let bits = m["summary"]["summary"]["throughput-bits"].as_f64();
    assert!(bits.is_some_and(|b| b > 0.0), "{m}");
}

fn remove_and_check() {
    let out = Installed::purge();
    assert!(
        out.status.success(),
        "apt-get remove --purge: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for p in PACKAGES {
        assert!(!dpkg_knows(p), "{p} still known to dpkg after the purge");
    }
    for f in [
        "/usr/bin/linerate",
        "/usr/share/man/man1/linerate.1.gz",
        "/usr/share/bash-completion/completions/linerate",
        "/usr/share/doc/linerate",
        "/usr/share/doc/pscheduler-tool-linerate",
        DEB_TOOL_DIR,
    ] {
        assert!(!Path::new(f).exists(), "{f} left after the purge");
    }
}

#[test]
fn packages_build_install_run_and_purge() {
    let tools = [
        "apt-get",
        "dpkg-deb",
        "dpkg-shlibdeps",
        "rpmbuild",
        "rpm",
        "lintian",
        "man",
    ];
    let mut reqs = vec![require_root()];
    reqs.extend(tools.iter().map(|t| require_program(t)));
    if should_skip("packages", &reqs) {
        return;
    }
    let began = Instant::now();
    let out = tempfile::tempdir().unwrap();
    let built = build(out.path());
    check_rpms(&built, &man_pages());
    check_lintian(&built);
    let guard = install(&built);
    check_installed();
    check_methods();
    remove_and_check();
    drop(guard);
    eprintln!("packages: the whole test took {:?}", began.elapsed());
}

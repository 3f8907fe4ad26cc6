//! The packet-mode examples in README.md and in every .md file under docs/
//! run as written against `linerate lab up`: each code block marked
//! `<!-- example: lab up ARGS -->` gets a lab of its own (`lab up --prefix P
//! ARGS`; the commands' `lr-a`, `lr-b`, `lr-gen`, `lr-dut` become `P-a` …
//! and nothing else changes), then every `$ ` line of the block runs in
//! order through bash with this build's `linerate` first on PATH (`\`
//! continues a line; a trailing `&` runs it in the background, the next line
//! starting once it says it is ready), and every command must succeed
//! (from a directory where `docs/` is the repository's). The
//! lab is deleted after each block, also when it fails. A failing example is
//! reported as `FILE line N`.

use linerate_testkit::{require_program, require_root, should_skip};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// One marked block: where it is, the lab's arguments and its commands.
#[derive(Debug)]
struct Example {
    /// The file, relative to the repository's root (`README.md`,
    /// `docs/rr.md`).
    file: String,
    line: usize,
    lab: Vec<String>,
    commands: Vec<String>,
}

impl Example {
    /// `FILE line N`.
    fn at(&self) -> String {
        format!("{} line {}", self.file, self.line)
    }
}

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every .md file under `dir`, recursively (none if it does not exist).
fn md_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            md_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// The files whose marked examples run, relative to the root: README.md,
/// then every .md file under docs/, sorted.
fn example_files() -> Vec<String> {
    let root = root();
    let mut docs = Vec::new();
    md_files(&root.join("docs"), &mut docs);
    let mut docs: Vec<String> = docs
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&root).unwrap();
            rel.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect();
    docs.sort();
    let mut files = vec!["README.md".to_string()];
    files.extend(docs);
    files
}

/// The marked examples of README.md and docs/, in file order.
fn all_examples() -> Vec<Example> {
    let root = root();
    let mut all = Vec::new();
    for file in example_files() {
        let text =
            std::fs::read_to_string(root.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        all.extend(examples(&file, &text));
    }
    all
}

/// The marked examples of one Markdown file's text.
fn examples(file: &str, text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        let Some(args) = l
            .strip_prefix("<!-- example: lab up")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            i += 1;
            continue;
        };
        let line = i + 1;
        i += 1;
        assert!(
            lines.get(i).is_some_and(|l| l.starts_with("```")),
            "{file} line {line}: the marker must be followed by a code block"
        );
        i += 1;
        let mut commands = Vec::new();
        while i < lines.len() && !lines[i].starts_with("```") {
            if let Some(c) = lines[i].strip_prefix("$ ")
                && !c.starts_with('#')
            {
                let mut cmd = c.trim_end().to_string();
                while cmd.ends_with('\\') && i + 1 < lines.len() {
                    cmd.pop();
                    i += 1;
                    cmd.push(' ');
                    cmd.push_str(lines[i].trim());
                }
                // A comment after the command is the shell's business.
                commands.push(cmd);
            }
            i += 1;
        }
        out.push(Example {
            file: file.to_string(),
            line,
            lab: args.split_whitespace().map(str::to_string).collect(),
            commands,
        });
    }
    out
}

/// `lr-a` -> `P-a` and so on, as whole words.
fn rename(cmd: &str, prefix: &str) -> String {
    let mut s = cmd.to_string();
    for role in ["gen", "dut", "a", "b"] {
        let from = format!("lr-{role}");
        let to = format!("{prefix}-{role}");
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(at) = rest.find(&from) {
            let before = rest[..at].chars().last();
            let after = rest[at + from.len()..].chars().next();
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '-');
            out.push_str(&rest[..at]);
            out.push_str(if word(before) || word(after) {
                &from
            } else {
                &to
            });
            rest = &rest[at + from.len()..];
        }
        out.push_str(rest);
        s = out;
    }
    s
}

struct Lab(String);

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["lab", "down", "--prefix", &self.0])
            .output();
    }
}

/// A command and its output files.
struct Running {
    cmd: String,
    child: Child,
    out: std::path::PathBuf,
}

impl Running {
    fn start(cmd: &str, dir: &std::path::Path, path: &str, n: usize) -> Running {
        let out = dir.join(format!("cmd{n}.out"));
        let f = std::fs::File::create(&out).unwrap();
        let child = Command::new("bash")
            .args(["-c", cmd])
            .current_dir(dir)
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap();
        Running {
            cmd: cmd.to_string(),
            child,
            out,
        }
    }

    fn output(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.out) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Waits for the end (killed by PID past the deadline); the output,
    /// or why it failed.
    fn finish(mut self, deadline: Duration) -> Result<String, String> {
        let until = Instant::now() + deadline;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let out = self.output();
                return if st.success() {
                    Ok(out)
                } else {
                    Err(format!("`{}` failed ({st}):\n{out}", self.cmd))
                };
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(format!(
                    "`{}` still running after {deadline:?}:\n{}",
                    self.cmd,
                    self.output()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn run_example(ex: &Example, prefix: &str) -> Result<Vec<(String, String)>, String> {
    let mut up = vec!["lab", "up", "--prefix", prefix];
    up.extend(ex.lab.iter().map(String::as_str));
    let o = Command::new(BIN).args(&up).output().unwrap();
    let _lab = Lab(prefix.to_string());
    if !o.status.success() {
        return Err(format!(
            "lab up {:?}: {}",
            ex.lab,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    // `docs/…` in a command is the repository's (the profiles the docs
    // send), as when the commands run from the repository's root.
    std::os::unix::fs::symlink(root().join("docs"), dir.path().join("docs")).unwrap();
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    std::os::unix::fs::symlink(BIN, bin_dir.join("linerate")).unwrap();
    // `python3` is one with snappi (the agent's example drives it).
    if let Ok(py) = linerate_testkit::snappi_python() {
        let wrapper = bin_dir.join("python3");
        std::fs::write(
            &wrapper,
            format!("#!/bin/sh\nexec '{}' \"$@\"\n", py.display()),
        )
        .unwrap();
        std::fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
    }
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut background = Vec::new();
    let mut outputs = Vec::new();
    for (n, c) in ex.commands.iter().enumerate() {
        let cmd = rename(c, prefix);
        match cmd.trim_end().strip_suffix('&') {
            Some(bg) => {
                let r = Running::start(bg, dir.path(), &path, n);
                // Ready when it says so (sink, fwd, servers), or after 5 s.
                let until = Instant::now() + Duration::from_secs(5);
                while Instant::now() < until {
                    let out = r.output();
                    if ["receiving on", "listening", "forwarding"]
                        .iter()
                        .any(|w| out.contains(w))
                    {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                background.push(r);
            }
            None => {
                let r = Running::start(&cmd, dir.path(), &path, n);
                outputs.push((cmd.clone(), r.finish(Duration::from_secs(240))?));
            }
        }
    }
    for r in background {
        let cmd = r.cmd.clone();
        outputs.push((cmd, r.finish(Duration::from_secs(60))?));
    }
    Ok(outputs)
}

#[test]
fn readme_packet_examples_run_against_the_lab() {
    if should_skip(
        "readme_packet_examples_run_against_the_lab",
        &[
            require_root(),
            require_program("ip"),
            require_program("tc"),
            require_program("ethtool"),
            // docs/agent.md's first flow is a snappi script.
            linerate_testkit::snappi_python().map(|_| ()),
        ],
    ) {
        return;
    }
    let all = all_examples();
    // blast/sink (3), fwd, rr, rfc2544 at least.
    assert!(all.len() >= 6, "{} marked examples", all.len());
    let show = std::env::var_os("LINERATE_README_SHOW").is_some();
    // A docs writer's shortcut: LINERATE_README_ONLY=docs/agent.md runs
    // that file's examples alone (CI sets nothing: all run).
    let only = std::env::var("LINERATE_README_ONLY").ok();
    for (i, ex) in all.iter().enumerate() {
        if only.as_ref().is_some_and(|f| *f != ex.file) {
            continue;
        }
        assert!(!ex.commands.is_empty(), "{}: no commands", ex.at());
        let prefix = format!("lrt-{}-r{i}", std::process::id());
        match run_example(ex, &prefix) {
            Ok(outs) => {
                if show {
                    for (c, o) in outs {
                        println!("$ {c}\n{o}");
                    }
                }
            }
            Err(e) => panic!("example at {}: {e}", ex.at()),
        }
    }
}

#[test]
fn examples_are_found_and_renamed_as_words() {
    let md = "text\n<!-- example: lab up --topology dut -->\n```\n$ ip netns exec lr-gen linerate blast --iface ga \\\n      --count 5 &\noutput line\n$ # a comment\n$ lr-ab lr-a\n```\n";
    let ex = examples("x.md", md);
    assert_eq!(ex.len(), 1);
    assert_eq!(ex[0].at(), "x.md line 2");
    assert_eq!(ex[0].lab, ["--topology", "dut"]);
    assert_eq!(
        ex[0].commands,
        [
            "ip netns exec lr-gen linerate blast --iface ga  --count 5 &",
            "lr-ab lr-a"
        ]
    );
    assert_eq!(rename(&ex[0].commands[1], "lrt-1-r0"), "lr-ab lrt-1-r0-a");
    assert_eq!(rename("lr-gen x", "p"), "p-gen x");
}

/// Moving documentation must not drop the examples CI runs: README.md and
/// docs/ hold at least 6 marked examples between them (blast/sink, fwd, rr,
/// rfc2544), each with commands. No root needed.
#[test]
fn marked_examples_are_found_in_readme_and_docs() {
    let files = example_files();
    assert_eq!(files[0], "README.md");
    assert!(
        files.iter().any(|f| f.starts_with("docs/")),
        "no .md file under docs/: {files:?}"
    );
    let all = all_examples();
    assert!(all.len() >= 6, "{} marked examples in {files:?}", all.len());
    for ex in &all {
        assert!(!ex.commands.is_empty(), "{}: no commands", ex.at());
        // linerate itself, or a script of docs/ that runs it.
        assert!(
            ex.commands
                .iter()
                .any(|c| c.contains("linerate ") || c.contains("docs/")),
            "{}: no linerate command",
            ex.at()
        );
    }
}

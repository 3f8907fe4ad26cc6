//! ARCHITECTURE.md's measures, checked on the tree: the code map names
//! files that exist, the binary stays glue (its size may only fall), no
//! crate keeps mutable state in a `static` (DPDK's EAL and plotters' font
//! registry excepted, each said why), and the import circles between files
//! are exactly the ones listed here (a new one fails; one taken away must
//! be taken off the list, so the list stays true).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// A file's text before its unit tests, without `//` comments.
fn code(p: &Path) -> String {
    let text = std::fs::read_to_string(p).unwrap();
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => &text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a code-map row names (its first cell's backticked words),
/// each with the places it may be relative to: a bare name is in the
/// directory of the row's first path, or of its crate, or of its crate's
/// `src/`, or of the tree's root.
fn row_paths(cell: &str) -> Vec<Vec<String>> {
    let words: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
    let (mut dir, mut krate) = (String::new(), String::new());
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let w = w.trim();
        if i == 0 || w.starts_with("linerate") {
            dir = w[..w.rfind('/').map_or(0, |j| j + 1)].to_string();
            krate = w.split('/').next().unwrap_or_default().to_string();
        }
        out.push(vec![
            w.to_string(),
            format!("{dir}{w}"),
            format!("{krate}/{w}"),
            format!("{krate}/src/{w}"),
        ]);
    }
    out
}

/// Whether a code-map path is there: under `crates/`, or from the root;
/// `*` and `{a,b}` stand for files of the directory.
fn exists(p: &str) -> bool {
    let root = root();
    if p.contains('*') || p.contains('{') {
        let dir = &p[..p.rfind('/').map_or(0, |i| i + 1)];
        return root.join("crates").join(dir).is_dir() || root.join(dir).is_dir();
    }
    root.join("crates").join(p).exists() || root.join(p).exists()
}

#[test]
fn every_file_the_code_map_names_exists() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    let mut named = 0;
    for line in map.lines().filter(|l| l.starts_with("| `")) {
        let cell = line.split('|').nth(1).unwrap();
        for places in row_paths(cell) {
            named += 1;
            if !places.iter().any(|p| exists(p)) {
                missing.push(places[0].clone());
            }
        }
    }
    assert!(named > 150, "the code map was read ({named} paths)");
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names files that are not there: {missing:?}"
    );
}

/// The binary's lines, tests included. It may only shrink: lower it when
/// code leaves the binary (issue 39 asks for 3,500).
const BINARY_LINES_MAX: usize = 3_476;

#[test]
fn the_binary_does_not_grow() {
    let mut files = Vec::new();
    rust_files(&root().join("crates/linerate/src"), &mut files);
    let lines: usize = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
        .sum();
    assert!(
        lines <= BINARY_LINES_MAX,
        "the binary has {lines} lines, more than {BINARY_LINES_MAX}: put the new code in a library crate"
    );
}

/// `static`s that hold state, allowed where the state is another's.
const STATE_ALLOWED: &[(&str, &str)] = &[
    (
        "linerate-dpdk/src/ffi.rs",
        "DPDK's EAL is initialised once a process, and its ports with it",
    ),
    (
        "linerate-plot/src/draw.rs",
        "plotters keeps its fonts in a registry of its own: registered once",
    ),
];

#[test]
fn no_mutable_state_in_statics() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    // A `LazyLock` built by its own closure is a constant made late, not
    // state; a `OnceLock` is set from outside, a `Once` remembers.
    let kinds = ["Mutex<", "RwLock<", "Atomic", "Once", "Cell<"];
    let mut found = Vec::new();
    for p in files.iter().filter(|p| {
        let s = p.to_string_lossy();
        s.contains("/src/") && !s.contains("linerate-testkit")
    }) {
        let rel = p.strip_prefix(root().join("crates")).unwrap();
        let rel = rel.to_string_lossy().to_string();
        if STATE_ALLOWED.iter().any(|(f, _)| *f == rel) {
            continue;
        }
        for (n, l) in code(p).lines().enumerate() {
            let l = l.trim();
            let is_static = l.starts_with("static ") || l.starts_with("pub static ");
            if (l.contains("static mut ") && !l.contains("&'static mut"))
                || l.contains("thread_local!")
                || (is_static && kinds.iter().any(|k| l.contains(k)))
            {
                found.push(format!("{rel}:{}: {l}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "state in statics (hand it down instead): {found:#?}"
    );
}

/// A crate's modules by path (`["cmd", "out"]`) and their files.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap().with_extension("");
            let mut m: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            if matches!(m.last().map(String::as_str), Some("lib" | "main" | "mod")) {
                m.pop();
            }
            (m, f)
        })
        .collect()
}

/// Which files each file refers to by `crate::`, `super::` or `self::`
/// paths (the deepest module a path names).
fn references(
    mods: &BTreeMap<Vec<String>, PathBuf>,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut edges = BTreeMap::new();
    for (m, f) in mods {
        let text = code(f);
        let mut to = BTreeSet::new();
        for (kw, base) in [
            ("crate::", Vec::new()),
            ("super::", m[..m.len().saturating_sub(1)].to_vec()),
            ("self::", m.clone()),
        ] {
            for (i, _) in text.match_indices(kw) {
                let before = text[..i].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let path: Vec<String> = text[i + kw.len()..]
                    .split("::")
                    .map_while(|seg| {
                        let id: String = seg
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        (!id.is_empty() && id.len() == seg.len()).then_some(id)
                    })
                    .collect();
                // The last word is a name, not a module, unless a module
                // of that name exists.
                let mut full = base.clone();
                full.extend(path.iter().cloned());
                let first = text[i + kw.len()..]
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default()
                    .to_string();
                if path.is_empty() {
                    full.push(first);
                }
                let target = (0..=full.len())
                    .rev()
                    .map(|n| full[..n].to_vec())
                    .find(|p| mods.contains_key(p));
                if let Some(t) = target
                    && &t != m
                {
                    to.insert(t);
                }
            }
        }
        edges.insert(m.clone(), to);
    }
    edges
}

/// The groups of files that refer to each other round (Tarjan's SCCs of
/// more than one file), each sorted, as paths under `crates/`.
fn circles(crate_dir: &str) -> Vec<Vec<String>> {
    let src = root().join("crates").join(crate_dir).join("src");
    let mods = modules(&src);
    let edges = references(&mods);
    let names: Vec<&Vec<String>> = edges.keys().collect();
    let at: BTreeMap<&Vec<String>, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            edges[*n]
                .iter()
                .filter_map(|t| at.get(t).copied())
                .collect()
        })
        .collect();
    let mut t = Tarjan {
        adj: &adj,
        index: vec![None; adj.len()],
        low: vec![0; adj.len()],
        stack: Vec::new(),
        on: vec![false; adj.len()],
        next: 0,
        out: Vec::new(),
    };
    for v in 0..adj.len() {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    let mut out: Vec<Vec<String>> = t
        .out
        .into_iter()
        .map(|c| {
            let mut c: Vec<String> = c
                .into_iter()
                .map(|i| {
                    let f = &mods[names[i]];
                    f.strip_prefix(root().join("crates"))
                        .unwrap()
                        .to_string_lossy()
                        .to_string()
                })
                .collect();
            c.sort();
            c
        })
        .collect();
    out.sort();
    out
}

struct Tarjan<'a> {
    adj: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    stack: Vec<usize>,
    on: Vec<bool>,
    next: usize,
    out: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.next);
        self.low[v] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on[v] = true;
        for &w in &self.adj[v] {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(iw) if self.on[w] => self.low[v] = self.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut c = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                self.out.push(c);
            }
        }
    }
}

/// The import circles left (issue 39: none). Take one off when it is gone.
const KNOWN_CIRCLES: &[&[&str]] = &[];

#[test]
fn the_import_circles_are_the_known_ones() {
    let mut crates: Vec<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("src").is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    crates.sort();
    let found: Vec<Vec<String>> = crates.iter().flat_map(|c| circles(c)).collect();
    let known: Vec<Vec<String>> = KNOWN_CIRCLES
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(
        found, known,
        "import circles between files (a group refers to each other round)"
    );
}

#[test]
fn the_circle_finder_finds_a_circle() {
    // Two files that refer to each other, and one that only refers.
    let dir = std::env::temp_dir().join(format!("lr-arch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a; mod b; mod c;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "use crate::b::Thing;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "fn f() { super::a::g() }\n").unwrap();
    std::fs::write(dir.join("c.rs"), "use crate::a::G; // crate::b::X\n").unwrap();
    let mods = modules(&dir);
    let edges = references(&mods);
    let a = vec!["a".to_string()];
    let b = vec!["b".to_string()];
    let c = vec!["c".to_string()];
    assert_eq!(edges[&a], BTreeSet::from([b.clone()]));
    assert_eq!(edges[&b], BTreeSet::from([a.clone()]));
    assert_eq!(
        edges[&c],
        BTreeSet::from([a]),
        "a comment is not a reference"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

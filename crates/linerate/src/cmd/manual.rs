//! `linerate completions SHELL` and `linerate man`: the shell completions
//! and the man pages, generated at run time from the clap definitions the
//! command line is parsed with (clap_complete, clap_mangen). Nothing
//! generated is kept in the tree; `scripts/package` runs these to lay out
//! the packages.

use crate::output::Console;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// The shells completions are written for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// `linerate completions SHELL`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell whose completion script to print.
    pub shell: Shell,
}

/// `linerate man [--dir DIR] [SUBCOMMAND…]`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write every page (linerate.1, then linerate-SUBCOMMAND.1 for each
    /// subcommand, nested ones too: linerate-rr-client.1) into DIR, which
    /// must exist, and print their paths.
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    pub dir: Option<PathBuf>,
    /// Print the page of this subcommand (`linerate man rr client`);
    /// none: linerate(1).
    pub subcommand: Vec<String>,
}

/// Prints the completion script for `a.shell`.
pub fn completions(a: &CompletionsArgs, mut cmd: clap::Command, c: &Console) -> anyhow::Result<u8> {
    let shell = match a.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    let name = cmd.get_name().to_owned();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    crate::say_raw!(c, "{}", String::from_utf8_lossy(&out));
    Ok(0)
}

/// Every page of `cmd`, named as man looks them up (`linerate-rr-client`),
/// each with its own source line (`linerate 0.1.0`).
fn pages(cmd: clap::Command) -> Vec<clap_mangen::Man> {
    fn walk(cmd: &clap::Command, source: &str, out: &mut Vec<clap_mangen::Man>) {
        out.push(
            clap_mangen::Man::new(cmd.clone())
                .source(source)
                .manual("linerate manual"),
        );
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, source, out);
        }
    }
    let source = format!("linerate {}", env!("CARGO_PKG_VERSION"));
    let mut cmd = cmd.disable_help_subcommand(true);
    // Names every subcommand by its path (display name linerate-rr-client).
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, &source, &mut out);
    out
}

/// Writes every page into `a.dir`, or prints one page.
pub fn man(a: &ManArgs, cmd: clap::Command, c: &Console) -> anyhow::Result<u8> {
    let pages = pages(cmd);
    if let Some(dir) = &a.dir {
        return write_pages(&pages, dir, c);
    }
    let want = std::iter::once("linerate")
        .chain(a.subcommand.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-");
    let page = pages
        .iter()
        .find(|p| p.get_filename() == format!("{want}.1"))
        .with_context(|| format!("no such subcommand: {}", a.subcommand.join(" ")))?;
    let mut out = Vec::new();
    page.render(&mut out)?;
    crate::say_raw!(c, "{}", String::from_utf8_lossy(&out));
    Ok(0)
}

/// Writes each page into `dir` as its file name says (a page there
/// already is replaced; never written through a symbolic link).
fn write_pages(pages: &[clap_mangen::Man], dir: &Path, c: &Console) -> anyhow::Result<u8> {
    use std::io::Write;
    for page in pages {
        let path = dir.join(page.get_filename());
        let mut roff = Vec::new();
        page.render(&mut roff)?;
        crate::output::create_new(&path, true, "man --dir")?
            .write_all(&roff)
            .with_context(|| format!("man --dir {}", path.display()))?;
        crate::say!(c, "{}", path.display());
    }
    Ok(0)
}

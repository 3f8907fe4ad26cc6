//! Which files a list of results names: files as given, directories
//! read for their result files.

use crate::input::ReadError;

/// The result files of `paths`: files as given, directories' `.json`,
/// `.jsonl` and `.ndjson` files in name order.
pub fn expand(paths: &[std::path::PathBuf]) -> Result<Vec<std::path::PathBuf>, ReadError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|source| ReadError::Io {
                path: p.display().to_string(),
                source,
            })?;
            let mut files: Vec<_> = rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| {
                    f.is_file()
                        && matches!(
                            f.extension().and_then(|e| e.to_str()),
                            Some("json" | "jsonl" | "ndjson")
                        )
                })
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(ReadError::Empty {
                    path: format!("{} (no .json, .jsonl or .ndjson file in it)", p.display()),
                });
            }
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// The results `paths` name (files, or directories of them), each read (a
/// damaged file read as far as it goes).
pub fn load_all(paths: &[std::path::PathBuf]) -> Result<Vec<crate::Loaded>, ReadError> {
    expand(paths)?
        .iter()
        .map(|p| crate::Loaded::read(p))
        .collect()
}

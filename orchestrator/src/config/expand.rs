//! Paths in a hunt file: a leading `~/` and `${VAR}` / `${VAR:-default}`, and whether a
//! directory can be made where one is named.

use std::path::Path;

/// Expands a leading `~/` and `${VAR}` / `${VAR:-default}` in a path.
pub(super) fn expand(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let s = if let Some(rest) = raw.strip_prefix("~/") {
        let home = std::env::var("HOME").map_err(|_| "uses ~/ but HOME is not set".to_owned())?;
        out.push_str(&home);
        out.push('/');
        rest
    } else {
        raw
    };
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("{raw:?} has an unclosed ${{"))?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (std::env::var(name), default) {
            (Ok(v), _) if !v.is_empty() => out.push_str(&v),
            (_, Some(d)) => out.push_str(&expand(d)?),
            _ => return Err(format!("{raw:?} uses ${{{name}}}, which is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The first existing part of `dir` (itself or a parent) when it is not a directory: the
/// place `create_dir_all(dir)` would fail.
pub(super) fn non_directory_ancestor(dir: &Path) -> Option<&Path> {
    dir.ancestors().find(|a| a.exists()).filter(|a| !a.is_dir())
}

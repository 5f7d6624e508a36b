//! The library's top-level modules depend on each other one way (docs/layout.md): read from
//! the source, every `crate::<module>` a module names outside its tests and comments is an
//! edge, and the graph has no cycle. A cycle is reported with the file and line of each edge
//! in it, so that the fix (move a type down, or hand a function in) starts from the right
//! place. `cargo test -p firstbad --lib layering -- --nocapture` prints the layers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Edges between top-level modules: `from -> to -> where` (the first `file:line` naming it).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The top-level module a source file belongs to, or `None` for the crate roots and the
/// binary's `cli/`, which sit above everything.
fn top(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "cli")).then(|| name.to_owned())
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the source tree is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `crate::<ident>` in `line`.
fn named(line: &str) -> impl Iterator<Item = &str> {
    line.match_indices("crate::").filter_map(move |(i, _)| {
        // `firstbad_crate::` or `some_crate::` are not this crate.
        let before = line[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let rest = &line[i + "crate::".len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        (end > 0).then(|| &rest[..end])
    })
}

/// The files that are a module's tests: declared `#[cfg(test)] mod name;` in their parent
/// (`tests.rs`, `fuzz.rs`, this one).
fn test_only(paths: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for path in paths {
        let text = std::fs::read_to_string(path).expect("a source file is readable");
        let dir = match path.file_stem().and_then(|s| s.to_str()) {
            Some("mod" | "lib" | "main") => path.parent().expect("in a directory").to_owned(),
            _ => path.with_extension(""),
        };
        let mut after_cfg_test = false;
        for line in text.lines().map(str::trim) {
            if let Some(name) = line
                .strip_prefix("mod ")
                .and_then(|l| l.strip_suffix(';'))
                .filter(|_| after_cfg_test)
            {
                out.insert(dir.join(format!("{name}.rs")));
                out.insert(dir.join(name).join("mod.rs"));
            }
            after_cfg_test = line == "#[cfg(test)]";
        }
    }
    out
}

fn graph(src: &Path) -> Graph {
    let mut paths = Vec::new();
    files(src, &mut paths);
    let tests = test_only(&paths);
    paths.retain(|p| !tests.contains(p));
    let modules: BTreeSet<String> = paths
        .iter()
        .filter_map(|p| top(p.strip_prefix(src).ok()?))
        .collect();
    let mut g = Graph::new();
    for path in &paths {
        let rel = path.strip_prefix(src).expect("under src");
        let Some(from) = top(rel) else { continue };
        let text = std::fs::read_to_string(path).expect("a source file is readable");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            // A file's tests (its `#[cfg(test)]` module, last by the house style) may reach
            // anywhere: they are not the module's dependencies.
            if code.starts_with("#[cfg(test)]") {
                break;
            }
            if code.starts_with("//") {
                continue;
            }
            for to in named(code) {
                if to != from && modules.contains(to) {
                    g.entry(from.clone())
                        .or_default()
                        .entry(to.to_owned())
                        .or_insert_with(|| format!("{}:{}", rel.display(), n + 1));
                }
            }
        }
    }
    for m in modules {
        g.entry(m).or_default();
    }
    g
}

/// The modules in layers, each depending only on layers before it; or a cycle, as the
/// modules on it in order.
fn layers(g: &Graph) -> Result<Vec<Vec<String>>, Vec<String>> {
    let mut placed: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    while placed.len() < g.len() {
        let layer: Vec<String> = g
            .iter()
            .filter(|(m, deps)| {
                !placed.contains(m.as_str()) && deps.keys().all(|d| placed.contains(d.as_str()))
            })
            .map(|(m, _)| m.clone())
            .collect();
        if layer.is_empty() {
            return Err(cycle(g, &placed));
        }
        placed.extend(g.keys().filter(|m| layer.contains(m)).map(String::as_str));
        out.push(layer);
    }
    Ok(out)
}

/// A cycle among the modules not yet placed: walk from any of them along unplaced edges
/// until a module repeats.
fn cycle(g: &Graph, placed: &BTreeSet<&str>) -> Vec<String> {
    let start = g
        .keys()
        .find(|m| !placed.contains(m.as_str()))
        .expect("a module left");
    let mut path = vec![start.clone()];
    loop {
        let here = path.last().expect("not empty");
        let next = g[here]
            .keys()
            .find(|d| !placed.contains(d.as_str()))
            .expect("an unplaced module depends on an unplaced one");
        if let Some(i) = path.iter().position(|m| m == next) {
            let mut c = path.split_off(i);
            c.push(next.clone());
            return c;
        }
        path.push(next.clone());
    }
}

#[test]
fn the_top_level_modules_depend_on_each_other_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(
        g.contains_key("hunt") && g["exec"].contains_key("hunt"),
        "{g:?}"
    );
    match layers(&g) {
        Ok(layers) => {
            for (i, l) in layers.iter().enumerate() {
                eprintln!("layer {i}: {}", l.join(", "));
            }
        }
        Err(c) => {
            let edges: Vec<String> = c
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], g[&w[0]][&w[1]]))
                .collect();
            panic!(
                "the modules form a cycle: {}\n{}",
                c.join(" -> "),
                edges.join("\n")
            );
        }
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    let mut g = Graph::new();
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into())
            .or_default()
            .insert(b.into(), format!("{a}.rs:1"));
        g.entry(b.into()).or_default();
    };
    edge(&mut g, "hunt", "journal");
    edge(&mut g, "exec", "hunt");
    assert_eq!(
        layers(&g),
        Ok(vec![
            vec!["journal".into()],
            vec!["hunt".into()],
            vec!["exec".into()]
        ])
    );
    edge(&mut g, "hunt", "exec");
    assert_eq!(
        layers(&g),
        Err(vec!["exec".into(), "hunt".into(), "exec".into()])
    );
    assert_eq!(
        named("use crate::hunt::x; my_crate::no; (crate::exec::y)").collect::<Vec<_>>(),
        ["hunt", "exec"]
    );
}

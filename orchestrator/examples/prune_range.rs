//! How many commits of a range pruning leaves out (issue 35), through the product's code
//! (`firstbad::inputs`, `History::unchanged_links`), and how long it takes.
//!
//! ```text
//! cargo run --release -p firstbad --example prune_range -- REPO GOOD BAD INPUTS...
//! ```
//!
//! Each INPUTS is a cached kernel's `inputs` file (`~/.cache/firstbad/builds/kernels/<commit>-
//! <key>-r5/inputs`), or a build directory and its source tree as `BUILD_DIR:SRC` (the
//! `.cmd` files Kbuild left there are read as the builder reads them). Their union is the set
//! of inputs, as a hunt takes its two endpoints'. Prints the range's size, the commits left
//! out (against their first parent), the reasons by kind, and the time of each part.

use firstbad::history::History;
use firstbad::inputs::{self, BuildInputs};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [repo, good, bad, sources @ ..] = &args[..] else {
        eprintln!("usage: prune_range REPO GOOD BAD INPUTS... (an inputs file or BUILD_DIR:SRC)");
        std::process::exit(2);
    };
    let started = Instant::now();
    let mut all: Option<BuildInputs> = None;
    for s in sources {
        let one = match s.split_once(':') {
            Some((build, src)) => {
                let src = std::fs::canonicalize(src).expect("source tree");
                inputs::read_build_dir(Path::new(build), &src).expect("read .cmd files")
            }
            None => inputs::read(Path::new(s)).expect("an inputs file"),
        };
        all = Some(match all {
            Some(a) => a.union(one),
            None => one,
        });
    }
    let all = all.unwrap_or_default();
    let read_s = started.elapsed().as_secs_f64();
    let history = History::open(Path::new(repo)).expect("open repo");
    let good = history.resolve(good).expect("good");
    let bad = history.resolve(bad).expect("bad");
    let dag = history.load_range(&bad, &[good.as_str()]).expect("range");
    let started = Instant::now();
    let links = history
        .unchanged_links(&bad, &[good], false, &all)
        .expect("prune");
    let prune_s = started.elapsed().as_secs_f64();
    let firsts: Vec<_> = links.iter().filter(|u| u.nth == 0).collect();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for u in &firsts {
        let mut k: Vec<&str> = u.files.iter().map(|(_, why)| why.as_str()).collect();
        k.sort_unstable();
        k.dedup();
        let key = if k.is_empty() {
            "changes no file".to_owned()
        } else {
            k.join(" + ")
        };
        *kinds.entry(key).or_default() += 1;
    }
    println!(
        "range: {} commits; inputs: {} files{}{}{}; left out: {} ({:.1}%)",
        dag.len(),
        all.files.len(),
        if all.all_headers {
            ", every header"
        } else {
            ""
        },
        if all.kconfig_read {
            ", the Kconfig files read"
        } else {
            ""
        },
        all.arch
            .as_deref()
            .map(|a| format!(", arch/{a}"))
            .unwrap_or_default(),
        firsts.len(),
        100.0 * firsts.len() as f64 / dag.len().max(1) as f64
    );
    for (k, n) in &kinds {
        println!("  {n:6}  {k}");
    }
    println!("time: inputs read {read_s:.2} s, range pruned {prune_s:.2} s");
    if std::env::var_os("PRUNE_LIST").is_some() {
        for u in firsts {
            println!("{} {}", &u.commit[..12], u.reason());
        }
    }
}

//! Coarse to fine on real parts (issue 22 item 3): kernels built from the demo tree and
//! exported as directories (a bzImage each) are the candidates of a prebuilt hunt, whose
//! `[chain]` maps them to their revisions; once the first bad kernel is found and confirmed,
//! the same `firstbad run` bisects the demo tree between its revision and the last good
//! one's, in the same journal (every event marked with its stage), and a `kill -9` in the
//! source stage resumes there. Debian's own kernel history is not available here, so the
//! exported kernels stand in for distribution kernels.
//!
//! The exported kernels sit near the culprit on the first-parent line: the first commit after
//! the build fix, the culprit's parent and the second commit after the culprit. The source
//! stage then bisects three commits, not half the demo's range (issue 38: the suite's time),
//! and every kernel is one tests/watch.rs builds for its nights, shared through the build cache.

mod common;

use common::*;
use rusqlite::Connection;
use std::path::Path;

/// Each event's stage, kind and commit, in order.
fn staged_events(state: &Path) -> Vec<(String, String, Option<String>)> {
    let conn = Connection::open(state.join("journal.sqlite")).unwrap();
    let mut st = conn
        .prepare("SELECT stage, kind, commit_id FROM events ORDER BY seq")
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

#[test]
fn exported_demo_kernels_then_the_source_between_them_in_one_journal_across_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let line = first_parent_line();
    let at = |c: &str| position(&line, c);
    let culprit = commit_by_subject(&demo_fact("culprit_subject"));
    let fix = commit_by_subject(&demo_fact("fix_subject"));
    let (ic, ifix) = (at(&culprit), at(&fix));
    assert!(
        ifix + 2 < ic && ic + 2 < line.len(),
        "the demo tree's shape: the fix, two commits, the culprit, two more"
    );
    // Every kernel builds (after the fix); the culprit lies between the middle one and the last.
    let (good, mid, bad) = (
        line[ifix + 1].clone(),
        line[ic - 1].clone(),
        line[ic + 2].clone(),
    );

    // Export each kernel as a directory holding its bzImage, as built by firstbad itself.
    let source_hunt = dir.path().join("source.toml");
    std::fs::write(
        &source_hunt,
        format!(
            "[hunt]\nname = \"export\"\nrepo = \"{}\"\ngood = \"demo-good\"\nbad = \"demo-bad\"\n\
             state_dir = \"{}\"\n\n{}",
            demo_tree().display(),
            dir.path().join("export-state").display(),
            kernel_tables()
        ),
    )
    .unwrap();
    let names = ["k-good", "k-mid", "k-bad"];
    for (name, commit) in names.iter().zip([&good, &mid, &bad]) {
        // Built, not booted: the hunt below boots them.
        let build = build_only(&source_hunt, commit);
        let image = build["image"].as_str().expect("an image path");
        std::fs::create_dir(dir.path().join(name)).unwrap();
        std::fs::copy(image, dir.path().join(name).join("bzImage")).unwrap();
    }

    let state = dir.path().join("state");
    let tables = kernel_tables();
    let (build, rest) = tables.split_once("\n[[hosts]]").unwrap();
    let config = build.lines().find(|l| l.starts_with("config = ")).unwrap();
    let hunt = dir.path().join("chain.toml");
    std::fs::write(
        &hunt,
        format!(
            "[hunt]\nname = \"chain\"\nstate_dir = \"{state}\"\n\n\
             [build]\nkind = \"prebuilt\"\nkernels = [\"./k-good\", \"./k-mid\", \"./k-bad\"]\n\n\
             [chain]\nrepo = \"{repo}\"\n{config}\njobs = 2\n\
             revisions = {{ \"./k-good\" = \"{good}\", \"./k-mid\" = \"{mid}\", \"./k-bad\" = \"{bad}\" }}\n\n\
             [[hosts]]{rest}\n\
             [classify]\nconfirm_pairs = 1\nrefine_boots = 0\n\
             # The revert on top is e2e.rs's subject.\nrevert = false\n",
            state = state.display(),
            repo = demo_tree().display(),
        ),
    )
    .unwrap();

    // Kill the run once the source stage has measured a boot, 3 s into the step after it.
    kill_9_when(&["run".as_ref(), hunt.as_os_str()], INTO_STEP, || {
        state.join("journal.sqlite").exists()
            && staged_events(&state)
                .iter()
                .any(|(s, k, _)| s == "source" && k == "boot-finished")
    });
    let before = staged_events(&state);

    let out = firstbad().arg("run").arg(&hunt).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    assert!(
        stdout.contains(&format!("first bad commit: {}", &culprit[..12])),
        "expected {culprit}:\n{stdout}\n{stderr}"
    );
    // The last kernel is the first bad one; a kernel's id carries its release, which names
    // its commit (-fb<12 digits>).
    let first_bad = &bad;
    let first = stdout
        .lines()
        .find(|l| l.starts_with("first bad prebuilt kernel: "))
        .unwrap_or_else(|| panic!("no prebuilt stage line:\n{stdout}"));
    assert!(
        first.contains(&format!("fb{}", &first_bad[..12])),
        "{first}"
    );

    // One journal: the prebuilt stage, then the source stage, each event marked; the rerun
    // added nothing to the ended prebuilt stage.
    let after = staged_events(&state);
    let stages: Vec<&str> = after.iter().map(|(s, _, _)| s.as_str()).collect();
    let switch = stages.iter().position(|s| *s == "source").unwrap();
    assert!(stages[..switch].iter().all(|s| s.is_empty()), "{stages:?}");
    assert!(
        stages[switch..].iter().all(|s| *s == "source"),
        "{stages:?}"
    );
    assert_eq!(
        after.iter().filter(|(s, _, _)| s.is_empty()).count(),
        before.iter().filter(|(s, _, _)| s.is_empty()).count(),
        "the rerun journalled more of the ended prebuilt stage"
    );
    // The prebuilt stage's candidates are the directories' kernels, no git commit; the source
    // stage's are commits between the two kernels' revisions.
    for (s, k, c) in &after {
        let Some(c) = c else { continue };
        if k != "boot-finished" {
            continue;
        }
        let hex = c.bytes().all(|b| b.is_ascii_hexdigit());
        assert_eq!(hex, s == "source", "{s:?} {k} {c}");
    }

    // One report of both stages.
    let out = firstbad()
        .args(["report", "--format", "markdown"])
        .arg(&hunt)
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{md}");
    assert!(
        md.contains("# Stage 1 of 2: prebuilt kernels")
            && md.contains("# Stage 2 of 2: the source")
            && md.contains(&culprit[..12]),
        "{md}"
    );
    // Its bisect log is the source stage's: git bisect replay takes it.
    let out = firstbad().arg("log").arg(&hunt).output().unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains(&format!("git bisect bad {culprit}")) || log.contains(&culprit),
        "{log}"
    );
    keep_if_asked(dir);
}

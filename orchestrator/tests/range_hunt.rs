//! Range options through a hunt: the journal identity follows them, a diverged good is
//! replaced by the merge base and said so in the journal, and the `git bisect log` firstbad
//! writes for such a range is one that `git bisect replay` accepts and continues like firstbad.

mod common;
use common::git_str as git;
use std::path::{Path, PathBuf};

use firstbad::config::HuntConfig;
use firstbad::history::{CommitInfo, History, RangeOptions};
use firstbad::hunt::{HuntError, HuntState};
use firstbad::journal::{Entry, Event, HuntIdentity, Journal, RangeInfo, Verdict};
use firstbad::report::{self, Commits};
use firstbad::search::{Bisection, Next};

/// main: 24 commits, every third touching mm/, the others fs/; side forks at main~20.
fn repo(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..24 {
        let area = if i % 3 == 0 { "mm" } else { "fs" };
        std::fs::create_dir_all(dir.join(area)).expect("mkdir");
        std::fs::write(dir.join(area).join("f"), format!("{i}\n")).expect("write");
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", &format!("c{i} {area}")]);
        if i == 3 {
            git(dir, &["branch", "side"]);
        }
    }
    git(dir, &["checkout", "-q", "side"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", "s1"]);
    git(dir, &["checkout", "-q", "main"]);
}

fn hunt_file(dir: &Path, good: &str, extra: &str) -> PathBuf {
    std::fs::write(dir.join("kernel.config"), "CONFIG_64BIT=y\n").expect("write");
    std::fs::write(
        dir.join("fsync.toml"),
        "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 1048576\nwriter_block_bytes = 65536\nappend_bytes = 4096\nfsyncs = 10\ninterval_ms = 0\n",
    )
    .expect("write");
    let p = dir.join("hunt.toml");
    std::fs::write(
        &p,
        format!(
            "[hunt]\nname = \"t\"\nrepo = \"repo\"\ngood = {good}\nbad = \"main\"\nstate_dir = \"state\"\n{extra}\n\
             [build]\nconfig = \"kernel.config\"\n\n[[hosts]]\nkind = \"qemu\"\n\n\
             [workload]\nfile = \"fsync.toml\"\nmetric = \"fsync_latency_p50_ms\"\n"
        ),
    )
    .expect("write");
    p
}

/// Runs the hunt until it needs the agent (none here): Ok(()) when the range and the journal
/// identity were accepted, the error otherwise.
fn start(p: &Path) -> Result<(), HuntError> {
    let cfg = HuntConfig::load(p).expect("valid hunt file");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match rt.block_on(firstbad::engine::run(&cfg)) {
        Err(HuntError::Infrastructure(_)) => Ok(()),
        Err(e) => Err(e),
        Ok(_) => panic!("no agent: the hunt cannot have run"),
    }
}

#[test]
fn range_options_change_the_journal_identity_and_a_merge_base_is_journalled() {
    // No agent: the hunt stops right after checking the range and the journal.
    std::env::set_var("FIRSTBAD_AGENT", "/nonexistent/firstbad-agent");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::create_dir(dir.join("repo")).expect("mkdir");
    repo(&dir.join("repo"));

    let plain = hunt_file(dir, "\"main~20\"", "");
    start(&plain).expect("a one-good hunt starts");
    // Each option is refused by name, with its old and new value (issue 18).
    for (extra, changed) in [
        ("paths = [\"mm/\"]", "hunt.paths: was (empty), now \"mm/\""),
        (
            "first_parent = true",
            "hunt.first_parent: was \"false\", now \"true\"",
        ),
    ] {
        let p = hunt_file(dir, "\"main~20\"", extra);
        let err = start(&p).expect_err("other options, same state_dir");
        assert!(
            err.to_string()
                .contains(&format!("the hunt file changed {changed}")),
            "{extra}: {err}"
        );
        assert_eq!(err.exit_code(), 2, "bad input");
    }
    let p = hunt_file(dir, "[\"main~20\", \"main~22\"]", "");
    assert!(start(&p).is_err(), "two goods are another hunt");
    let plain = hunt_file(dir, "\"main~20\"", "");
    start(&plain).expect("the first hunt resumes");

    // A good on another branch: the merge base main~20 stands in, and the journal says so.
    std::fs::remove_dir_all(dir.join("state")).expect("rm state");
    let p = hunt_file(dir, "\"side\"", "paths = [\"mm/\"]");
    start(&p).expect("a diverged good is bisected from the merge base");
    let events = Journal::open(&dir.join("state/journal.sqlite"))
        .expect("journal")
        .events()
        .expect("events");
    let range = events
        .iter()
        .find_map(|e| match &e.event {
            Event::Range(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a range event");
    let base = git(&dir.join("repo"), &["merge-base", "main", "side"]);
    assert_eq!(range.goods, [base]);
    assert_eq!(range.paths, ["mm/"]);
    assert!(range.notes[0].contains("merge base"), "{:?}", range.notes);
    // Only the 6 commits of main~19..main that touch mm/ are counted.
    assert!(
        matches!(events[0].event, Event::HuntStarted { candidates: 6 }),
        "{:?}",
        events[0].event
    );
}

struct NoInfo;

impl Commits for NoInfo {
    fn info(&self, _id: &str) -> Option<CommitInfo> {
        None
    }
}

#[test]
fn the_bisect_log_of_a_range_with_options_replays_in_git() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    repo(dir);
    let id = |r: &str| git(dir, &["rev-parse", r]);
    let (bad, g1, g2) = (id("main"), id("main~20"), id("side"));
    let opts = RangeOptions {
        paths: vec!["mm/".into()],
        first_parent: false,
        ..RangeOptions::default()
    };
    let range = History::open(dir)
        .expect("open")
        .range(&bad, &[&g1, &g2], &opts)
        .expect("range");
    let goods: Vec<String> = range.goods.iter().map(|g| g.id.clone()).collect();
    let mut b = Bisection::new(&range.dag, &bad, &goods).expect("start");
    let Next::Test(first) = b.next() else {
        panic!("something to test")
    };
    b.mark(&first, Verdict::Good).expect("mark");
    let Next::Test(second) = b.next() else {
        panic!("something left to test")
    };

    let identity = HuntIdentity {
        good: goods[0].clone(),
        bad: bad.clone(),
        fingerprint: "f".into(),
        meaning: Default::default(),
    };
    let state = HuntState {
        verdicts: vec![(first.clone(), Verdict::Good, "measured".into())],
        range: Some(RangeInfo {
            goods: goods.clone(),
            paths: opts.paths.clone(),
            first_parent: false,
            notes: vec!["a note".into()],
        }),
        ..HuntState::default()
    };
    let log = report::bisect_log(&identity, &state, &NoInfo);
    assert!(
        log.contains("'--' 'mm/'") && log.contains("# note: a note"),
        "{log}"
    );
    let file = dir.join("firstbad.log");
    std::fs::write(&file, &log).expect("write");
    git(dir, &["bisect", "replay", &file.display().to_string()]);
    // git, given firstbad's log, checks out the commit firstbad would test next.
    assert_eq!(git(dir, &["rev-parse", "HEAD"]), second, "log:\n{log}");
    let git_log = git(dir, &["bisect", "log"]);
    assert!(
        git_log.contains(&format!("git bisect good {first}")),
        "{git_log}"
    );
    git(dir, &["bisect", "reset"]);
}

/// Issue 18, item 6: `firstbad status` on a path-limited hunt counts the range the hunt
/// bisects (the commits that touch the paths, as `git bisect start -- <paths>` and the hunt's
/// own [`Bisection`] count them), not every commit of good..bad.
#[test]
fn status_counts_the_remaining_range_of_a_path_limited_hunt_as_git_does() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let r = dir.join("repo");
    std::fs::create_dir(&r).expect("mkdir");
    repo(&r);
    let cfg = HuntConfig::load(&hunt_file(dir, "\"main~20\"", "paths = [\"mm/\"]"))
        .expect("valid hunt file");
    let id = |rev: &str| git(&r, &["rev-parse", rev]);
    let (bad, good) = (id("main"), id("main~20"));
    let paths = vec!["mm/".to_owned()];

    // The hunt's own bisection of the range, after its first commit was found good.
    let opts = RangeOptions {
        paths: paths.clone(),
        first_parent: false,
        ..RangeOptions::default()
    };
    let range = History::open(&r)
        .expect("open")
        .range(&bad, &[&good], &opts)
        .expect("range");
    let mut b = Bisection::new(&range.dag, &bad, std::slice::from_ref(&good)).expect("start");
    let Next::Test(first) = b.next() else {
        panic!("something to test")
    };
    b.mark(&first, Verdict::Good).expect("mark");

    // The journal of that hunt, as `firstbad run` writes it.
    let identity = HuntIdentity {
        good: good.clone(),
        bad: bad.clone(),
        fingerprint: "f".into(),
        meaning: Default::default(),
    };
    let entries: Vec<Entry> = [
        Event::HuntStarted { candidates: 6 },
        Event::Range(RangeInfo {
            goods: vec![good.clone()],
            paths: paths.clone(),
            first_parent: false,
            notes: vec![],
        }),
        Event::Verdict {
            commit: first.clone(),
            verdict: Verdict::Good,
            reason: "measured".into(),
        },
    ]
    .into_iter()
    .enumerate()
    .map(|(i, event)| Entry {
        seq: i as i64 + 1,
        at_ms: 1_000 * i as i64,
        event,
    })
    .collect();
    let s = report::status::render(&cfg, &identity, &entries, 10_000);

    // git: the commits left that touch mm/ (bad, c23, does not), and its step estimate.
    let left: usize = git(
        &r,
        &[
            "rev-list",
            "--count",
            &bad,
            &format!("^{good}"),
            &format!("^{first}"),
            "--",
            "mm/",
        ],
    )
    .parse()
    .expect("a count");
    git(&r, &["bisect", "start", &bad, &good, "--", "mm/"]);
    let said = common::git_ok(&r, &["bisect", "good", &first]);
    git(&r, &["bisect", "reset"]);
    let steps = said
        .split("(roughly ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .unwrap_or_else(|| panic!("git bisect says how many steps: {said}"));
    assert!(
        left < 20 - 1,
        "the paths must narrow the range for this test to mean anything"
    );
    assert_eq!(b.remaining(), left, "the hunt's bisection agrees with git");
    assert!(
        s.contains(&format!(
            "remaining range: {left} candidate(s), ~{steps} step(s)"
        )),
        "git: {left} left, roughly {steps} steps ({said:?}); status:\n{s}"
    );
}

//! `firstbad run --replay`: a log made by hand with real `git bisect` is applied to a fresh
//! hunt journal, and firstbad's next candidate must be the commit git itself would test next.

mod common;
use common::git_str as git;
use std::path::Path;
use std::process::Command;

use firstbad::history::{History, RangeOptions};
use firstbad::hunt::{apply_replay, HuntState};
use firstbad::journal::{Journal, Verdict};
use firstbad::search::{Bisection, Next};

#[test]
fn a_hand_made_git_bisect_log_is_applied_and_not_retested() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..40 {
        std::env::set_var(
            "GIT_COMMITTER_DATE",
            format!("{} +0000", 1_600_000_000 + 60 * i),
        );
        git(
            dir,
            &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
        );
        if i == 20 {
            git(dir, &["branch", "side"]);
        }
    }
    git(dir, &["tag", "v1", "main~35"]);
    // The culprit is main~13: a person bisects by hand for three steps, one skip among them.
    let culprit = git(dir, &["rev-parse", "main~13"]);
    git(dir, &["bisect", "start", "--no-checkout", "main", "v1"]);
    let mut by_hand = Vec::new();
    for step in 0..4 {
        let head = git(dir, &["rev-parse", "BISECT_HEAD"]);
        let verdict = if step == 1 {
            "skip"
        } else if git_is_ancestor(dir, &culprit, &head) {
            "bad"
        } else {
            "good"
        };
        git(dir, &["bisect", verdict, &head]);
        by_hand.push(head);
    }
    let git_next = git(dir, &["rev-parse", "BISECT_HEAD"]);
    let log = git(dir, &["bisect", "log"]);
    git(dir, &["bisect", "reset"]);
    // Old spelling and an extra comment must not matter.
    let log = format!(
        "# made by hand\n{}\n",
        log.replacen("git bisect bad", "git-bisect bad", 1)
    );
    let file = dir.join("bisect.log");
    std::fs::write(&file, &log).expect("write log");

    let history = History::open(dir).expect("open");
    let range = history
        .range("main", &["v1"], &RangeOptions::default())
        .expect("range");
    let goods: Vec<String> = range.goods.iter().map(|g| g.id.clone()).collect();
    let bad = range.bad.id.clone();
    let journal = Journal::open(&dir.join("journal.sqlite")).expect("journal");
    let mut state = HuntState::default();
    apply_replay(
        &history, &range.dag, &bad, &goods, &journal, &mut state, &file,
    )
    .expect("replay");

    // Every hand verdict is journalled once, with the replay file as reason, in order.
    let replayed = HuntState::replay(&journal.events().expect("events"));
    let commits: Vec<&str> = replayed.verdicts.iter().map(|v| v.0.as_str()).collect();
    assert_eq!(
        commits,
        by_hand.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(replayed.verdicts[1].1, Verdict::Skip);
    assert!(replayed
        .verdicts
        .iter()
        .all(|v| v.2 == format!("from replay file {}", file.display())));

    // firstbad continues exactly where git would.
    let mut b = Bisection::new(&range.dag, &bad, &goods).expect("start");
    for (c, v, _) in &replayed.verdicts {
        b.mark(c, *v).expect("fits");
    }
    assert_eq!(b.next(), Next::Test(git_next.clone()));
    assert!(
        !by_hand.contains(&git_next),
        "a replayed commit is not tested again"
    );

    // Applying the same file again (a resumed run) adds nothing.
    apply_replay(
        &history, &range.dag, &bad, &goods, &journal, &mut state, &file,
    )
    .expect("again");
    assert_eq!(
        HuntState::replay(&journal.events().expect("events"))
            .verdicts
            .len(),
        by_hand.len()
    );
}

fn git_is_ancestor(dir: &Path, a: &str, b: &str) -> bool {
    Command::new("git")
        .args(["merge-base", "--is-ancestor", a, b])
        .current_dir(dir)
        .status()
        .expect("git runs")
        .success()
}

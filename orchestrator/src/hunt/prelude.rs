//! What every hunt does before its first step, kernel and command hunts alike: load the
//! range, check that the journal belongs to this hunt (field by field), and apply a
//! `git bisect log` given with `--replay`.

use super::{short, HuntError, HuntState};
use crate::history::{History, RangeOptions};
use crate::journal::{Event, HuntIdentity, Journal, RangeInfo, Recorder, Verdict};
use crate::search::{Bisection, Dag};
use std::collections::BTreeMap;
use std::path::Path;

pub use super::state_dir::lock_state_dir;

/// A hunt's range, loaded from the hunt file's revisions and range options.
pub struct HuntRange {
    /// The repository; `None` in a prebuilt hunt, whose candidates are no commits.
    pub history: Option<History>,
    /// The candidates.
    pub dag: Dag,
    /// The bad commit.
    pub bad: String,
    /// The good commits bounding the range (at least one; a merge base stands in for a good on
    /// another branch).
    pub goods: Vec<String>,
    /// The range options and notes, when there is anything beyond one good and one bad.
    pub info: Option<RangeInfo>,
}

impl HuntRange {
    /// Opens `repo`, resolves the revisions (an unknown one is named by its field in
    /// `source`), loads the range and logs what must be said about it (a merge base standing
    /// in for a good revision).
    pub fn load(
        source: &Path,
        repo: &Path,
        goods: &[String],
        bad: &str,
        paths: &[String],
        first_parent: bool,
    ) -> Result<HuntRange, HuntError> {
        let bad_input = |m: String| HuntError::BadInput(format!("{}: {m}", source.display()));
        let history = History::open(repo).map_err(|e| bad_input(format!("hunt.repo: {e}")))?;
        // Name the field of a revision git does not know; range() then checks how they relate.
        for (i, g) in goods.iter().enumerate() {
            let field = if goods.len() == 1 {
                "hunt.good".to_string()
            } else {
                format!("hunt.good[{i}]")
            };
            history
                .resolve(g)
                .map_err(|e| bad_input(format!("{field}: {e}")))?;
        }
        history
            .resolve(bad)
            .map_err(|e| bad_input(format!("hunt.bad: {e}")))?;
        let options = RangeOptions {
            paths: paths.to_vec(),
            first_parent,
            ..RangeOptions::default()
        };
        let range = history
            .range(bad, goods, &options)
            .map_err(|e| bad_input(e.to_string()))?;
        for note in &range.notes {
            tracing::warn!("{note}");
        }
        let goods: Vec<String> = range.goods.iter().map(|g| g.id.clone()).collect();
        if goods.is_empty() {
            return Err(bad_input("hunt.good: no good revision".into()));
        }
        let info =
            (goods.len() > 1 || !paths.is_empty() || first_parent || !range.notes.is_empty()).then(
                || RangeInfo {
                    goods: goods.clone(),
                    paths: paths.to_vec(),
                    first_parent,
                    notes: range.notes.clone(),
                },
            );
        Ok(HuntRange {
            history: Some(history),
            dag: range.dag,
            bad: range.bad.id.clone(),
            goods,
            info,
        })
    }

    /// Two kernels compared as they are (`firstbad reproduce`): the first good revision and
    /// bad, whether or not one descends from the other (a report's two distribution kernels
    /// often sit on different stable branches), and nothing between them.
    pub fn pair(
        source: &Path,
        repo: &Path,
        goods: &[String],
        bad: &str,
    ) -> Result<HuntRange, HuntError> {
        let bad_input = |m: String| HuntError::BadInput(format!("{}: {m}", source.display()));
        let history = History::open(repo).map_err(|e| bad_input(format!("hunt.repo: {e}")))?;
        let first = goods
            .first()
            .ok_or_else(|| bad_input("hunt.good: no good revision".into()))?;
        let good = history
            .resolve(first)
            .map_err(|e| bad_input(format!("hunt.good: {e}")))?;
        let bad = history
            .resolve(bad)
            .map_err(|e| bad_input(format!("hunt.bad: {e}")))?;
        if good == bad {
            return Err(bad_input(format!(
                "hunt.good and hunt.bad are the same commit {}: nothing to compare",
                short(&good)
            )));
        }
        let mut range = HuntRange::two(good, bad).map_err(bad_input)?;
        range.history = Some(history);
        Ok(range)
    }

    /// The range of `good` and `bad` alone: node 0 is bad, and good its only "parent", so the
    /// bisection has nothing to test.
    pub fn two(good: String, bad: String) -> Result<HuntRange, String> {
        let mut b = crate::search::DagBuilder::with_capacity(2, 1);
        b.push(&bad, [1], 0);
        b.push(&good, [], 0);
        let dag = b.build().map_err(|e| e.to_string())?;
        Ok(HuntRange {
            history: None,
            dag,
            bad,
            goods: vec![good],
            info: None,
        })
    }

    /// A range that is not a git history: `dag` (node 0 the bad candidate) with its good
    /// candidate outside it, as a prebuilt hunt's list of kernels makes it.
    pub fn without_git(dag: Dag, good: String, bad: String) -> HuntRange {
        HuntRange {
            history: None,
            dag,
            bad,
            goods: vec![good],
            info: None,
        }
    }

    /// Every candidate's first parent, read from git once, when the hunt starts: a commit git
    /// cannot read is an error here, never a commit without a parent (which would skip its
    /// culprit's re-test). A root commit has none.
    pub fn first_parents(&self) -> Result<super::driver::FirstParent, HuntError> {
        let Some(history) = &self.history else {
            return Ok(Box::new(|_| None));
        };
        let mut parents = std::collections::HashMap::with_capacity(self.dag.len());
        for id in self.dag_ids() {
            let commit = git2::Oid::from_str(id)
                .and_then(|oid| history.repo().find_commit(oid))
                .map_err(|e| {
                    HuntError::Infrastructure(format!(
                        "reading the first parent of {}: {e}",
                        short(id)
                    ))
                })?;
            if let Some(p) = commit.parent_ids().next() {
                parents.insert(id.to_owned(), p.to_string());
            }
        }
        Ok(Box::new(move |c| parents.get(c).cloned()))
    }

    /// The range with the links that `pruning` names TREESAME, as commits outside
    /// `-- <paths>` are (issue 35): the search then tests none of those commits.
    pub fn prune(&mut self, pruning: &crate::journal::Pruning) -> Result<(), HuntError> {
        let Some(history) = &self.history else {
            return Ok(());
        };
        if pruning.links.is_empty() {
            return Ok(());
        }
        let options = super::prune::range_options(self.info.as_ref(), Some(pruning));
        let range = history
            .range(&self.bad, &self.goods, &options)
            .map_err(|e| HuntError::Infrastructure(format!("pruning the range: {e}")))?;
        self.dag = range.dag;
        Ok(())
    }

    /// The candidates' ids, in the DAG's order (bad first).
    pub fn dag_ids(&self) -> Vec<&str> {
        (0..self.dag.len()).map(|i| self.dag.id(i)).collect()
    }

    /// The range's own fields of a hunt's meaning: the resolved endpoints and the options.
    pub fn meaning(&self) -> BTreeMap<String, String> {
        let info = self.info.clone().unwrap_or_default();
        BTreeMap::from([
            ("hunt.good".to_owned(), self.goods.join(", ")),
            ("hunt.bad".to_owned(), self.bad.clone()),
            ("hunt.paths".to_owned(), info.paths.join(", ")),
            (
                "hunt.first_parent".to_owned(),
                info.first_parent.to_string(),
            ),
        ])
    }
}

/// A short stable hash of some bytes, to stand for a file's contents in a hunt's meaning.
pub fn content_hash(bytes: &[u8]) -> String {
    git2::Oid::hash_object(git2::ObjectType::Blob, bytes)
        .map(|o| o.to_string()[..12].to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// The hash of a hunt's meaning, for the journal's identity.
pub fn fingerprint(meaning: &BTreeMap<String, String>) -> String {
    content_hash(
        serde_json::to_string(meaning)
            .expect("strings serialise")
            .as_bytes(),
    )
}

/// The fields of `new` whose values differ from `old`, as `field: was X, now Y`.
pub fn changed_fields(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let shown = |v: Option<&String>| match v.map(String::as_str) {
        None => "(not set)".to_owned(),
        Some("") => "(empty)".to_owned(),
        // `str::floor_char_boundary` is newer than the workspace's rust-version (1.85).
        Some(v) if v.chars().count() > 60 => {
            format!("{:?}…", v.chars().take(60).collect::<String>())
        }
        Some(v) => format!("{v:?}"),
    };
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| format!("{k}: was {}, now {}", shown(old.get(k)), shown(new.get(k))))
        .collect()
}

/// Starts a hunt's journal (identity, candidate count, range options), or checks that the
/// journal already there belongs to this hunt: a field that changes what a verdict means and
/// differs from the journal's is refused by name, with the old and the new value.
pub fn begin_or_resume(
    journal: &Journal,
    identity: &HuntIdentity,
    state_dir: &Path,
    dag: &Dag,
    goods: &[String],
    range_info: Option<&RangeInfo>,
) -> Result<(), HuntError> {
    let fresh = || {
        format!(
            "to hunt with the new values, use another hunt.state_dir, or rerun with \
             `firstbad run --fresh` to start this one afresh in {} (the old files are moved \
             aside)",
            state_dir.display()
        )
    };
    match journal.identity()? {
        Some(existing) if existing.meaning.is_empty() => Err(HuntError::BadInput(format!(
            "{} holds a hunt journalled by an earlier firstbad (good {}, bad {}), which did not \
             record what its verdicts mean field by field, so it cannot be resumed safely; {}. \
             Built kernels stay in the build cache and are reused",
            state_dir.display(),
            short(&existing.good),
            short(&existing.bad),
            fresh()
        ))),
        // Another range is another hunt: named as one, both ranges shown, rather than as a
        // changed hunt file or as a journal that lost the runs of this hunt's logs (issue 32,
        // finding 9).
        Some(existing) if (&existing.good, &existing.bad) != (&identity.good, &identity.bad) => {
            let changes = changed_fields(&existing.meaning, &identity.meaning);
            Err(HuntError::BadInput(format!(
                "{} holds another hunt: its journal is of good {}, bad {}; this hunt file's is \
                 good {}, bad {} (it differs in {}); {}",
                state_dir.display(),
                short(&existing.good),
                short(&existing.bad),
                short(&identity.good),
                short(&identity.bad),
                changes.join("; "),
                fresh()
            )))
        }
        Some(existing) if existing.meaning != identity.meaning => {
            let changes = changed_fields(&existing.meaning, &identity.meaning);
            Err(HuntError::BadInput(format!(
                "{} holds a hunt whose verdicts mean something else: the hunt file changed \
                 {}; {}",
                state_dir.display(),
                changes.join("; "),
                fresh()
            )))
        }
        Some(_) => {
            tracing::info!("resuming the hunt journalled in {}", state_dir.display());
            Ok(())
        }
        None => {
            let candidates = Bisection::new(dag, &identity.bad, goods)
                .map_err(|e| HuntError::BadInput(e.to_string()))?
                .remaining();
            let mut first = vec![Event::HuntStarted { candidates }];
            first.extend(range_info.map(|info| Event::Range(info.clone())));
            journal.start(identity, &first)?;
            Ok(())
        }
    }
}

/// A hunt's journal opened for a run: the state directory's lock, the journal and its fold,
/// or the outcome of a hunt that has already ended.
pub enum Opened {
    /// The hunt goes on: `RunStarted` is journalled and the `--replay` verdicts applied.
    Run {
        /// Held while the run lasts: one run per state directory.
        lock: std::fs::File,
        /// The journal.
        journal: Journal,
        /// Its fold.
        state: Box<HuntState>,
    },
    /// The hunt had ended; nothing was journalled.
    Ended(Box<super::Outcome>),
}

/// What every run of a hunt does first, kernel and command hunts alike: take the state
/// directory, open its journal's `stage` ("" but in a chained hunt's later stage), check that its journal is this hunt's ([`begin_or_resume`]), say what an
/// interrupted run was doing, journal `RunStarted` with the run's `tuning`, and apply a
/// `git bisect log` given with `--replay`.
pub fn open_hunt(
    state_dir: &Path,
    stage: &str,
    range: &HuntRange,
    meaning: BTreeMap<String, String>,
    tuning: BTreeMap<String, String>,
    replay: Option<&Path>,
) -> Result<Opened, HuntError> {
    std::fs::create_dir_all(state_dir).map_err(|e| {
        HuntError::BadInput(format!(
            "cannot create state directory {}: {e}",
            state_dir.display()
        ))
    })?;
    let lock = lock_state_dir(state_dir)?;
    let journal = Journal::open(&super::journal_path(state_dir))?.stage(stage);
    let identity = HuntIdentity {
        good: range.goods[0].clone(),
        bad: range.bad.clone(),
        fingerprint: fingerprint(&meaning),
        meaning,
    };
    begin_or_resume(
        &journal,
        &identity,
        state_dir,
        &range.dag,
        &range.goods,
        range.info.as_ref(),
    )?;
    let events = journal.events()?;
    super::state_dir::check_runs_recorded(state_dir, &events)?;
    let mut state = HuntState::replay(&events);
    if let Some(end) = &state.end {
        tracing::info!("this hunt has already ended; `firstbad report` shows it");
        return Ok(Opened::Ended(Box::new(super::Outcome {
            retired: state.retired.clone(),
            reverted: state.reverted.clone(),
            ..super::Outcome::of(end.clone(), state.confirmation.clone())
        })));
    }
    if let Some(step) = state.in_flight() {
        tracing::warn!("the previous run stopped during {step}; redoing that step");
    }
    record(&journal, &mut state, Event::RunStarted { tuning })?;
    if let Some(file) = replay {
        let Some(history) = &range.history else {
            return Err(HuntError::BadInput(format!(
                "--replay {}: this hunt's candidates are prebuilt kernels, not git revisions: a \
                 git bisect log does not apply to them",
                file.display()
            )));
        };
        apply_replay(
            history,
            &range.dag,
            &range.bad,
            &range.goods,
            &journal,
            &mut state,
            file,
        )?;
    }
    Ok(Opened::Run {
        lock,
        journal,
        state: Box::new(state),
    })
}

/// Journals an event and applies it: the one way a hunt records what it decided or did.
pub fn record(
    journal: &impl Recorder,
    state: &mut HuntState,
    event: Event,
) -> Result<(), HuntError> {
    journal.record(&event)?;
    state.apply(&event);
    Ok(())
}

/// Journals the verdicts of a `git bisect log` that fit the range, in order, with the reason
/// "from replay file X"; verdicts already in the journal, and those naming the hunt's own
/// endpoints or commits outside the range, are left out (the latter with a warning).
pub fn apply_replay(
    history: &History,
    dag: &Dag,
    bad: &str,
    goods: &[String],
    journal: &Journal,
    state: &mut HuntState,
    file: &Path,
) -> Result<(), HuntError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| HuntError::BadInput(format!("--replay {}: {e}", file.display())))?;
    let log = crate::replay::parse(&text)
        .map_err(|e| HuntError::BadInput(format!("--replay {}: {e}", file.display())))?;
    let mut bisection =
        Bisection::new(dag, bad, goods).map_err(|e| HuntError::BadInput(e.to_string()))?;
    for (commit, verdict, _) in &state.verdicts {
        // Contradictions with the journal are reported by the main loop.
        let _ = bisection.mark(commit, *verdict);
    }
    let reason = format!("from replay file {}", file.display());
    let mut applied = 0;
    for v in &log.verdicts {
        let at = format!("--replay {}: line {}", file.display(), v.line);
        let commit = history
            .resolve(&v.rev)
            .map_err(|e| HuntError::BadInput(format!("{at}: {e}")))?;
        let verdict = match v.verdict {
            crate::search::Verdict::Good => Verdict::Good,
            crate::search::Verdict::Bad => Verdict::Bad,
            crate::search::Verdict::Skip => Verdict::Skip,
        };
        let endpoint = (commit == bad && verdict == Verdict::Bad)
            || (goods.contains(&commit) && verdict == Verdict::Good);
        if endpoint
            || state
                .verdicts
                .iter()
                .any(|(c, w, _)| c == &commit && *w == verdict)
        {
            continue;
        }
        match bisection.mark(&commit, verdict) {
            Ok(()) => {}
            Err(crate::search::MarkError::UnknownCommit { .. }) => {
                tracing::warn!(
                    "{at}: {} {} is outside the range; left out",
                    verdict.as_str(),
                    short(&commit)
                );
                continue;
            }
            Err(e) => return Err(HuntError::BadInput(format!("{at}: {e}"))),
        }
        record(
            journal,
            state,
            Event::Verdict {
                commit,
                verdict,
                reason: reason.clone(),
            },
        )?;
        applied += 1;
    }
    tracing::info!(
        "applied {applied} verdicts from {}; {} candidates left",
        file.display(),
        bisection.remaining()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git` in `dir`, its output trimmed.
    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// The first parents are git's (a merge's is the branch it was made on), read once when the
    /// hunt starts; a candidate git cannot read is an error then, never a commit without a
    /// parent whose culprit would go without its re-test.
    #[test]
    fn first_parents_are_read_from_git_at_the_start_and_an_unreadable_commit_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"]);
        let commit = |m: &str| {
            git(d, &["commit", "-q", "--allow-empty", "-m", m]);
            git(d, &["rev-parse", "HEAD"])
        };
        let good = commit("good");
        let one = commit("one");
        git(d, &["checkout", "-q", "-b", "side", &good]);
        let side = commit("side");
        git(d, &["checkout", "-q", "main"]);
        git(d, &["merge", "-q", "--no-ff", "-m", "merge", "side"]);
        let merge = git(d, &["rev-parse", "HEAD"]);
        let bad = commit("bad");
        let range = HuntRange::load(
            Path::new("hunt.toml"),
            d,
            std::slice::from_ref(&good),
            &bad,
            &[],
            false,
        )
        .unwrap();
        let parent = range.first_parents().unwrap();
        assert_eq!(parent(&merge), Some(one.clone()));
        assert_eq!(parent(&side), Some(good.clone()));
        assert_eq!(parent(&bad), Some(merge.clone()));
        assert_eq!(parent(&good), None, "not a candidate");

        let mut nodes = range.dag.nodes().to_vec();
        nodes[0].id = "0123456789012345678901234567890123456789".into();
        let broken = HuntRange {
            dag: Dag::new(nodes).unwrap(),
            ..range
        };
        let e = broken
            .first_parents()
            .err()
            .expect("an unreadable commit is an error");
        assert!(
            e.to_string()
                .contains("reading the first parent of 012345678901"),
            "{e}"
        );
    }

    #[test]
    fn a_changed_field_is_named_with_its_old_and_new_value() {
        let old = BTreeMap::from([
            ("classify.mode".to_owned(), "baselines".to_owned()),
            ("workload.metric".to_owned(), "p50".to_owned()),
        ]);
        let mut new = old.clone();
        new.insert("classify.mode".into(), "relative".into());
        new.insert("build.make_args".into(), "LLVM=1".into());
        assert_eq!(
            changed_fields(&old, &new),
            [
                "build.make_args: was (not set), now \"LLVM=1\"",
                "classify.mode: was \"baselines\", now \"relative\"",
            ]
        );
    }
}

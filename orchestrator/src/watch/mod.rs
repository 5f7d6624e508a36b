//! `firstbad watch`: nightly regression hunts. One cycle fetches the followed branch, boots
//! its new head against the series' reference (interleaved, a few boots each), places any
//! change among the nights, hunts a regression's first bad commit with the ordinary engine,
//! and tells people. Everything goes to the series database first; a cycle killed at any
//! point resumes on the next run.
//!
//! - `db.rs`: the series' events and their fold; `fetch.rs`: git2 fetch of the branch;
//! - `detect.rs`: from the nights to a change (the alarm and the history);
//! - `night.rs`: a night's boots (or runs) and its second look.

pub mod cli;
pub mod dashboard;
pub mod db;
pub mod detect;
pub mod fetch;
mod night;
pub mod reports;
pub mod tell;

use crate::config::series::Measured;
use crate::config::{HuntFile, SeriesConfig};
use crate::error::exit_code;
use crate::hunt::{self, short, HuntError};
use crate::journal::{HuntEnd, JournalError};
use db::{RegressionState, SeriesDb, SeriesEvent};
use night::{off_runtime, run_night, second_look};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why a cycle stopped.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The series file, the repository or the database do not fit; nothing was run.
    #[error("{0}")]
    BadInput(String),
    /// The series database failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A night or a hunt stopped; the next cycle resumes it.
    #[error(transparent)]
    Hunt(#[from] HuntError),
    /// The branch could not be fetched; the next cycle tries again.
    #[error("fetch: {0}")]
    Fetch(String),
}

impl WatchError {
    /// The documented exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            WatchError::BadInput(_) => exit_code::BAD_INPUT,
            WatchError::Journal(_) => exit_code::ERROR,
            WatchError::Hunt(e) => e.exit_code(),
            WatchError::Fetch(_) => exit_code::INFRASTRUCTURE,
        }
    }
}

/// The series database inside a series' state directory.
pub fn db_path(state_dir: &Path) -> PathBuf {
    state_dir.join("series.sqlite")
}

/// Where night `n`'s journal, logs and consoles are.
pub fn night_dir(state_dir: &Path, night: u32) -> PathBuf {
    state_dir.join("nights").join(format!("{night:04}"))
}

/// Where the hunt of change `id` runs.
pub fn hunt_dir(state_dir: &Path, id: u32) -> PathBuf {
    state_dir.join("hunts").join(format!("{id:03}"))
}

/// The hunt file of change `c`'s hunt: between its two commits, on the metric it moved most
/// (a benchmark series has one), with the workload that metric is of.
pub fn hunt_of(cfg: &SeriesConfig, c: &db::Change) -> HuntFile {
    let dir = hunt_dir(&cfg.state_dir, c.id);
    if let Some((w, _)) = cfg.workload_of(&c.metric) {
        // An extra workload judges its own metric: the hunt's.
        return cfg.hunt_on(Some(&w.name), &c.good, &c.bad, &dir);
    }
    let mut hunt = cfg.hunt_between(&c.good, &c.bad, &dir);
    if let HuntFile::Kernel(k) = &mut hunt {
        if let Some((metric, direction)) = cfg.metrics.iter().find(|(m, _)| *m == c.metric) {
            k.workload.metric = metric.clone();
            k.workload.direction = *direction;
        }
    }
    hunt
}

/// What a series' values mean: a series file that changes one of these is another series.
pub fn meaning(cfg: &SeriesConfig) -> Result<BTreeMap<String, String>, WatchError> {
    let mut m = match cfg.measured() {
        Measured::Kernel(k) => hunt::measurement_meaning(k)?,
        Measured::Command(local, measure) => {
            crate::local::measured::measurement_meaning(local, measure)
        }
    };
    for w in &cfg.workloads {
        let workload = serde_json::to_string(&w.workload.workload).expect("workloads serialise");
        m.insert(
            format!("series.workloads.{}", w.name),
            format!(
                "{} {:?}, timeout {} s, contents {}",
                w.workload.metric,
                w.workload.direction,
                w.workload.timeout_s,
                hunt::prelude::content_hash(workload.as_bytes())
            ),
        );
    }
    m.insert("series.remote".into(), cfg.remote.clone());
    m.insert("series.branch".into(), cfg.branch.clone());
    Ok(m)
}

/// What one cycle did, line by line, for the log and the terminal.
#[derive(Debug, Default)]
pub struct Cycle {
    /// What happened, for a person.
    pub lines: Vec<String>,
}

impl Cycle {
    fn say(&mut self, line: String) {
        tracing::info!("{line}");
        self.lines.push(line);
    }
}

/// Runs one cycle of a series: resume what an interrupted cycle left, else fetch and measure a
/// new head; then detect, hunt and tell.
pub async fn cycle(cfg: &SeriesConfig) -> Result<Cycle, WatchError> {
    std::fs::create_dir_all(&cfg.state_dir).map_err(|e| {
        WatchError::BadInput(format!(
            "{}: series.state_dir: cannot create {}: {e}",
            cfg.source.display(),
            cfg.state_dir.display()
        ))
    })?;
    let _lock = hunt::state_dir::lock_state_dir(&cfg.state_dir)?;
    let mut db = SeriesDb::open(&db_path(&cfg.state_dir), meaning(cfg)?, &cfg.source)?;
    let mut out = Cycle::default();
    match db.state.open_night().cloned() {
        Some(night) => {
            out.say(format!(
                "night {}: resuming {} against {}",
                night.night,
                short(&night.head),
                short(&night.reference)
            ));
            run_night(cfg, &mut db, &night, &mut out).await?;
        }
        // A cycle killed after its night's boots and before its judgement (in the second look,
        // or before it) finishes that night first: a new head would leave it unjudged.
        None if db.state.unjudged_night().is_some() => {}
        None => new_night(cfg, &mut db, &mut out).await?,
    }
    second_look(cfg, &mut db, &mut out).await?;
    detect::after_night(cfg, &mut db, &mut out)?;
    // Told before the hunt (which can take hours) and again after it.
    tell::tell(cfg, &mut db, &mut out).await?;
    let hunted = hunt_regression(cfg, &mut db, &mut out).await;
    tell::tell(cfg, &mut db, &mut out).await?;
    hunted?;
    Ok(out)
}

/// Fetches the branch; when its head moved, starts and runs a night for it.
async fn new_night(
    cfg: &SeriesConfig,
    db: &mut SeriesDb,
    out: &mut Cycle,
) -> Result<(), WatchError> {
    cfg.check_remote()
        .map_err(|e| WatchError::BadInput(e.to_string()))?;
    let head =
        fetch::fetch(&cfg.repo, &cfg.remote, &cfg.branch, &cfg.ssh).map_err(WatchError::Fetch)?;
    let reference = match db.state.reference.clone() {
        Some(r) => r,
        None => {
            let (commit, why) = match &cfg.reference {
                Some(rev) => {
                    let history = crate::history::History::open(&cfg.repo)
                        .map_err(|e| WatchError::BadInput(e.to_string()))?;
                    let id = history.resolve(rev).map_err(|e| {
                        WatchError::BadInput(format!(
                            "{}: series.reference: {e}",
                            cfg.source.display()
                        ))
                    })?;
                    (id, format!("series.reference = {rev:?}"))
                }
                None => (head.clone(), "the head of the first night".to_owned()),
            };
            db.record(SeriesEvent::Reference {
                commit: commit.clone(),
                why: why.clone(),
            })?;
            out.say(format!("reference: {} ({why})", short(&commit)));
            commit
        }
    };
    let last = db.state.nights.last().map(|n| n.head.clone());
    if last.as_deref() == Some(head.as_str()) || (last.is_some() && head == reference) {
        out.say(format!(
            "{} is still at {}: nothing new to measure",
            cfg.branch,
            short(&head)
        ));
        return Ok(());
    }
    let night = db.state.nights.last().map_or(1, |n| n.night + 1);
    if head == reference {
        // The first night: its head is the reference, nothing to boot it against yet.
        db.record(SeriesEvent::NightStarted {
            night,
            head: head.clone(),
            reference,
        })?;
        db.record(SeriesEvent::NightMeasured {
            night,
            boots: Vec::new(),
            summary: "the first night: its head is the series' reference".into(),
        })?;
        out.say(format!(
            "night {night}: {} {} is the reference",
            cfg.branch,
            short(&head)
        ));
        return Ok(());
    }
    db.record(SeriesEvent::NightStarted {
        night,
        head: head.clone(),
        reference: reference.clone(),
    })?;
    out.say(format!(
        "night {night}: {} {} against the reference {}",
        cfg.branch,
        short(&head),
        short(&reference)
    ));
    let n = db.state.open_night().cloned().expect("just started");
    run_night(cfg, db, &n, out).await
}

/// Runs (or resumes) the hunt of the open regression, within the series' boot budget, and
/// journals its outcome.
async fn hunt_regression(
    cfg: &SeriesConfig,
    db: &mut SeriesDb,
    out: &mut Cycle,
) -> Result<(), WatchError> {
    let Some(change) = db.state.open_regression().cloned() else {
        return Ok(());
    };
    let hunt_file = hunt_of(cfg, &change);
    let dir = hunt_file.state_dir().to_owned();
    out.say(format!(
        "regression #{}: hunting between {} and {} (at most {} boots) in {}",
        change.id,
        short(&change.good),
        short(&change.bad),
        cfg.hunt_boots,
        dir.display()
    ));
    let budget = cfg.hunt_boots as usize;
    let hunted = match hunt_file {
        HuntFile::Kernel(k) => crate::engine::run_budgeted(&k, budget).await,
        HuntFile::Local(l) => {
            off_runtime(*l, move |l, m| {
                crate::local::measured::run_budgeted(l, m, budget)
            })
            .await
        }
    };
    let outcome = match hunted {
        Ok(o) => match o.end {
            HuntEnd::Found { commit } => RegressionState::Found {
                culprit: commit,
                confirmed: o.confirmation.as_ref().is_some_and(|c| c.confirmed),
                probability: o.confirmation.as_ref().and_then(|c| c.confidence),
            },
            HuntEnd::OnlySkippedLeft { commits } => RegressionState::Ambiguous { commits },
            HuntEnd::NotReproduced { message } => RegressionState::NotReproduced { message },
            other => RegressionState::NotReproduced {
                message: format!("{other:?}"),
            },
        },
        Err(HuntError::BudgetSpent(boots)) => RegressionState::BudgetSpent { boots },
        Err(e) => {
            out.say(format!(
                "regression #{}: the hunt stopped ({e}); the next cycle resumes it",
                change.id
            ));
            return Err(e.into());
        }
    };
    out.say(format!("regression #{}: {}", change.id, describe(&outcome)));
    night::remove_trees(cfg, &dir);
    let culprit = match &outcome {
        RegressionState::Found { culprit, .. } => Some(culprit.clone()),
        _ => None,
    };
    db.record(SeriesEvent::HuntEnded {
        id: change.id,
        outcome,
    })?;
    // A culprit a person already knows about (series.ignore): acknowledged, nobody told.
    if let Some(culprit) = culprit {
        let known = crate::history::History::open(&cfg.repo)
            .ok()
            .is_some_and(|h| {
                cfg.ignore
                    .iter()
                    .any(|rev| h.resolve(rev).is_ok_and(|id| id == culprit))
            });
        if known {
            db.record(SeriesEvent::Acknowledged { id: change.id })?;
            if let Some(head) = db.state.nights.iter().rev().find(|n| n.boots.is_some()) {
                let head = head.head.clone();
                db.record(SeriesEvent::Reference {
                    commit: head,
                    why: format!("change #{}: its culprit is in series.ignore", change.id),
                })?;
            }
            out.say(format!(
                "regression #{}: its culprit {} is in series.ignore: acknowledged",
                change.id,
                short(&culprit)
            ));
        }
    }
    Ok(())
}

/// A regression's state in a line.
pub fn describe(s: &RegressionState) -> String {
    match s {
        RegressionState::Hunting => "hunting".into(),
        RegressionState::Found {
            culprit,
            confirmed,
            probability,
        } => format!(
            "culprit {}{}",
            short(culprit),
            match (confirmed, probability) {
                (true, Some(p)) => format!(", confirmed at {:.0}%", p * 100.0),
                (true, None) => ", confirmed".into(),
                (false, _) => ", not confirmed by the re-test".into(),
            }
        ),
        RegressionState::NotReproduced { message } => format!("not reproduced: {message}"),
        RegressionState::Ambiguous { commits } => format!(
            "ambiguous: one of {}",
            commits
                .iter()
                .map(|c| short(c).to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        RegressionState::BudgetSpent { boots } => {
            format!("no answer within the boot budget ({boots} boots): a person decides")
        }
    }
}

/// `firstbad watch <series> ack <id>`: a person acknowledges change `id`; it stops alerting
/// and its culprit (or the first commit after it) becomes the reference.
pub fn acknowledge(cfg: &SeriesConfig, id: u32) -> Result<String, WatchError> {
    let _lock = hunt::state_dir::lock_state_dir(&cfg.state_dir)?;
    let mut db = SeriesDb::open(&db_path(&cfg.state_dir), meaning(cfg)?, &cfg.source)?;
    let Some(change) = db.state.changes.iter().find(|c| c.id == id).cloned() else {
        return Err(WatchError::BadInput(format!(
            "{}: no change #{id} in this series (`firstbad watch {} status` lists them)",
            cfg.source.display(),
            cfg.source.display()
        )));
    };
    if change.acknowledged {
        return Ok(format!("change #{id} was already acknowledged"));
    }
    db.record(SeriesEvent::Acknowledged { id })?;
    // The newest head measured is what "the series now" is: the acknowledged change is in it.
    let reference = db
        .state
        .nights
        .iter()
        .rev()
        .find(|n| n.boots.is_some())
        .map_or(change.bad.clone(), |n| n.head.clone());
    db.record(SeriesEvent::Reference {
        commit: reference.clone(),
        why: format!("change #{id} acknowledged"),
    })?;
    Ok(format!(
        "change #{id} acknowledged; the reference is now {}",
        short(&reference)
    ))
}

//! `firstbad watch`: nightly regression hunts. One cycle fetches the followed branch, boots
//! its new head against the series' reference (interleaved, a few boots each), places any
//! change among the nights, hunts a regression's first bad commit with the ordinary engine,
//! and tells people. Everything goes to the series database first; a cycle killed at any
//! point resumes on the next run.
//!
//! - `db.rs`: the series' events and their fold; `fetch.rs`: git2 fetch of the branch;
//! - `detect.rs`: from the nights to a change (the alarm and the history).

pub mod cli;
pub mod dashboard;
pub mod db;
pub mod detect;
pub mod fetch;
pub mod reports;
pub mod tell;

use crate::config::series::Measured;
use crate::config::{Build, HuntFile, SeriesConfig};
use crate::error::exit_code;
use crate::hunt::{self, short, HuntError, HuntState};
use crate::journal::{BootOutcome, Event, HuntEnd, Journal, JournalError};
use db::{Night, RegressionState, SecondLook, SeriesBoot, SeriesDb, SeriesEvent};
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
/// (a benchmark series has one).
pub fn hunt_of(cfg: &SeriesConfig, c: &db::Change) -> HuntFile {
    let mut hunt = cfg.hunt_between(&c.good, &c.bad, &hunt_dir(&cfg.state_dir, c.id));
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

/// Boots a night's head and reference to the series' count; its end goes to the database.
async fn run_night(
    cfg: &SeriesConfig,
    db: &mut SeriesDb,
    night: &Night,
    out: &mut Cycle,
) -> Result<(), WatchError> {
    let dir = night_dir(&cfg.state_dir, night.night);
    match measure(cfg, night, &dir, cfg.boots).await? {
        Ok((boots, summary)) => {
            db.record(SeriesEvent::NightMeasured {
                night: night.night,
                boots,
                summary: summary.clone(),
            })?;
            out.say(format!("night {}: {summary}", night.night));
        }
        Err(reason) => {
            db.record(SeriesEvent::NightFailed {
                night: night.night,
                reason: reason.clone(),
            })?;
            out.say(format!(
                "night {}: the head {} {reason}; the next head is tested on the next night",
                night.night,
                short(&night.head)
            ));
        }
    }
    Ok(())
}

/// Boots `night`'s head and reference `boots` times each, interleaved, in `dir`'s journal
/// (resuming it): every boot of the journal and the medians' summary, or why the head cannot
/// be measured ([`head_failure`]). Any other stop (the reference, a host) is an error, which
/// the next cycle resumes.
async fn measure(
    cfg: &SeriesConfig,
    night: &Night,
    dir: &Path,
    boots: usize,
) -> Result<Result<(Vec<SeriesBoot>, String), String>, WatchError> {
    let measured = match cfg.hunt_between(&night.reference, &night.head, dir) {
        HuntFile::Kernel(k) => hunt::measure_pair(&k, dir, boots).await,
        HuntFile::Local(l) => {
            let dir = dir.to_owned();
            off_runtime(move || {
                let m = l
                    .test
                    .measure
                    .as_ref()
                    .expect("a series' [test] is measured");
                crate::local::measured::measure_pair(&l, m, &dir, boots)
            })
            .await
        }
    };
    match measured {
        Ok(outcome) => {
            let summary = match outcome.end {
                HuntEnd::Measured { summary } => summary,
                other => format!("{other:?}"),
            };
            Ok(Ok((night_boots(cfg, dir)?, summary)))
        }
        Err(e) => match head_failure(cfg, dir, &night.head)? {
            Some(reason) => Ok(Err(reason)),
            None => Err(e.into()),
        },
    }
}

/// A second look at the newest night (issue 36, item 2): when its boots are suspicious and
/// not decisive ([`detect::suspicious`]), `series.second_look` more boots of each side the
/// same night, in the night's `second-look` journal (the kernels are cached: boots, no
/// builds), added to its boots before it is judged. Once a night; a cycle killed in it
/// resumes it.
async fn second_look(
    cfg: &SeriesConfig,
    db: &mut SeriesDb,
    out: &mut Cycle,
) -> Result<(), WatchError> {
    let Some(night) = db
        .state
        .nights
        .last()
        .filter(|n| n.boots.is_some())
        .cloned()
    else {
        return Ok(());
    };
    let n = night.night;
    match night.second_look {
        SecondLook::Measured => return Ok(()),
        SecondLook::None => {
            if cfg.second_look == 0 || db.state.judged.contains(&n) {
                return Ok(());
            }
            let Some(why) = detect::suspicious(cfg, &db.state, n) else {
                return Ok(());
            };
            db.record(SeriesEvent::SecondLookStarted {
                night: n,
                why: why.clone(),
            })?;
            out.say(format!(
                "night {n}: a second look, {} more boots of each side: {why}",
                cfg.second_look
            ));
        }
        SecondLook::Started => out.say(format!("night {n}: resuming its second look")),
    }
    let dir = night_dir(&cfg.state_dir, n).join("second-look");
    let (boots, summary) = if cfg.second_look == 0 {
        (
            Vec::new(),
            "second looks were turned off before it ended".to_owned(),
        )
    } else {
        match measure(cfg, &night, &dir, cfg.second_look).await? {
            Ok(measured) => measured,
            // What it measured before the head failed is kept.
            Err(reason) => (
                night_boots(cfg, &dir)?,
                format!("ended early: the head {reason}"),
            ),
        }
    };
    db.record(SeriesEvent::SecondLookMeasured {
        night: n,
        boots,
        summary: summary.clone(),
    })?;
    out.say(format!("night {n}: second look: {summary}"));
    Ok(())
}

/// Why a night's head cannot be measured (it does not build, or its boots fail), read from
/// the night's journal; `None` when the night stopped for another reason (the reference, a
/// host), which the next cycle resumes.
fn head_failure(cfg: &SeriesConfig, dir: &Path, head: &str) -> Result<Option<String>, WatchError> {
    let path = hunt::journal_path(dir);
    if !path.exists() {
        return Ok(None);
    }
    let entries = Journal::open_read_only(&path)?.events()?;
    let state = HuntState::replay(&entries);
    if let Some(failure) = state.builds.get(head).and_then(|b| b.failure()) {
        return Ok(Some(failure));
    }
    let boots = state.boots.get(head).map_or(&[][..], Vec::as_slice);
    let settings = match cfg.measured() {
        Measured::Kernel(k) => hunt::settings(k),
        Measured::Command(local, m) => {
            crate::local::measured::settings(local, m, m.classify.clone())
        }
    };
    Ok(hunt::judge::endpoint_failing(
        &settings, head, "head", boots,
    ))
}

/// Every boot of a night, from its journal.
fn night_boots(cfg: &SeriesConfig, dir: &Path) -> Result<Vec<SeriesBoot>, WatchError> {
    let config = match cfg.measured() {
        Measured::Kernel(k) => match &k.build {
            Build::Source(b) => std::fs::read(&b.kernel_config)
                .map(|k| hunt::prelude::content_hash(&k))
                .unwrap_or_default(),
            Build::Prebuilt(_) => String::new(),
        },
        // A benchmark's build is its [test] build, part of the series' meaning.
        Measured::Command(..) => String::new(),
    };
    let entries = Journal::open_read_only(&hunt::journal_path(dir))?.events()?;
    Ok(entries
        .into_iter()
        .filter_map(|e| match e.event {
            Event::BootFinished {
                commit,
                host,
                outcome,
                ..
            } => Some(match outcome {
                BootOutcome::Measured { value, result, .. } => SeriesBoot {
                    commit,
                    at_ms: e.at_ms,
                    host,
                    config: config.clone(),
                    value: Some(value),
                    metrics: result.metrics,
                    failed: None,
                },
                BootOutcome::Failed { reason, .. } => SeriesBoot {
                    commit,
                    at_ms: e.at_ms,
                    host,
                    config: config.clone(),
                    value: None,
                    metrics: BTreeMap::new(),
                    failed: Some(reason),
                },
            }),
            _ => None,
        })
        .collect())
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
        HuntFile::Kernel(k) => hunt::run_budgeted(&k, budget).await,
        HuntFile::Local(l) => {
            off_runtime(move || {
                let m = l
                    .test
                    .measure
                    .as_ref()
                    .expect("a series' [test] is measured");
                crate::local::measured::run_budgeted(&l, m, budget)
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

/// Runs a metric command hunt's engine, which drives its own single-threaded runtime (its
/// runs are timed: nothing else of firstbad's may share its thread), on a thread of its own.
async fn off_runtime(
    f: impl FnOnce() -> Result<hunt::Outcome, HuntError> + Send + 'static,
) -> Result<hunt::Outcome, HuntError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| HuntError::Infrastructure(format!("the command hunt's thread: {e}")))?
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

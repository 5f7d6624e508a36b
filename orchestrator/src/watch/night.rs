//! A series' night: its head and reference booted (or, for a benchmark, run) interleaved to
//! the series' count in the night's own journal, a second look the same night when its boots
//! are suspicious, and what the journal says of a head that cannot be measured.

use super::db::{Night, SecondLook, SeriesBoot, SeriesDb, SeriesEvent};
use super::{detect, night_dir, Cycle, WatchError};
use crate::config::series::Measured;
use crate::config::{Build, HuntFile, LocalConfig, MeasureConfig, SeriesConfig};
use crate::hunt::{self, short, HuntError, HuntState};
use crate::journal::{BootOutcome, Event, HuntEnd, Journal};
use std::collections::BTreeMap;
use std::path::Path;

/// Boots a night's head and reference to the series' count; its end goes to the database.
pub(super) async fn run_night(
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
/// (resuming it), on the series' own workload, then on each of `[[series.workloads]]` in
/// boots of its own (`dir/workloads/<name>`): every boot of the journals and the medians'
/// summaries, or why the head cannot be measured ([`head_failure`]). Any other stop (the
/// reference, a host) is an error, which the next cycle resumes.
async fn measure(
    cfg: &SeriesConfig,
    night: &Night,
    dir: &Path,
    boots: usize,
) -> Result<Result<(Vec<SeriesBoot>, String), String>, WatchError> {
    let mut all = Vec::new();
    let mut summaries = Vec::new();
    let workloads = std::iter::once(None).chain(cfg.workloads.iter().map(|w| Some(&*w.name)));
    for workload in workloads {
        let dir = workload.map_or_else(|| dir.to_owned(), |name| workload_dir(dir, name));
        match (
            measure_one(cfg, night, &dir, boots, workload).await?,
            workload,
        ) {
            (Ok((b, summary)), w) => {
                all.extend(b);
                summaries.push(w.map_or(summary.clone(), |w| format!("{w}: {summary}")));
            }
            (Err(reason), None) => return Ok(Err(reason)),
            (Err(reason), Some(w)) => return Ok(Err(format!("{reason} (workload {w})"))),
        }
    }
    Ok(Ok((all, summaries.join("; "))))
}

/// Where a night's (or a second look's) boots of the extra workload `name` are.
pub(super) fn workload_dir(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join("workloads").join(name)
}

/// [`measure`] on one workload: `None` is the series' own.
async fn measure_one(
    cfg: &SeriesConfig,
    night: &Night,
    dir: &Path,
    boots: usize,
    workload: Option<&str>,
) -> Result<Result<(Vec<SeriesBoot>, String), String>, WatchError> {
    let measured = match cfg.hunt_on(workload, &night.reference, &night.head, dir) {
        HuntFile::Kernel(k) => crate::engine::measure_pair(&k, dir, boots).await,
        HuntFile::Local(l) => {
            let dir = dir.to_owned();
            off_runtime(*l, move |l, m| {
                crate::local::measured::measure_pair(l, m, &dir, boots)
            })
            .await
        }
    };
    let ended = match measured {
        Ok(outcome) => {
            let summary = match outcome.end {
                HuntEnd::Measured { summary } => summary,
                other => format!("{other:?}"),
            };
            Ok((night_boots(cfg, dir, workload)?, summary))
        }
        Err(e) => match head_failure(cfg, dir, &night.head)? {
            Some(reason) => Err(reason),
            // Kept: the next cycle resumes the night in them.
            None => return Err(e.into()),
        },
    };
    remove_trees(cfg, dir);
    Ok(ended)
}

/// A benchmark series' checkouts in `dir` (a night's, its second look's, a hunt's) once what
/// runs in them has ended: a series that runs for months makes two or more a night and reads
/// none of them again. A kernel series has none (its kernels are in the build cache). A
/// failure is a warning: the night's values are in the database already.
pub(super) fn remove_trees(cfg: &SeriesConfig, dir: &Path) {
    let Measured::Command(..) = cfg.measured() else {
        return;
    };
    let trees = crate::local::measured::trees_dir(dir);
    match crate::build::remove_worktrees_under(&cfg.repo, &trees) {
        Ok(n) => tracing::debug!("removed {n} checkouts under {}", trees.display()),
        Err(e) => tracing::warn!("removing the checkouts under {}: {e}", trees.display()),
    }
}

/// A second look at the newest night (issue 36, item 2): when its boots are suspicious and
/// not decisive ([`detect::suspicious`]), `series.second_look` more boots of each side the
/// same night, in the night's `second-look` journal (the kernels are cached: boots, no
/// builds), added to its boots before it is judged. Once a night; a cycle killed in it
/// resumes it.
pub(super) async fn second_look(
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
                second_look_boots(cfg, &dir)?,
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
        Measured::Kernel(k) => crate::engine::settings(k),
        Measured::Command(local, m) => {
            crate::local::measured::settings(local, m, m.classify.clone())
        }
    };
    Ok(hunt::judge::endpoint_failing(
        &settings, head, "head", boots,
    ))
}

/// Every boot of a second look that ended early, of each workload it reached.
fn second_look_boots(cfg: &SeriesConfig, dir: &Path) -> Result<Vec<SeriesBoot>, WatchError> {
    let mut boots = night_boots(cfg, dir, None)?;
    for w in &cfg.workloads {
        let dir = workload_dir(dir, &w.name);
        if hunt::journal_path(&dir).exists() {
            boots.extend(night_boots(cfg, &dir, Some(&w.name))?);
        }
    }
    Ok(boots)
}

/// Every boot of a night on `workload` (`None`: the series' own), from its journal; an extra
/// workload's metrics are named `<workload>/<metric>`.
fn night_boots(
    cfg: &SeriesConfig,
    dir: &Path,
    workload: Option<&str>,
) -> Result<Vec<SeriesBoot>, WatchError> {
    let name = |m: String| match workload {
        None => m,
        Some(w) => format!("{w}/{m}"),
    };
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
                    metrics: result
                        .metrics
                        .into_iter()
                        .map(|(m, v)| (name(m), v))
                        .collect(),
                    failed: None,
                    workload: workload.map(str::to_owned),
                },
                BootOutcome::Failed { reason, .. } => SeriesBoot {
                    commit,
                    at_ms: e.at_ms,
                    host,
                    config: config.clone(),
                    value: None,
                    metrics: BTreeMap::new(),
                    failed: Some(reason),
                    workload: workload.map(str::to_owned),
                },
            }),
            _ => None,
        })
        .collect())
}

/// Runs a benchmark series' metric command hunt `f` on its hunt file, on a thread of its own:
/// its engine drives its own single-threaded runtime (its runs are timed: nothing else of
/// firstbad's may share its thread).
pub(super) async fn off_runtime(
    local: LocalConfig,
    f: impl FnOnce(&LocalConfig, &MeasureConfig) -> Result<hunt::Outcome, HuntError> + Send + 'static,
) -> Result<hunt::Outcome, HuntError> {
    tokio::task::spawn_blocking(move || {
        let m = local
            .test
            .measure
            .as_ref()
            .expect("a series' [test] has a metric (SeriesConfig::parse)");
        f(&local, m)
    })
    .await
    .map_err(|e| HuntError::Infrastructure(format!("the command hunt's thread: {e}")))?
}

//! From the nights to a change: each measured night is judged once by firstbad's nightly
//! detector ([`crate::changepoint`]: tonight's alarm and the E-divisive history), a confirmed
//! change is journalled once (one per change point, never one per night), and the reference
//! moves only when a person acknowledges a change or an improvement is confirmed.
//!
//! Why the reference stays put on quiet nights: the history is every night's head relative
//! to the same reference, so a change that creeps in over several nights adds up night after
//! night where E-divisive sees it; with a reference that followed the head, each night would
//! show only that night's increment, and a creep of 2% a night would never reach
//! `min_effect`. The reference's kernel is built once and cached, so it costs boots, not builds.

use super::db::{SeriesDb, SeriesEvent, SeriesState};
use super::{Cycle, WatchError};
use crate::changepoint::{self, DetectConfig, EDivisiveConfig, Night};
use crate::config::SeriesConfig;
use crate::hunt::short;

/// One measured night against the current reference.
struct Measured {
    night: u32,
    head: String,
    night_values: Night,
}

/// The nights measured against the current reference with values of `metric` (`None`: the
/// series' own) on both sides, oldest first: the history the detector reads (a reference that
/// moved starts a new one).
fn history(state: &SeriesState, metric: Option<&str>) -> Vec<Measured> {
    let Some(reference) = state.reference.as_deref() else {
        return Vec::new();
    };
    state
        .nights
        .iter()
        .filter(|n| n.boots.is_some() && n.reference == reference)
        .map(|n| Measured {
            night: n.night,
            head: n.head.clone(),
            night_values: Night {
                head: n.values_of(&n.head, metric),
                reference: n.values_of(&n.reference, metric),
            },
        })
        .filter(|m| !m.night_values.head.is_empty() && !m.night_values.reference.is_empty())
        .collect()
}

/// One metric's verdict on the newest night.
struct Judged {
    metric: String,
    nights: Vec<Measured>,
    detection: changepoint::Detection,
}

/// The detector's settings from the series file.
fn settings(cfg: &SeriesConfig) -> DetectConfig {
    DetectConfig {
        min_effect: cfg.detect.min_effect,
        alpha: cfg.detect.alpha,
        edivisive: EDivisiveConfig {
            window: cfg.detect.window,
            max_p_value: cfg.detect.max_p_value,
            ..EDivisiveConfig::default()
        },
        false_alarm_nights: cfg.detect.false_alarm_nights as f64,
    }
}

/// Every metric judged on its own history up to night `newest`, the series' own first; a
/// metric without values on both sides that night is left out.
fn judge(cfg: &SeriesConfig, state: &SeriesState, newest: u32) -> Vec<Judged> {
    let mut judged: Vec<Judged> = Vec::new();
    for (i, (metric, direction)) in cfg.metrics.iter().enumerate() {
        let nights = history(state, (i > 0).then_some(metric.as_str()));
        if nights.last().map(|m| m.night) != Some(newest) {
            continue;
        }
        let values: Vec<Night> = nights.iter().map(|m| m.night_values.clone()).collect();
        let detection = changepoint::detect(&values, *direction, &settings(cfg));
        judged.push(Judged {
            metric: metric.clone(),
            nights,
            detection,
        });
    }
    judged
}

/// Whether night `night`, measured and not judged yet, calls for a second look
/// ([`changepoint::second_look`] on any metric): what was suspicious, for a person. Not when
/// another metric raised its alarm tonight: the night is decided, and a second look would
/// only spend boots (one of every workload) before the change is opened.
pub fn suspicious(cfg: &SeriesConfig, state: &SeriesState, night: u32) -> Option<String> {
    let judged = judge(cfg, state, night);
    if judged
        .iter()
        .any(|j| changepoint::alarmed(&j.detection, j.nights.len() - 1))
    {
        return None;
    }
    let why: Vec<String> = judged
        .iter()
        .filter(|j| changepoint::second_look(&j.detection, j.nights.len() - 1))
        .filter_map(|j| {
            let a = j.detection.accumulated.as_ref()?;
            let sum = a.nights.last()?.sum;
            Some(format!(
                "{}: the sum of the nights' evidence stands at {:.0}% of its threshold ({:.2} of \
                 {:.2}) with no alarm",
                j.metric,
                100.0 * sum / a.threshold,
                sum,
                a.threshold
            ))
        })
        .collect();
    (!why.is_empty()).then(|| why.join("; "))
}

/// After a cycle's night: judges the newest measured night once, and journals a change the
/// detector confirms.
pub fn after_night(
    cfg: &SeriesConfig,
    db: &mut SeriesDb,
    out: &mut Cycle,
) -> Result<(), WatchError> {
    let Some(newest) = db.state.nights.iter().rev().find(|n| n.boots.is_some()) else {
        return Ok(());
    };
    let newest = newest.night;
    if db.state.judged.contains(&newest) {
        return Ok(());
    }
    let judged = judge(cfg, &db.state, newest);
    if judged.is_empty() {
        // The first night (head = reference) or a night without values on a side.
        db.record(SeriesEvent::Judged {
            night: newest,
            summary: "nothing to compare".into(),
        })?;
        return Ok(());
    }
    let tonight = judged
        .iter()
        .map(|j| {
            let d = &j.detection;
            d.tonight.as_ref().map_or_else(
                || format!("{}: no comparison", j.metric),
                |t| {
                    format!(
                        "{}: head against reference {:+.1}% ({:+.1}% to {:+.1}%, p = {:.2e}){}",
                        j.metric,
                        t.effect * 100.0,
                        t.low * 100.0,
                        t.high * 100.0,
                        t.p_value,
                        if d.alarm.is_some() { ": alarm" } else { "" }
                    )
                },
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    db.record(SeriesEvent::Judged {
        night: newest,
        summary: tonight.clone(),
    })?;
    out.say(format!("night {newest}: {tonight}"));
    // Several metrics that moved at one change make one change, judged and hunted on the
    // metric that moved most (regressions before improvements).
    let Some((j, change)) = judged
        .iter()
        .filter_map(|j| changepoint::confirmed(&j.detection).map(|c| (j, c)))
        .max_by(|(_, a), (_, b)| {
            (a.regression, a.effect.abs())
                .partial_cmp(&(b.regression, b.effect.abs()))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    else {
        return Ok(());
    };
    let nights = &j.nights;
    let moved: Vec<String> = judged
        .iter()
        .filter(|o| o.metric != j.metric)
        .filter_map(|o| {
            let c = changepoint::confirmed(&o.detection)?;
            (o.nights.get(c.night).map(|m| m.night) == nights.get(change.night).map(|m| m.night))
                .then(|| format!("{} {:+.1}%", o.metric, c.effect * 100.0))
        })
        .collect();
    let at = &nights[change.night];
    // The last commit tested before the change: the night before it, or the reference.
    let good = match change.night {
        0 => db
            .state
            .reference
            .clone()
            .expect("a history has a reference"),
        i => nights[i - 1].head.clone(),
    };
    let seen =
        db.state.changes.iter().any(|c| {
            c.regression == change.regression && (c.night == at.night || c.bad == at.head)
        });
    let holding = change.regression && db.state.unacknowledged_regression().is_some();
    if seen || holding {
        return Ok(());
    }
    let id = db.state.changes.len() as u32 + 1;
    let also = if moved.is_empty() {
        String::new()
    } else {
        format!("; also moved: {}", moved.join(", "))
    };
    let summary = format!(
        "{} {:+.1}% from night {} ({} to {} boot by boot, p = {:.2e}{also}; tonight: {tonight})",
        j.metric,
        change.effect * 100.0,
        at.night,
        format_args!("{:+.1}%", change.test.low * 100.0),
        format_args!("{:+.1}%", change.test.high * 100.0),
        change.test.p_value,
    );
    db.record(SeriesEvent::ChangeFound {
        id,
        night: at.night,
        good: good.clone(),
        bad: at.head.clone(),
        effect: change.effect,
        regression: change.regression,
        metric: j.metric.clone(),
        summary,
    })?;
    out.say(format!(
        "change #{id} at night {}: {} {:+.1}% between {} and {} ({})",
        at.night,
        j.metric,
        change.effect * 100.0,
        short(&good),
        short(&at.head),
        if change.regression {
            "a regression: hunting it"
        } else {
            "an improvement: recorded, and the newest head is the reference"
        }
    ));
    if change.regression {
        if let Some(known) = ignored(cfg, &good, &at.head)? {
            db.record(SeriesEvent::Acknowledged { id })?;
            let head = nights.last().expect("non-empty").head.clone();
            db.record(SeriesEvent::Reference {
                commit: head,
                why: format!("change #{id} holds {} of series.ignore", short(&known)),
            })?;
            out.say(format!(
                "change #{id}: {} is in series.ignore: acknowledged, not hunted",
                short(&known)
            ));
            return Ok(());
        }
    }
    if !change.regression && db.state.unacknowledged_regression().is_none() {
        let head = nights.last().expect("non-empty").head.clone();
        db.record(SeriesEvent::Reference {
            commit: head,
            why: format!("improvement #{id}"),
        })?;
    }
    Ok(())
}

/// The first commit of `series.ignore` between `good` (excluded) and `bad` (included): a known
/// change, acknowledged at once.
pub fn ignored(cfg: &SeriesConfig, good: &str, bad: &str) -> Result<Option<String>, WatchError> {
    if cfg.ignore.is_empty() {
        return Ok(None);
    }
    let history = crate::history::History::open(&cfg.repo)
        .map_err(|e| WatchError::BadInput(e.to_string()))?;
    let repo = history.repo();
    let oid = |s: &str| git2::Oid::from_str(s).ok();
    let (Some(g), Some(b)) = (oid(good), oid(bad)) else {
        return Ok(None);
    };
    let contains = |tip: git2::Oid, c: git2::Oid| {
        tip == c || repo.graph_descendant_of(tip, c).unwrap_or(false)
    };
    for (i, rev) in cfg.ignore.iter().enumerate() {
        // A revision not fetched yet (or mistyped) cannot be in the range: said, not fatal.
        let Ok(id) = history.resolve(rev) else {
            tracing::warn!(
                "series.ignore[{i}]: {rev:?} is not a commit of {}",
                cfg.repo.display()
            );
            continue;
        };
        let Some(c) = oid(&id) else { continue };
        if contains(b, c) && !contains(g, c) {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

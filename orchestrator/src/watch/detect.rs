//! From the nights to a change: each ended night is judged, a confirmed change is journalled
//! once (one per change point, never one per night), and the reference moves on when no
//! regression holds it.

use super::db::{SeriesDb, SeriesEvent, SeriesState};
use super::{Cycle, WatchError};
use crate::config::{Direction, SeriesConfig};
use crate::hunt::short;
use crate::sequential::oriented;
use crate::stats::median;

/// A change the detector confirms.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Index of the first night after the change, among the measured nights.
    pub index: usize,
    /// Signed relative move, > 0 worse.
    pub effect: f64,
    /// For a person.
    pub summary: String,
}

/// One measured night as the detector reads it.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The head's values.
    pub head: Vec<f64>,
    /// The reference's values, booted interleaved with the head's.
    pub reference: Vec<f64>,
}

/// The detector: whether the nights so far hold a confirmed change, and where.
pub fn find(nights: &[Measured], direction: Direction, min_effect: f64) -> Option<Found> {
    // Interim rule (until the change-point module lands): the newest night's head against its
    // own reference, every head boot beyond every reference boot and the medians at least
    // `min_effect` apart.
    let last = nights.last()?;
    if last.head.is_empty() || last.reference.is_empty() {
        return None;
    }
    let h: Vec<f64> = last.head.iter().map(|&v| oriented(v, direction)).collect();
    let r: Vec<f64> = last
        .reference
        .iter()
        .map(|&v| oriented(v, direction))
        .collect();
    let effect = (median(&h) - median(&r)).exp() - 1.0;
    let max = |v: &[f64]| v.iter().cloned().fold(f64::MIN, f64::max);
    let min = |v: &[f64]| v.iter().cloned().fold(f64::MAX, f64::min);
    let separated = min(&h) > max(&r) || max(&h) < min(&r);
    (separated && effect.abs() >= min_effect).then(|| Found {
        index: nights.len() - 1,
        effect,
        summary: format!(
            "{} boots of the head against {} of its reference the same night: {:+.1}%",
            h.len(),
            r.len(),
            effect * 100.0
        ),
    })
}

/// The measured nights of a series, oldest first, with their night numbers.
fn measured(state: &SeriesState) -> Vec<(u32, String, String, Measured)> {
    state
        .nights
        .iter()
        .filter(|n| n.boots.is_some())
        .map(|n| {
            (
                n.night,
                n.reference.clone(),
                n.head.clone(),
                Measured {
                    head: n.values(&n.head),
                    reference: n.values(&n.reference),
                },
            )
        })
        .collect()
}

/// After a cycle's night: journals a newly confirmed change, and moves the reference to the
/// newest head when no regression holds it.
pub fn after_night(
    cfg: &SeriesConfig,
    db: &mut SeriesDb,
    out: &mut Cycle,
) -> Result<(), WatchError> {
    let nights = measured(&db.state);
    let Some((last_night, _, last_head, _)) = nights.last().cloned() else {
        return Ok(());
    };
    if db.state.judged.contains(&last_night) {
        return Ok(());
    }
    let values: Vec<Measured> = nights.iter().map(|n| n.3.clone()).collect();
    let found = find(&values, cfg.hunt.workload.direction, cfg.detect.min_effect);
    let holding = db.state.unacknowledged_regression().cloned();
    db.record(SeriesEvent::Judged {
        night: last_night,
        summary: found
            .as_ref()
            .map_or_else(|| "no change".to_owned(), |f| f.summary.clone()),
    })?;
    match found {
        // The regression that holds the reference, seen again: the same change, not a new one.
        Some(f) if f.effect > 0.0 && holding.is_some() => {
            let c = holding.expect("matched");
            out.say(format!(
                "night {last_night}: still {:+.1}% against the reference: regression #{}",
                f.effect * 100.0,
                c.id
            ));
        }
        Some(f) => {
            let (night, reference, head, _) = &nights[f.index];
            let regression = f.effect > 0.0;
            let id = db.state.changes.len() as u32 + 1;
            db.record(SeriesEvent::ChangeFound {
                id,
                night: *night,
                good: reference.clone(),
                bad: head.clone(),
                effect: f.effect,
                regression,
                summary: f.summary.clone(),
            })?;
            out.say(format!(
                "change #{id} at night {night}: {} {:+.1}% between {} and {} ({})",
                cfg.hunt.workload.metric,
                f.effect * 100.0,
                short(reference),
                short(head),
                if regression {
                    "a regression: hunting it"
                } else {
                    "an improvement: recorded"
                }
            ));
            if !regression && db.state.unacknowledged_regression().is_none() {
                db.record(SeriesEvent::Reference {
                    commit: last_head,
                    why: format!("improvement #{id}"),
                })?;
            }
        }
        None if holding.is_none() => {
            db.record(SeriesEvent::Reference {
                commit: last_head.clone(),
                why: format!("night {last_night}: no regression"),
            })?;
        }
        None => {}
    }
    Ok(())
}

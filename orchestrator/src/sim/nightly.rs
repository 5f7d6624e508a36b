//! `firstbad sim --nightly`: firstbad's nightly detector on synthetic nightly series, side by
//! side with our re-implementations of Apache Otava's E-divisive (its defaults) and Mozilla
//! Perfherder's t-test.
//!
//! Pure code: replicate `r` of a cell draws from a `ChaCha12Rng` seeded from (seed, cell, r), and all
//! detectors watch the same series (a second look's boots come from a stream of their own), so a
//! table is reproducible bit for bit.
//!
//! # A series
//! [`NIGHTS`] nights. Each night boots the head [`BOOTS`] times and the reference as often,
//! interleaved on the same host. Boots are additive normal noise of σ = 10% of the mean (35 ms,
//! the existing sim's `normal`); the head regresses by Δ/σ · 10% from a night drawn uniformly in
//! [`CHANGE_FROM`]`..`[`CHANGE_TO`] — at once (`step`) or in [`CREEP_NIGHTS`] equal steps
//! (`creep`) — or never (`quiet`). The host's own behaviour multiplies head and reference
//! boots of the same night alike:
//! - `normal`: nothing.
//! - `outliers`: 5% of boots slowed 2–5x (something else ran on the host).
//! - `drift`: the host slows by 1σ per 100 boots ([`BOOTS`] × 2 a night), as the existing sim's.
//! - `step`: the host is 2σ slower from a night drawn uniformly in the series (another job, a
//!   firmware change), as the existing sim's.
//!
//! # What each detector sees, and when it alerts
//! Each detector runs after every night on the nights so far. An alert is new when it names a
//! night more than [`SAME_ALERT`] nights from every night alerted before (change points move by
//! a night or two as nights come in; watch would not hunt twice). It is true when it comes on or
//! after the change's night and names a night within [`SAME_ALERT`] of the change (of its first
//! to last night for a creep); every other new alert is false: on quiet series, before the
//! change, or at a host step or drift.
//! - `firstbad`: [`crate::changepoint::detect`] and [`crate::changepoint::confirmed`] on every
//!   boot of head and reference.
//! - `otava`: [`crate::changepoint::change_points`] with Otava's defaults on one value per
//!   night, the head's median; its regressions (mean after above mean before) alert.
//! - `perfherder`: [`crate::changepoint::alert_details`] with treeherder's defaults on the
//!   same values; its regressions alert.
//! - `firstbad, second look`: `firstbad` with [`crate::changepoint::second_look`]: a night
//!   whose sum stands past half its threshold with no alarm adds [`SECOND_LOOK_BOOTS`] more
//!   boots of each side, drawn as that night's, and is detected again (issue 36, item 2).

use crate::changepoint::{
    alert_details, change_points, confirmed, detect, second_look, DetectConfig, EDivisiveConfig,
    Night, PerfherderConfig,
};
use crate::config::Direction;
use crate::stats::median;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;
use rayon::prelude::*;
use std::fmt::Write as _;

use super::world::{normal, BASE, DRIFT_PER_BOOT, OUTLIER_SHARE, SIGMA_REL, STEP_SIGMAS};

/// Nights in a series: two months of nightlies.
pub const NIGHTS: usize = 60;
/// Boots of the head, and of the reference, each night: 8 boots of ~10 s fit a nightly slot.
pub const BOOTS: usize = 4;
/// The change lands on a night in CHANGE_FROM..CHANGE_TO: 10 nights of history before it at
/// least (E-divisive needs a level to compare with), 20 nights after it at least.
pub const CHANGE_FROM: usize = 10;
/// See [`CHANGE_FROM`].
pub const CHANGE_TO: usize = NIGHTS - 20;
/// Nights a creeping regression takes to reach its full size.
pub const CREEP_NIGHTS: usize = 5;
/// Alerts within this many nights of each other name the same change.
pub const SAME_ALERT: usize = 2;
/// The "detected within" column: a week of nights, the change's own night counted as 1.
pub const WITHIN: usize = 7;
/// Boots of the head, and of the reference, of a second look (issue 36, item 2): tonight's
/// count again, the series file's default (`second_look`).
pub const SECOND_LOOK_BOOTS: usize = BOOTS;
/// Replicates per cell without `--replicates`.
pub const NIGHTLY_REPLICATES: usize = 200;

/// The host's behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostNoise {
    /// Boot-to-boot noise only.
    Normal,
    /// Plus 5% outlier boots, slowed 2–5x.
    Outliers,
    /// Plus a steady slowing of the host.
    Drift,
    /// Plus a sudden, lasting 2σ move of the host.
    Step,
}

impl HostNoise {
    /// Short name in tables.
    pub fn name(self) -> &'static str {
        match self {
            HostNoise::Normal => "normal",
            HostNoise::Outliers => "outliers",
            HostNoise::Drift => "drift",
            HostNoise::Step => "step",
        }
    }
}

/// How the head changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// No change at all.
    Quiet,
    /// At once, on one night.
    Step,
    /// In [`CREEP_NIGHTS`] equal steps.
    Creep,
}

impl Change {
    /// Short name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Change::Quiet => "quiet",
            Change::Step => "step",
            Change::Creep => "creep",
        }
    }
}

/// One cell of the nightly table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NightlyCell {
    /// The host's behaviour.
    pub noise: HostNoise,
    /// The head's change.
    pub change: Change,
    /// Its size over the boot noise, Δ/σ (0 for quiet series).
    pub d: f64,
}

/// The detectors compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detector {
    /// firstbad's detector on every boot of head and reference.
    Firstbad,
    /// Otava's E-divisive (defaults) on the head's nightly median.
    Otava,
    /// Perfherder's t-test (defaults) on the head's nightly median.
    Perfherder,
    /// firstbad's detector with a second look: a night whose sum stands past half its
    /// threshold boots [`SECOND_LOOK_BOOTS`] more of each side ([`crate::changepoint::second_look`]).
    SecondLook,
}

impl Detector {
    /// All three, in table order.
    pub const ALL: [Detector; 4] = [
        Detector::Firstbad,
        Detector::SecondLook,
        Detector::Otava,
        Detector::Perfherder,
    ];

    /// Short name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Detector::Firstbad => "firstbad",
            Detector::Otava => "otava",
            Detector::Perfherder => "perfherder",
            Detector::SecondLook => "firstbad, second look",
        }
    }
}

/// The cells of the table: four host kinds × three sizes of step, two sizes of creep on the
/// normal host, and a quiet series on each host.
pub fn nightly_cells() -> Vec<NightlyCell> {
    let hosts = [
        HostNoise::Normal,
        HostNoise::Outliers,
        HostNoise::Drift,
        HostNoise::Step,
    ];
    let mut v = Vec::new();
    for noise in hosts {
        for d in [0.5, 1.0, 2.0] {
            v.push(NightlyCell {
                noise,
                change: Change::Step,
                d,
            });
        }
        if noise == HostNoise::Normal {
            for d in [1.0, 2.0] {
                v.push(NightlyCell {
                    noise,
                    change: Change::Creep,
                    d,
                });
            }
        }
        v.push(NightlyCell {
            noise,
            change: Change::Quiet,
            d: 0.0,
        });
    }
    v
}

/// A drawn series: its nights and where the head changed (None when quiet).
pub struct Series {
    /// The nights, oldest first.
    pub nights: Vec<Night>,
    /// The night the change lands on.
    pub change: Option<usize>,
    /// Each night's second look, when one is asked for: [`SECOND_LOOK_BOOTS`] more boots of
    /// each side, from a stream of their own (the series is the same with or without them).
    pub second: Vec<Night>,
}

/// Draws the series of replicate `seed` of `cell`.
pub fn draw(cell: &NightlyCell, seed: u64) -> Series {
    let mut rng = ChaCha12Rng::seed_from_u64(seed);
    let change = (cell.change != Change::Quiet).then(|| rng.gen_range(CHANGE_FROM..CHANGE_TO));
    let host_step = rng.gen_range(1..NIGHTS);
    let full = SIGMA_REL * cell.d;
    let nights = (0..NIGHTS)
        .map(|i| {
            let level = match (cell.change, change) {
                (Change::Step, Some(c)) if i >= c => 1.0 + full,
                (Change::Creep, Some(c)) if i >= c => {
                    1.0 + full * ((i - c + 1) as f64 / CREEP_NIGHTS as f64).min(1.0)
                }
                _ => 1.0,
            };
            let host = match cell.noise {
                HostNoise::Drift => 1.0 + SIGMA_REL * DRIFT_PER_BOOT * (2 * BOOTS * i) as f64,
                HostNoise::Step if i >= host_step => 1.0 + SIGMA_REL * STEP_SIGMAS,
                _ => 1.0,
            };
            let boot = |level: f64, rng: &mut ChaCha12Rng| {
                let mut v = BASE * (host * level + SIGMA_REL * normal(rng));
                if cell.noise == HostNoise::Outliers && rng.gen::<f64>() < OUTLIER_SHARE {
                    v *= rng.gen_range(2.0..5.0);
                }
                v.max(0.01 * BASE)
            };
            let night = |boots: usize, rng: &mut ChaCha12Rng| {
                let mut night = Night::default();
                for _ in 0..boots {
                    // Interleaved: head, reference, head, reference...
                    night.head.push(boot(level, rng));
                    night.reference.push(boot(1.0, rng));
                }
                night
            };
            let tonight = night(BOOTS, &mut rng);
            let mut own = ChaCha12Rng::seed_from_u64(
                seed ^ 0x5EC0_4D00 ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            (tonight, night(SECOND_LOOK_BOOTS, &mut own))
        })
        .collect::<Vec<_>>();
    let (nights, second) = nights.into_iter().unzip();
    Series {
        nights,
        change,
        second,
    }
}

/// The new alerts of one detector on a series: (night raised, night named), and the boots it
/// spent (head and reference).
pub fn alerts_over(detector: Detector, series: &Series) -> (Vec<(usize, usize)>, usize) {
    let medians: Vec<f64> = series.nights.iter().map(|n| median(&n.head)).collect();
    let cfg = DetectConfig::default();
    let mut raised: Vec<(usize, usize)> = Vec::new();
    let mut nights: Vec<Night> = Vec::new();
    for t in 0..NIGHTS {
        nights.push(series.nights[t].clone());
        let named: Vec<usize> = match detector {
            Detector::Firstbad => {
                let d = detect(&nights, Direction::LowerIsBetter, &cfg);
                confirmed(&d).map(|c| c.night).into_iter().collect()
            }
            Detector::SecondLook => {
                let mut d = detect(&nights, Direction::LowerIsBetter, &cfg);
                if second_look(&d, t) {
                    let more = &series.second[t];
                    nights[t].head.extend_from_slice(&more.head);
                    nights[t].reference.extend_from_slice(&more.reference);
                    d = detect(&nights, Direction::LowerIsBetter, &cfg);
                }
                confirmed(&d).map(|c| c.night).into_iter().collect()
            }
            Detector::Otava => change_points(&medians[..=t], &EDivisiveConfig::default())
                .into_iter()
                .filter(|c| c.mean_after > c.mean_before)
                .map(|c| c.index)
                .collect(),
            Detector::Perfherder => alert_details(&medians[..=t], &PerfherderConfig::default())
                .into_iter()
                .filter(|a| a.fore_mean > a.back_mean)
                .map(|a| a.index)
                .collect(),
        };
        for j in named {
            if raised.iter().all(|&(_, k)| j.abs_diff(k) > SAME_ALERT) {
                raised.push((t, j));
            }
        }
    }
    let boots = nights
        .iter()
        .map(|n| n.head.len() + n.reference.len())
        .sum();
    (raised, boots)
}

/// What one replicate gave: the night of detection counted from the change's night (1 = that
/// night), and the false alerts.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Outcome {
    detected: Option<usize>,
    false_alerts: usize,
    boots: usize,
}

fn outcome(cell: &NightlyCell, detector: Detector, seed: u64) -> Outcome {
    let series = draw(cell, seed);
    let (alerts, boots) = alerts_over(detector, &series);
    let span = match cell.change {
        Change::Creep => CREEP_NIGHTS - 1,
        _ => 0,
    };
    let mut detected = None;
    let mut false_alerts = 0;
    for (t, j) in alerts {
        let right = series
            .change
            .is_some_and(|c| t >= c && j + SAME_ALERT >= c && j <= c + span + SAME_ALERT);
        match (right, detected) {
            (true, None) => detected = series.change.map(|c| t - c + 1),
            (true, Some(_)) => {}
            (false, _) => false_alerts += 1,
        }
    }
    Outcome {
        detected,
        false_alerts,
        boots,
    }
}

/// Figures of one detector over the replicates of one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct NightlyResult {
    /// The cell.
    pub cell: NightlyCell,
    /// The detector.
    pub detector: Detector,
    /// Replicates run.
    pub replicates: usize,
    /// Share detected within [`WITHIN`] nights of the change (its night counted as 1).
    pub within: f64,
    /// Share detected by the end of the series (at least 20 nights after the change).
    pub detected: f64,
    /// Median nights to detection (1 = the change's night), undetected counted as never; None
    /// when half or more were never detected.
    pub median_nights: Option<f64>,
    /// False alerts per 100 nights watched.
    pub false_per_100: f64,
    /// Boots a night, head and reference together, over the series' nights.
    pub boots_per_night: f64,
}

/// Runs `replicates` series of `cell` through `detector` on rayon's threads; replicate `r` uses
/// seed `seed ^ hash(cell) ^ r`, the same series for every detector.
pub fn run_nightly(
    cell: &NightlyCell,
    detector: Detector,
    replicates: usize,
    seed: u64,
) -> NightlyResult {
    let key = (cell.noise as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(cell.change as u64 * 31 + (cell.d * 1000.0) as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // Collected in replicate order, so the figures do not depend on the threads.
    let outcomes: Vec<Outcome> = (0..replicates)
        .into_par_iter()
        .map(|r| {
            outcome(
                cell,
                detector,
                seed ^ key ^ (r as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
            )
        })
        .collect();
    let n = replicates.max(1) as f64;
    let count = |f: &dyn Fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count() as f64;
    let mut nights: Vec<usize> = outcomes
        .iter()
        .map(|o| o.detected.unwrap_or(usize::MAX))
        .collect();
    nights.sort_unstable();
    let median_nights = match nights.len() {
        0 => None,
        len if len % 2 == 1 => Some(nights[len / 2]),
        len => Some(nights[len / 2 - 1].max(nights[len / 2])),
    }
    .filter(|&m| m != usize::MAX)
    .map(|m| m as f64);
    let false_alerts: usize = outcomes.iter().map(|o| o.false_alerts).sum();
    NightlyResult {
        cell: *cell,
        detector,
        replicates,
        within: count(&|o| o.detected.is_some_and(|d| d <= WITHIN)) / n,
        detected: count(&|o| o.detected.is_some()) / n,
        median_nights: if cell.change == Change::Quiet {
            None
        } else {
            median_nights
        },
        false_per_100: 100.0 * false_alerts as f64 / (n * NIGHTS as f64),
        boots_per_night: outcomes.iter().map(|o| o.boots).sum::<usize>() as f64
            / (n * NIGHTS as f64),
    }
}

/// Every cell with every detector; `progress` sees each row as it is done.
pub fn nightly_table(
    replicates: usize,
    seed: u64,
    mut progress: impl FnMut(&NightlyResult),
) -> Vec<NightlyResult> {
    let mut rows = Vec::new();
    for cell in nightly_cells() {
        for detector in Detector::ALL {
            let r = run_nightly(&cell, detector, replicates, seed);
            progress(&r);
            rows.push(r);
        }
    }
    rows
}

/// The header of [`nightly_markdown`].
const HEADER: &str =
    "| host | change | Δ/σ | detector | detected ≤ 7 nights | detected by night 60 \
                      | median nights to detection | false alarms / 100 nights | boots / night |\n\
                      |---|---|---|---|---|---|---|---|---|\n";

/// One row of [`nightly_markdown`].
pub fn nightly_row(r: &NightlyResult) -> String {
    let quiet = r.cell.change == Change::Quiet;
    let pct = |x: f64| {
        if quiet {
            "—".to_string()
        } else {
            format!("{:.1}%", 100.0 * x)
        }
    };
    let median = match (quiet, r.median_nights) {
        (true, _) => "—".to_string(),
        (false, Some(m)) => format!("{m:.0}"),
        (false, None) => "never (< half)".to_string(),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.1} |\n",
        r.cell.noise.name(),
        r.cell.change.name(),
        if quiet {
            "—".to_string()
        } else {
            format!("{}", r.cell.d)
        },
        r.detector.name(),
        pct(r.within),
        pct(r.detected),
        median,
        r.false_per_100,
        r.boots_per_night
    )
}

/// The table as Markdown.
pub fn nightly_markdown(rows: &[NightlyResult]) -> String {
    let mut s = String::from(HEADER);
    for r in rows {
        let _ = write!(s, "{}", nightly_row(r));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_reproducible_and_the_host_hits_both_commits() {
        let cell = NightlyCell {
            noise: HostNoise::Step,
            change: Change::Quiet,
            d: 0.0,
        };
        let (a, b) = (draw(&cell, 9), draw(&cell, 9));
        assert_eq!(a.nights, b.nights);
        assert_eq!(a.change, None);
        // The host's step moves head and reference alike: their ratio stays near 1.
        let ratio: Vec<f64> = a
            .nights
            .iter()
            .map(|n| median(&n.head) / median(&n.reference))
            .collect();
        let head: Vec<f64> = a.nights.iter().map(|n| median(&n.head)).collect();
        let spread = |v: &[f64]| {
            v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)
        };
        assert!(
            spread(&head) / BASE > spread(&ratio) * 0.9,
            "{head:?} {ratio:?}"
        );
    }

    #[test]
    fn a_second_look_adds_boots_on_some_nights_and_leaves_the_series_as_it_was() {
        let cell = NightlyCell {
            noise: HostNoise::Normal,
            change: Change::Step,
            d: 1.0,
        };
        let series = draw(&cell, 3);
        let plain = 2 * BOOTS * NIGHTS;
        assert_eq!(alerts_over(Detector::Firstbad, &series).1, plain);
        let (_, looked) = alerts_over(Detector::SecondLook, &series);
        assert!(
            looked > plain && looked < 2 * plain,
            "{looked} boots against {plain}"
        );
        // The second looks come from their own stream: the nights are the same draws.
        let again = draw(&cell, 3);
        assert_eq!(series.nights, again.nights);
        assert_eq!(series.second, again.second);
    }

    #[test]
    fn a_large_step_is_found_by_all_three_and_perfherder_waits_for_its_window() {
        let cell = NightlyCell {
            noise: HostNoise::Normal,
            change: Change::Step,
            d: 4.0,
        };
        let f = run_nightly(&cell, Detector::Firstbad, 20, 1);
        let o = run_nightly(&cell, Detector::Otava, 20, 1);
        let p = run_nightly(&cell, Detector::Perfherder, 20, 1);
        assert!(f.within >= 0.95 && o.within >= 0.95, "{f:?} {o:?}");
        // Perfherder's fore window of 12: never within a week, always by night 60.
        assert_eq!(p.within, 0.0, "{p:?}");
        assert!(p.detected >= 0.85 && p.median_nights >= Some(12.0), "{p:?}");
        // The same table from the same seed.
        assert_eq!(f, run_nightly(&cell, Detector::Firstbad, 20, 1));
    }
}

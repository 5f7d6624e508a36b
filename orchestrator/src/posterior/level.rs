//! How much of the regression a commit carries: where its boots sit between the good and bad
//! centres once the host's move is taken out ([`level`]), and what a culprit's and its parent's
//! levels say of the rest ([`rest`]).

use super::dag::{Evidence, HostMove};

/// Where a commit's boots sit between the good centre (0) and the bad centre (1), after the
/// host's move is taken out, with a 95% interval: for the confirmation, so that a culprit
/// that explains only part of the regression (two culprits, as with the CFQ queue-depth and
/// dirty-ratio changes that together made fsync take 20 s) is said to be part of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// The estimate.
    pub level: f64,
    /// The interval's lower end.
    pub lo: f64,
    /// The interval's upper end.
    pub hi: f64,
}

/// [`Level`] of the commit whose boots gave `e`, on the host that moved as `host` says
/// ([`dag_posterior_with_host`](super::dag_posterior_with_host)). The interval carries the commit's
/// own boots and both centres' errors (1/n_baseline each): Var ≈ (1/k + ((1 − L)² + L²)/n_baseline)
/// / (Δ/σ)². `None` without an effect to measure against.
pub fn level(e: &Evidence, host: &HostMove) -> Option<Level> {
    if e.effect <= 0.0 || e.boots.is_empty() {
        return None;
    }
    let moved = |t: f64| {
        host.trend * t
            + host
                .step
                .map_or(0.0, |(at, size)| if t >= at { size } else { 0.0 })
    };
    let k = e.boots.len() as f64;
    let mean = e.boots.iter().map(|&(y, t)| y - moved(t)).sum::<f64>() / k;
    let l = mean / e.effect;
    let var = (1.0 / k + ((1.0 - l).powi(2) + l * l) / e.n_baseline) / (e.effect * e.effect);
    // The normal quantile of 0.975.
    let half = 1.959_963_984_540_054 * var.sqrt();
    Some(Level {
        level: l,
        lo: l - half,
        hi: l + half,
    })
}

/// What the [`Level`]s of a culprit and its parent say of the rest of the regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rest {
    /// The culprit is clearly short of bad, by at least the floor: more comes after it.
    pub after: bool,
    /// The parent is clearly worse than good, by at least the floor: some comes before it.
    pub before: bool,
}

/// [`Rest`] from the parent's and the culprit's levels; `floor` is the smallest part that counts,
/// as a share of the regression (the hunt's `min_effect`, by
/// [`Model::share_of`](crate::sequential::Model::share_of): with a regression of 1800%, 3% of it
/// left over is still 9% slower, and counts). A part must be outside the 95% interval and at least
/// the floor by its estimate.
pub fn rest(parent: &Level, culprit: &Level, floor: f64) -> Rest {
    Rest {
        after: culprit.hi < 1.0 && 1.0 - culprit.level >= floor,
        before: parent.lo > 0.0 && parent.level >= floor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_is_where_the_boots_sit_between_the_centres_after_the_host_s_move() {
        // Δ/σ = 2, centres from 8 boots each; 4 boots at 1σ above good: half-way.
        let ev = |boots: Vec<(f64, f64)>| Evidence {
            k: boots.len(),
            above_good: boots.iter().map(|b| b.0).sum::<f64>() / boots.len() as f64,
            effect: 2.0,
            n_baseline: 8.0,
            at: 0.0,
            stt: 0.0,
            sty: 0.0,
            boots,
        };
        let still = HostMove {
            trend: 0.0,
            step: None,
        };
        let l = level(&ev(vec![(1.0, 0.0); 4]), &still).unwrap();
        // Var = (1/4 + (0.25 + 0.25)/8) / 4 = 0.078125; half-width 1.96 · 0.27951 = 0.54783.
        assert!((l.level - 0.5).abs() < 1e-12, "{l:?}");
        assert!((l.hi - l.level - 0.547_827).abs() < 1e-6, "{l:?}");
        assert!((l.level - l.lo - 0.547_827).abs() < 1e-6, "{l:?}");
        // The same commit on a host slowing 0.5σ per unit of time, and one that stepped 2σ at
        // time 1: the move is taken out.
        let times = [0.0, 1.0, 2.0, 3.0];
        let trending = ev(times.iter().map(|&t| (1.0 + 0.5 * t, t)).collect());
        let trend = HostMove {
            trend: 0.5,
            step: None,
        };
        assert!((level(&trending, &trend).unwrap().level - 0.5).abs() < 1e-12);
        let stepped = ev(times
            .iter()
            .map(|&t| (if t >= 1.0 { 3.0 } else { 1.0 }, t))
            .collect());
        let step = HostMove {
            trend: 0.0,
            step: Some((1.0, 2.0)),
        };
        assert!((level(&stepped, &step).unwrap().level - 0.5).abs() < 1e-12);
        // Nothing to measure against.
        let flat = Evidence {
            effect: 0.0,
            ..ev(vec![(1.0, 0.0)])
        };
        assert_eq!(level(&flat, &still), None);
    }
}

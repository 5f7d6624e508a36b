//! A host whose level wanders: shifts of a few σ that last a few minutes and come back (issue
//! 31 item 4: a qemu host's good endpoint went from 4 ms to 7-9 ms over tens of boots and back,
//! and candidates judged against the baselines' centres were called bad for it). Neither the
//! drift check, which waits for a move to last, nor the posterior's trend and one step sees a
//! level that moves and returns; reference boots from the same minutes do.
//!
//! [`HostLevel`] reads the endpoints' boots (baselines, drift checks, and the references the
//! hunt interleaves once the host wanders) as the host's level over boot time: each boot's
//! residual from its own side's centre. On a steady host the residuals of two boots a few
//! boots apart are uncorrelated; on one that wanders they share the level they were booted at,
//! and their mean product estimates the wander's variance τ² (the candidates' boots, read
//! against their own mean, count too: a hunt boots its endpoints side by side only in its
//! baselines). Only when that covariance is significant ([`WANDER_Z`]) and the wander is at
//! least a quarter of the regression ([`DRIFT_MIN_SHIFT`]: below it no verdict is at risk, and
//! a hunt of a large regression spends nothing on it) does the hunt change anything: a boot is
//! then read less the host's level at its time, the shrunk mean of the nearest references
//! ([`HostLevel::at`]), and the hunt boots a reference every [`WANDER_REF_EVERY`] boots so
//! that such references exist. A steady host is judged as before, at no extra boot.
//!
//! Measured on `firstbad sim`'s wandering host (docs/simulation.md, "A host that wanders"):
//! the right commit in about half the runs at Δ/σ = 1 instead of 6-18%; short of the normal
//! host's 96%, whose figures it leaves as they were.

use super::{Model, DRIFT_MIN_SHIFT};
use crate::config::Direction;

/// Largest gap, in boots, between two endpoint boots whose residuals are read as one level of
/// the host: the shifts of a wandering host last tens of boots, so four apart share one most
/// of the time.
pub const WANDER_PAIR_GAP: f64 = 4.0;

/// Fewest such pairs before the covariance is read at all.
pub const WANDER_MIN_PAIRS: usize = 6;

/// One-sided z past which the pairs' mean product is wander rather than chance (5%): the
/// product of two independent residuals has variance 1, so the mean of n has standard error
/// 1/√n. On `firstbad sim`'s steady host a 5% false reading costs no visible boots (the
/// wander must also matter, below); at 1% the wandering host was found later, 3-5 points of
/// accuracy fewer.
pub const WANDER_Z: f64 = 1.645;

/// Reference boots, nearest in time, a boot's level is read from.
pub const LEVEL_REFS: usize = 4;

/// Furthest reference, in boots either side, that says where the host stood at a boot.
pub const LEVEL_REACH: f64 = 8.0;

/// Boots between references once the host is seen to wander: every candidate boot has one
/// within a boot or two on each side.
pub const WANDER_REF_EVERY: usize = 2;

/// Products of the residuals of boots next to each other in time, [`WANDER_PAIR_GAP`] boots
/// apart at most: (boot time, residual) sorted by time.
fn lag_products(boots: &[(f64, f64)]) -> Vec<f64> {
    boots
        .windows(2)
        .filter(|w| w[1].0 - w[0].0 <= WANDER_PAIR_GAP)
        .map(|w| w[0].1 * w[1].1)
        .collect()
}

/// The host's level over boot time, read from the endpoints' boots.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLevel {
    /// (boot time, residual from its side's centre in σ), oldest first.
    refs: Vec<(f64, f64)>,
    /// The wander's variance τ² in σ², 0 when the endpoints' boots show none.
    pub wander: f64,
    /// The boot noise left beside it, in σ² (1 on a steady host).
    pub noise: f64,
    /// Pairs the wander was read from.
    pub pairs: usize,
}

impl HostLevel {
    /// A host that does not wander: every boot read as it was measured.
    pub fn steady() -> HostLevel {
        HostLevel {
            refs: Vec::new(),
            wander: 0.0,
            noise: 1.0,
            pairs: 0,
        }
    }

    /// The level from endpoint boots given as (raw value, boot time, whether it is a boot of
    /// the bad endpoint), and the boots of other commits, each commit's (raw value, boot time);
    /// boots the model does not admit are left out. Only the endpoints say where the host
    /// stands; every commit's boots, read against their own mean, say whether it wanders (a
    /// hunt boots its endpoints together only in its baselines, its candidates all along).
    pub fn new(model: &Model, boots: &[(f64, f64, bool)], others: &[Vec<(f64, f64)>]) -> HostLevel {
        let mut refs: Vec<(f64, f64)> = boots
            .iter()
            .filter_map(|&(v, t, bad)| {
                let y = model.admit(v)?;
                let centre = if bad { model.bad } else { model.good };
                Some((t, (y - centre) / model.sigma))
            })
            .collect();
        refs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut products = lag_products(&refs);
        for commit in others {
            let mut own: Vec<(f64, f64)> = commit
                .iter()
                .filter_map(|&(v, t)| Some((t, model.admit(v)?)))
                .collect();
            if own.len() < 3 {
                continue;
            }
            // Residuals from the commit's own mean: under a steady host two of them have
            // covariance −1/k, which each product gets back.
            let k = own.len() as f64;
            let mean = own.iter().map(|b| b.1).sum::<f64>() / k;
            for b in &mut own {
                b.1 = (b.1 - mean) / model.sigma;
            }
            own.sort_by(|a, b| a.0.total_cmp(&b.0));
            products.extend(lag_products(&own).into_iter().map(|p| p + 1.0 / k));
        }
        let pairs = products.len();
        let mut level = HostLevel {
            refs,
            pairs,
            ..HostLevel::steady()
        };
        // No endpoint boot to read the level from (none admitted), or too few pairs.
        if level.refs.is_empty() || pairs < WANDER_MIN_PAIRS {
            return level;
        }
        let n = pairs as f64;
        let c = products.iter().sum::<f64>() / n;
        if c * n.sqrt() < WANDER_Z || c.sqrt() < DRIFT_MIN_SHIFT * model.effect_over_noise() {
            return level;
        }
        let total = level.refs.iter().map(|r| r.1 * r.1).sum::<f64>() / level.refs.len() as f64;
        level.wander = c;
        // The boot noise is what the wander leaves of the residuals' spread; never less than a
        // tenth of it, so that a level read from few boots is not taken as exact.
        level.noise = (total - c).max(0.1 * total);
        level
    }

    /// Whether the endpoints' boots show the host wandering.
    pub fn wanders(&self) -> bool {
        self.wander > 0.0
    }

    /// The host's level at boot time `t`, in σ from the centres: the mean residual of the
    /// [`LEVEL_REFS`] references nearest in time within [`LEVEL_REACH`] boots (the boot at `t`
    /// itself left out, so that a reference is not read against itself), shrunk towards 0 by
    /// τ² / (τ² + noise / k). 0 on a steady host.
    pub fn at(&self, t: f64) -> f64 {
        if !self.wanders() {
            return 0.0;
        }
        let mut near: Vec<(f64, f64)> = self
            .refs
            .iter()
            .filter(|r| r.0 != t && (r.0 - t).abs() <= LEVEL_REACH)
            .map(|r| ((r.0 - t).abs(), r.1))
            .collect();
        near.sort_by(|a, b| a.0.total_cmp(&b.0));
        near.truncate(LEVEL_REFS);
        if near.is_empty() {
            return 0.0;
        }
        let k = near.len() as f64;
        let mean = near.iter().map(|r| r.1).sum::<f64>() / k;
        mean * self.wander / (self.wander + self.noise / k)
    }

    /// A raw boot value with the host's level at its boot time `t` taken out.
    pub fn adjust(&self, model: &Model, value: f64, t: f64) -> f64 {
        let moved = self.at(t) * model.sigma;
        if moved == 0.0 || value <= 0.0 {
            return value;
        }
        match model.direction {
            Direction::LowerIsBetter => value * (-moved).exp(),
            Direction::HigherIsBetter => value * moved.exp(),
        }
    }

    /// [`HostLevel::adjust`] over (raw value, boot time) boots.
    pub fn adjusted(&self, model: &Model, boots: &[(f64, f64)]) -> Vec<(f64, f64)> {
        boots
            .iter()
            .map(|&(v, t)| (self.adjust(model, v, t), t))
            .collect()
    }

    /// A one-line account for a person.
    pub fn describe(&self) -> String {
        format!(
            "the endpoints' boots a few boots apart share the host's level: wander {:.2}σ \
             against boot noise {:.2}σ, from {} pairs; each boot is read less the level of the \
             references beside it",
            self.wander.sqrt(),
            self.noise.sqrt(),
            self.pairs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequential::oriented;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn model() -> Model {
        Model {
            good: 100f64.ln(),
            bad: 110f64.ln(),
            sigma: 0.1,
            direction: Direction::LowerIsBetter,
            n_baseline: 16.0,
        }
    }

    /// Endpoint boots alternating good and bad, one a boot, with the host's level (in σ) at
    /// each boot from `level`.
    fn boots(n: usize, seed: u64, level: impl Fn(usize) -> f64) -> Vec<(f64, f64, bool)> {
        let m = model();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let bad = i % 2 == 1;
                let centre = if bad { m.bad } else { m.good };
                let z = crate::sim::normal(&mut rng);
                let y = centre + (z + level(i)) * m.sigma;
                (y.exp(), i as f64, bad)
            })
            .collect()
    }

    #[test]
    fn a_steady_host_is_read_as_measured() {
        let m = model();
        let mut seen = 0;
        for seed in 0..200 {
            let h = HostLevel::new(&m, &boots(40, seed, |_| 0.0), &[]);
            seen += usize::from(h.wanders());
            if !h.wanders() {
                assert_eq!(h.adjust(&m, 123.0, 10.5), 123.0);
            }
        }
        // One-sided 5%: about ten in 200 at most.
        assert!(seen <= 15, "{seen} of 200 steady hosts read as wandering");
    }

    #[test]
    fn a_host_that_shifts_and_comes_back_is_seen_and_its_level_read_from_the_references_beside_a_boot(
    ) {
        let m = model();
        // 3σ up for boots 10-29, back after.
        let shifted = |i: usize| if (10..30).contains(&i) { 3.0 } else { 0.0 };
        let h = HostLevel::new(&m, &boots(60, 7, shifted), &[]);
        assert!(h.wanders() && h.wander > 1.0, "{h:?}");
        // A candidate boot at 20.5 sits in the shift: its level is read near 3σ; one at 45.5
        // near 0.
        let inside = h.at(20.5);
        let outside = h.at(45.5);
        assert!((2.0..4.0).contains(&inside), "{inside}");
        assert!(outside.abs() < 1.0, "{outside}");
        // Its value is taken back to where the host was calm.
        let v = (m.good + 3.0 * m.sigma).exp();
        let back = oriented(h.adjust(&m, v, 20.5), m.direction);
        assert!((back - m.good).abs() < 1.0 * m.sigma, "{back}");
        // Far from every reference: nothing known, nothing moved.
        assert_eq!(h.at(200.0), 0.0);
    }
}

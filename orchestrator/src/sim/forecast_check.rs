//! `firstbad sim --forecast`: the forecast ([`super::forecast`]) against what the hunt then
//! spent. Each replicate draws a history of the cell, runs `firstbad run` on it, makes the
//! forecast from the baselines that hunt confirmed (as the product makes it, on a world fitted
//! to them), and sets it beside the boots the hunt spent after its baselines and whether it
//! named the culprit.

use super::forecast::{self, Input};
use super::*;
use crate::hunt::judge::RefineProbe;

/// The forecast's figures beside the hunts' over one cell's replicates.
#[derive(Debug, Clone, PartialEq)]
pub struct ForecastCheck {
    /// The cell.
    pub cell: Cell,
    /// Hunts whose baselines confirmed the regression (the others make no forecast).
    pub forecast: usize,
    /// Mean boots those hunts spent after their baselines.
    pub spent_mean: f64,
    /// Mean of the forecasts' medians.
    pub median_mean: f64,
    /// Share of hunts that spent no more than their forecast's 90th percentile.
    pub within_p90: f64,
    /// Share of hunts that named the culprit.
    pub right: f64,
    /// Mean of the forecasts' shares of right answers.
    pub forecast_right: f64,
    /// Share of hunts the forecast called a go.
    pub go: f64,
}

/// The cells `firstbad sim --forecast` runs: one culprit, the noise kinds the forecast's world
/// does not have (normal, outliers, bursts) beside the one it has (log-normal).
pub fn forecast_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for noise in [
        Noise::Normal,
        Noise::LogNormal,
        Noise::Outliers,
        Noise::Burst,
    ] {
        for n in [64, 1024] {
            for d in [1.0, 2.0] {
                cells.push(Cell {
                    n,
                    d,
                    noise,
                    shape: Shape::OneCulprit,
                });
            }
        }
    }
    cells
}

/// Runs `replicates` hunts of `cell`, each with its forecast from `hunts` simulated hunts.
pub fn forecast_check(cell: &Cell, replicates: usize, seed: u64, hunts: usize) -> ForecastCheck {
    let classify = crate::config::ClassifyConfig::defaults();
    let (mut n, mut spent, mut median, mut within, mut right, mut f_right, mut go) =
        (0, 0.0, 0.0, 0, 0, 0.0, 0);
    for r in 0..replicates {
        let s = seed ^ (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ cell.n as u64;
        let mut w = World::new(cell, ChaCha12Rng::seed_from_u64(s));
        let o = run::firstbad_run(&mut w, RefineProbe::default());
        let Some(b) = w.baselines.clone() else {
            continue;
        };
        let k = b.boots.min(b.good.len()).min(b.bad.len());
        let model = Model::from_baselines(&b.good[..k], &b.bad[..k], Direction::LowerIsBetter);
        let f = forecast::forecast(&Input {
            model,
            baselines: b,
            candidates: cell.n,
            classify: classify.clone(),
            probe: RefineProbe::default(),
            seed: s,
            boot_seconds: None,
            build_seconds: None,
            pool: 1,
            build_ahead: false,
            failed_share: 0.0,
            budget: None,
            hunts,
        });
        let after = (w.boots - w.by_phase[0]) as f64;
        n += 1;
        spent += after;
        median += f.boots.median;
        within += usize::from(after <= f.boots.p90);
        right += usize::from(o.culprit.is_some() && o.culprit == w.culprits.first().copied());
        f_right += f.right;
        go += usize::from(f.go);
    }
    let k = n.max(1) as f64;
    ForecastCheck {
        cell: *cell,
        forecast: n,
        spent_mean: spent / k,
        median_mean: median / k,
        within_p90: within as f64 / k,
        right: right as f64 / k,
        forecast_right: f_right / k,
        go: go as f64 / k,
    }
}

/// One row of [`forecast_markdown`].
pub fn forecast_row(c: &ForecastCheck) -> String {
    format!(
        "| {} | {} | {} | {} | {:.0} | {:.0} | {:.0}% | {:.0}% | {:.0}% | {:.0}% |\n",
        c.cell.n,
        c.cell.d,
        c.cell.noise.name(),
        c.forecast,
        c.spent_mean,
        c.median_mean,
        100.0 * c.within_p90,
        100.0 * c.right,
        100.0 * c.forecast_right,
        100.0 * c.go
    )
}

/// The table of [`forecast_check`]s.
pub fn forecast_markdown(rows: &[ForecastCheck]) -> String {
    let mut out = String::from(
        "| N | Δ/σ | noise | forecast | boots spent (mean) | forecast median (mean) | spent within the forecast's 90% | right | forecast right (mean) | go |\n\
         |---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        out.push_str(&forecast_row(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forecast_is_set_beside_the_hunt_it_was_made_for() {
        let cell = Cell {
            n: 16,
            d: 3.0,
            noise: Noise::Normal,
            shape: Shape::OneCulprit,
        };
        let c = forecast_check(&cell, 3, 5, 10);
        assert_eq!(
            c.forecast, 3,
            "every hunt of a 3σ regression confirms its baselines"
        );
        assert!(c.spent_mean > 0.0 && c.median_mean > 0.0, "{c:?}");
        assert!(forecast_markdown(&[c]).contains("| 16 | 3 | normal | 3 |"));
    }
}

//! Go or no-go before the candidates (issue 34, item 3): once the endpoints' baselines are
//! in, what the rest of the hunt should cost and whether it can name the culprit.
//!
//! The forecast is not a formula beside the product: it runs `firstbad run` itself — the same
//! driver, judge and executor — on [`FORECAST_HUNTS`] simulated histories fitted to what the
//! baselines measured ([`World::fitted`]: as many candidates as are left, one culprit drawn
//! uniformly among them, log-normal boots, and good and bad levels and a per-boot spread drawn
//! about the model's as far as the baselines' boots leave them in doubt),
//! with the hunt file's `[classify]` settings. Each simulated hunt goes on from the real
//! hunt's baselines: its judge is the real one. Its figures are those hunts' boots
//! after their baselines, their builds, and how often they named the culprit; hours follow from
//! the boot and build times the baselines measured on these hosts.
//!
//! What it cannot see: kernels that turn out identical (pruning already left out the commits
//! that cannot change the kernel, but builds that come out the same are found only as they are
//! built, issue 35), a host that moves during the hunt, and a regression in several steps.
//! Each makes the hunt cheaper or dearer than forecast; `firstbad report` sets the forecast
//! beside what the hunt then spent.
//!
//! No-go is a right answer in fewer than [`GO_RIGHT`] of the simulated hunts; the forecast then
//! says what would make the hunt bisectable, each from its own simulated hunts: a larger
//! per-commit boot cap, or half the per-boot spread (more samples a boot, a percentile nearer
//! the median, a disk preset on which the regression is larger against its noise).

use crate::config::ClassifyConfig;
use crate::sequential::Model;
use crate::sim::{firstbad_run_with, normal, World};
use crate::stats::nearest_rank;
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The share of simulated hunts that must name the culprit for a go.
pub const GO_RIGHT: f64 = 0.8;

/// The kernel test robot bisects only metrics whose run-to-run spread is within this share of
/// their mean; the forecast says so when a hunt's is not (its go/no-go is the simulation's).
pub const ROBOT_SPREAD: f64 = 0.2;

pub use crate::hunt::phases::forecast::{GivenBaselines, Input, FORECAST_HUNTS};
pub use crate::journal::{Forecast, Spread};

/// One simulated hunt's figures.
#[derive(Debug, Clone, Copy)]
struct Sample {
    right: bool,
    boots: f64,
    builds: f64,
    total_boots: usize,
}

/// Runs `input.hunts` simulated hunts of `input` on every core.
fn simulate(input: &Input) -> Vec<Sample> {
    let m = &input.model;
    let sigma = m.sigma.max(1e-9);
    // How far the baselines may have placed each centre: the true levels of each simulated
    // history are drawn about the model's, so that the simulated hunts, like the real one,
    // judge with a model that is not exactly the world (with the centres taken as exact, the
    // forecast fell short of what the hunts spent: docs/forecast.md).
    let n = input
        .baselines
        .boots
        .min(input.baselines.good.len())
        .min(input.baselines.bad.len())
        .max(1);
    let centre_error = sigma / (n as f64).sqrt();
    let sigma_error = 1.0 / (2.0 * (2 * n).saturating_sub(2).max(1) as f64).sqrt();
    let given = input.baselines.good.len() + input.baselines.bad.len();
    let next = AtomicUsize::new(0);
    let jobs = crate::sim::default_jobs().min(input.hunts).max(1);
    let mut out: Vec<Option<Sample>> = vec![None; input.hunts];
    // Threads of their own: each simulated hunt runs an executor on a runtime of its own,
    // which a thread of the hunt's runtime may not start.
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let r = next.fetch_add(1, Ordering::Relaxed);
                        if r >= input.hunts {
                            return mine;
                        }
                        let seed = input
                            .seed
                            .wrapping_add((r as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                        let mut rng = ChaCha12Rng::seed_from_u64(seed);
                        let good = m.good + centre_error * normal(&mut rng);
                        let bad = m.bad + centre_error * normal(&mut rng);
                        // The spread is as uncertain: log σ̂ varies by about 1/√(2·dof).
                        let spread = sigma * (normal(&mut rng) * sigma_error).exp();
                        // The oriented log scale: lower is better, as in the simulator's
                        // worlds.
                        let (base, d) = (good.exp(), (bad - good) / spread);
                        let mut w = World::fitted(input.candidates, d, base, spread, rng);
                        let o = firstbad_run_with(
                            &mut w,
                            input.probe,
                            &input.classify,
                            Some(&input.baselines),
                        );
                        let culprit = w.culprits().first().copied();
                        mine.push((
                            r,
                            Sample {
                                right: o.culprit.is_some() && o.culprit == culprit,
                                boots: w.boots() as f64,
                                builds: w.candidate_builds() as f64,
                                total_boots: w.boots() + given,
                            },
                        ));
                    }
                })
            })
            .collect();
        for w in workers {
            for (r, sample) in w.join().expect("a simulated hunt does not panic") {
                out[r] = Some(sample);
            }
        }
    });
    out.into_iter()
        .map(|s| s.expect("every simulated hunt ran"))
        .collect()
}

/// The median and 90th percentile of `values`, nearest rank (each one of the values).
fn spread_of(mut values: Vec<f64>) -> Spread {
    Spread {
        median: nearest_rank(&mut values, 0.5),
        p90: nearest_rank(&mut values, 0.9),
    }
}

/// The figures of `samples` under `input`.
fn figures(input: &Input, samples: &[Sample]) -> (f64, Spread, Spread, Option<Spread>) {
    let within = |s: &Sample| input.budget.is_none_or(|b| s.total_boots <= b);
    let right =
        samples.iter().filter(|s| s.right && within(s)).count() as f64 / samples.len() as f64;
    // A failed boot costs a boot and gives no value: the simulated hunts' boots are the
    // measured ones.
    let per_value = 1.0 / (1.0 - input.failed_share.clamp(0.0, 0.5));
    let boots: Vec<f64> = samples.iter().map(|s| s.boots * per_value).collect();
    let builds: Vec<f64> = samples.iter().map(|s| s.builds).collect();
    // Builds not timed (the endpoints came from the build cache) are left out of the hours,
    // and the forecast says so.
    let hours = match (input.boot_seconds, input.build_seconds.unwrap_or(0.0)) {
        (Some(boot), build) => {
            let pool = input.pool.max(1) as f64;
            let h: Vec<f64> = boots
                .iter()
                .zip(&builds)
                .map(|(b, k)| {
                    let booting = b * boot / pool;
                    let building = k * build;
                    let s = if input.build_ahead {
                        booting.max(building)
                    } else {
                        booting + building
                    };
                    s / 3600.0
                })
                .collect();
            Some(spread_of(h))
        }
        _ => None,
    };
    (right, spread_of(boots), spread_of(builds), hours)
}

/// The forecast of a hunt whose baselines gave `input.model`.
pub fn forecast(input: &Input) -> Forecast {
    let m = &input.model;
    let samples = simulate(input);
    let (right, boots, builds, hours) = figures(input, &samples);
    let go = right >= GO_RIGHT;
    let mut advice = Vec::new();
    if !go {
        let max_boots = (input.classify.max_boots * 4).min(1000);
        if max_boots > input.classify.max_boots {
            let wider = Input {
                classify: ClassifyConfig {
                    max_boots,
                    ..input.classify.clone()
                },
                ..input.clone()
            };
            advice.push(format!(
                "classify.max_boots = {max_boots}: {}",
                line(&wider, &simulate(&wider))
            ));
        }
        let quieter = Input {
            model: Model {
                sigma: m.sigma / 2.0,
                ..*m
            },
            baselines: GivenBaselines {
                good: squeeze(&input.baselines.good, m.good.exp()),
                bad: squeeze(&input.baselines.bad, m.bad.exp()),
                ..input.baselines.clone()
            },
            ..input.clone()
        };
        advice.push(format!(
            "half the per-boot spread (4x the samples a boot: workload `runs` or a longer \
             duration; a percentile nearer the median; a disk preset on which the regression \
             stands further out of its noise): {}",
            line(&quieter, &simulate(&quieter))
        ));
        if let Some(b) = input.budget {
            let unbounded = Input {
                budget: None,
                ..input.clone()
            };
            let (r, all, _, _) = figures(&unbounded, &samples);
            advice.push(format!(
                "no budget of {b} boots: right in {:.0}%, median {:.0} boots after the \
                 baselines",
                r * 100.0,
                all.median
            ));
        }
    }
    Forecast {
        candidates: input.candidates,
        effect: (m.bad - m.good).exp_m1(),
        spread: m.sigma.exp_m1(),
        effect_sigmas: (m.bad - m.good) / m.sigma.max(1e-9),
        hunts: samples.len(),
        right,
        boots,
        builds,
        hours,
        boot_seconds: input.boot_seconds,
        build_seconds: input.build_seconds,
        go,
        advice,
        // The hunt's phase sets it: the simulation does not need it.
        tuning: Default::default(),
    }
}

/// `values` with half their log-scale spread about `centre`.
fn squeeze(values: &[f64], centre: f64) -> Vec<f64> {
    values
        .iter()
        .map(|v| (centre.ln() + (v.ln() - centre.ln()) / 2.0).exp())
        .collect()
}

/// One line of an alternative's figures.
fn line(input: &Input, samples: &[Sample]) -> String {
    let (right, boots, _, hours) = figures(input, samples);
    let hours = hours.map_or(String::new(), |h| format!(" ({})", hours_text(h.median)));
    format!(
        "right in {:.0}%, median {:.0} boots{hours}",
        right * 100.0,
        boots.median
    )
}

fn hours_text(h: f64) -> String {
    if h < 1.0 {
        format!("{:.0} min", (h * 60.0).max(1.0))
    } else {
        format!("{h:.1} h")
    }
}

impl Forecast {
    /// "go" or "no-go", with the share behind it.
    pub fn verdict(&self) -> String {
        format!(
            "{}: the culprit named in {:.0}% of {} simulated hunts ({}% wanted)",
            if self.go { "go" } else { "no-go" },
            self.right * 100.0,
            self.hunts,
            (GO_RIGHT * 100.0).round()
        )
    }

    /// The forecast for a person, a line each.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "regression {:+.1}% against a per-boot spread of {:.1}% ({:.1}σ); {} candidates \
             left",
            self.effect * 100.0,
            self.spread * 100.0,
            self.effect_sigmas,
            self.candidates
        )];
        if self.spread > ROBOT_SPREAD {
            out.push(format!(
                "the spread is above the {:.0}% within which the kernel test robot bisects a \
                 metric",
                ROBOT_SPREAD * 100.0
            ));
        }
        out.push(format!(
            "boots after the baselines: median {:.0}, 90% within {:.0}; builds: median {:.0}",
            self.boots.median, self.boots.p90, self.builds.median
        ));
        if let (Some(h), Some(boot)) = (self.hours, self.boot_seconds) {
            let build = match self.build_seconds {
                Some(b) => format!("a build {b:.0} s"),
                None => "builds not counted: the endpoints' kernels came from the cache".into(),
            };
            out.push(format!(
                "time on these hosts: median {}, 90% within {} (a boot and its workload {boot:.0} \
                 s, {build})",
                hours_text(h.median),
                hours_text(h.p90)
            ));
        }
        out.push(self.verdict());
        for a in &self.advice {
            out.push(format!("to make it bisectable: {a}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Direction;
    use crate::hunt::judge::RefineProbe;

    fn input(effect_sigmas: f64, candidates: usize) -> Input {
        let sigma = 0.1;
        // Ten boots of each endpoint at ±1σ about their levels (a model of exactly that σ).
        let at = |level: f64| -> Vec<f64> {
            (0..10)
                .map(|i| (level + if i % 2 == 0 { sigma } else { -sigma }).exp())
                .collect()
        };
        let (good, bad) = (35f64.ln(), 35f64.ln() + effect_sigmas * sigma);
        let baselines = GivenBaselines {
            good: at(good),
            bad: at(bad),
            boots: 10,
        };
        Input {
            model: Model::from_baselines(&baselines.good, &baselines.bad, Direction::LowerIsBetter),
            baselines,
            candidates,
            classify: ClassifyConfig::defaults(),
            probe: RefineProbe::default(),
            seed: 7,
            boot_seconds: Some(90.0),
            build_seconds: Some(600.0),
            pool: 1,
            build_ahead: false,
            failed_share: 0.0,
            budget: None,
            // Fewer than the product's: these tests check the arithmetic, not a figure.
            hunts: 30,
        }
    }

    // Fast unit tests of the forecast's arithmetic on the simulator's hunts (the product's
    // driver and executor on simulated hosts); tests/e2e.rs sees the forecast of a real hunt.
    #[test]
    fn a_clear_regression_is_a_go_and_costs_a_bisection() {
        let f = forecast(&input(4.0, 32));
        assert!(f.go, "{:?}", f.lines());
        assert!(f.right >= 0.9, "{}", f.right);
        // Five halvings of 32 candidates, and a re-test: tens of boots, not hundreds.
        assert!(
            f.boots.median > 10.0 && f.boots.median < 100.0,
            "{:?}",
            f.boots
        );
        assert!(f.boots.p90 >= f.boots.median);
        let h = f.hours.expect("boot and build times are known");
        assert!(h.median > 0.0 && h.p90 >= h.median, "{h:?}");
        assert!(f.advice.is_empty());
        // The same hunt is forecast alike on every run.
        assert_eq!(f, forecast(&input(4.0, 32)));
    }

    #[test]
    fn a_regression_inside_its_noise_is_a_no_go_with_advice() {
        let f = forecast(&input(0.3, 8));
        assert!(!f.go, "{:?}", f.lines());
        let text = f.lines().join("\n");
        assert!(text.contains("no-go"), "{text}");
        assert!(text.contains("classify.max_boots = 120"), "{text}");
        assert!(text.contains("half the per-boot spread"), "{text}");
    }

    #[test]
    fn a_budget_counts_only_the_hunts_within_it() {
        let free = forecast(&input(4.0, 32));
        let tight = forecast(&Input {
            budget: Some(20),
            ..input(4.0, 32)
        });
        assert!(
            tight.right < free.right,
            "{} against {}",
            tight.right,
            free.right
        );
    }
}

//! The simulated histories: their commits' levels, the noise kinds, the cost of each boot.

use super::*;

/// Good endpoint's mean, in ms (the fsync p50 measured in the qemu set-up).
pub(super) const BASE: f64 = 35.0;
/// Relative boot-to-boot noise of the additive noise kinds (10%).
pub(super) const SIGMA_REL: f64 = 0.1;
/// Log-scale σ of the log-normal kind: 0.5 gives a long right tail (p99/p50 ≈ 3.2).
pub(super) const SIGMA_LN: f64 = 0.5;
/// Share of outlier boots, and the share of failed boots, of those kinds.
pub(super) const OUTLIER_SHARE: f64 = 0.05;
pub(super) const FAIL_SHARE: f64 = 0.1;
/// Drift per boot in units of σ: one σ per 100 boots.
pub(super) const DRIFT_PER_BOOT: f64 = 0.01;
/// The step of the `step` kind, in σ, and the last boot it may start at.
pub(super) const STEP_SIGMAS: f64 = 2.0;
pub(super) const STEP_WITHIN: usize = 300;
/// The `burst` kind: at each boot out of a burst, the chance that one begins (a busy neighbour
/// on a shared machine, issue 38: "a host that turns 3-10x slower for 1-3 runs once in ten or
/// so runs": with 2 boots a burst on average, about one boot in ten is in one), how many boots
/// it lasts at most, and the range of its slow-down.
pub(super) const BURST_RATE: f64 = 0.05;
pub(super) const BURST_BOOTS: usize = 3;
pub(super) const BURST_FACTOR: (f64, f64) = (3.0, 10.0);
/// The `wander` kind (issue 31 item 4): a host whose level moves and comes back. The qemu host
/// of a dirty-limits hunt on Linux 6.1 (fsync p50, 28.5% boot-to-boot noise) saw the good
/// endpoint's p50 rise from about 4 ms to 7-9 ms over tens of boots and fall back to 3.4 ms:
/// shifts of a few σ that last minutes, then end. At each calm boot the chance that a shift
/// begins, how many boots it lasts (drawn uniformly), and its size in σ (either sign).
pub(super) const WANDER_RATE: f64 = 1.0 / 30.0;
pub(super) const WANDER_BOOTS: (usize, usize) = (5, 30);
pub(super) const WANDER_SIGMAS: (f64, f64) = (1.5, 3.0);
/// Attempts before a strategy gives up getting one value of a commit (failed boots).
pub(super) const MAX_ATTEMPTS: usize = 20;

/// Kinds of boot-to-boot noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    /// Additive normal noise.
    Normal,
    /// Multiplicative log-normal noise with a heavy right tail.
    LogNormal,
    /// Normal plus 5% outlier boots.
    Outliers,
    /// Normal plus slow host drift.
    Drift,
    /// Normal plus 10% failed boots.
    Failed,
    /// Normal plus a sudden, lasting move of the host (after the kinds above, so that they
    /// keep their discriminants and with them their seeds and histories).
    Step,
    /// Normal plus bursts: 1-3 boots in a row 3-10x slower, then back; about one boot in ten is
    /// in a burst ([`BURST_RATE`]).
    Burst,
    /// Normal plus a host level that shifts by a few σ for 5-30 boots, then comes back, again
    /// and again ([`WANDER_RATE`]): about a third of the boots are in a shift.
    Wander,
    /// Real noise: a recording of real boots on this project's machines replayed in its time
    /// order from a seeded start (`tests/corpus/`, [`super::recorded`]), log-scale, each
    /// recording's residuals scaled to its own σ.
    Recorded,
}

impl Noise {
    /// Every kind, in the order of their discriminants.
    pub const ALL: [Noise; 9] = [
        Noise::Normal,
        Noise::LogNormal,
        Noise::Outliers,
        Noise::Drift,
        Noise::Failed,
        Noise::Step,
        Noise::Burst,
        Noise::Wander,
        Noise::Recorded,
    ];

    /// Short name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Noise::Normal => "normal",
            Noise::LogNormal => "lognormal",
            Noise::Outliers => "outliers",
            Noise::Drift => "drift",
            Noise::Step => "step",
            Noise::Failed => "failed",
            Noise::Burst => "burst",
            Noise::Wander => "wander",
            Noise::Recorded => "recorded",
        }
    }
}

/// Shapes of history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One commit causes the whole regression.
    OneCulprit,
    /// Nothing regresses: the endpoints are alike.
    NoCulprit,
    /// Two commits each cause half of it.
    TwoCulprits,
}

impl Shape {
    /// Every shape.
    pub const ALL: [Shape; 3] = [Shape::OneCulprit, Shape::NoCulprit, Shape::TwoCulprits];

    /// Short name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Shape::OneCulprit => "one",
            Shape::NoCulprit => "none",
            Shape::TwoCulprits => "two",
        }
    }
}

/// One cell of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// Candidate commits.
    pub n: usize,
    /// Effect over noise Δ/σ.
    pub d: f64,
    /// Noise kind.
    pub noise: Noise,
    /// History shape.
    pub shape: Shape,
}

/// A synthetic history being measured: levels, noise, and the cost so far.
pub struct World {
    pub(super) n: usize,
    pub(super) culprits: Vec<usize>,
    pub(super) shape: Shape,
    pub(super) d: f64,
    pub(super) noise: Noise,
    /// The good level and log-scale σ of the log-normal kind ([`BASE`] and [`SIGMA_LN`] but
    /// in a world fitted to a hunt's baselines, [`World::fitted`]).
    pub(super) base: f64,
    pub(super) sigma_ln: f64,
    pub(super) rng: ChaCha12Rng,
    pub(super) boots: usize,
    pub(super) builds: usize,
    pub(super) built: Vec<bool>,
    /// The boot from which the host is slower (`step` noise).
    pub(super) step_at: usize,
    /// Boots left of the burst under way, and its slow-down (`burst` noise); boots left of
    /// the shift under way, and its size in σ (`wander` noise).
    pub(super) burst: (usize, f64),
    pub(super) shift: (usize, f64),
    /// The recording replayed (`recorded` noise): its index in [`super::recorded::streams`]
    /// and the boot of it this history's first boot reads.
    pub(super) replay: (usize, usize),
    /// The phase of `firstbad run` now booting, and the boots spent in each (see [`PHASES`]).
    pub(super) phase: usize,
    pub(super) by_phase: [usize; PHASES.len()],
    /// The endpoints' boots the first stage of `firstbad run` confirmed as its baselines (a
    /// forecast's input, `firstbad sim --forecast`).
    pub(super) baselines: Option<super::run::GivenBaselines>,
    /// Verdicts of `firstbad run`'s bisection on commits that are plainly good or bad (not
    /// between two culprits), and how many of them were wrong.
    pub(super) verdicts: [usize; 2],
}

/// `firstbad run`'s phases, as `firstbad sim` accounts its boots: the endpoints' baselines, the
/// bisection with a sequential test per commit, the posterior phase (drift checks included),
/// and the re-test of the culprit against its parent. Other strategies count every boot in the
/// first.
pub const PHASES: [&str; 4] = ["baselines", "bisection", "posterior", "re-test"];

pub fn normal<R: Rng>(rng: &mut R) -> f64 {
    // Box-Muller; 1 - u keeps the logarithm finite.
    let u: f64 = 1.0 - rng.gen::<f64>();
    let v: f64 = rng.gen();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

impl World {
    /// Draws a history for `cell` from `rng`.
    pub fn new(cell: &Cell, mut rng: ChaCha12Rng) -> World {
        let n = cell.n;
        let culprits = match cell.shape {
            Shape::OneCulprit => vec![rng.gen_range(1..=n)],
            Shape::NoCulprit => vec![],
            Shape::TwoCulprits => {
                let a = rng.gen_range(1..=n);
                let mut b = rng.gen_range(1..=n);
                while b == a {
                    b = rng.gen_range(1..=n);
                }
                vec![a.min(b), a.max(b)]
            }
        };
        // Drawn only for the step kind, so the other kinds' histories stay as they were.
        let step_at = if cell.noise == Noise::Step {
            rng.gen_range(1..=STEP_WITHIN)
        } else {
            usize::MAX
        };
        // Likewise drawn only for the recorded kind: which recording, and where in it.
        let replay = if cell.noise == Noise::Recorded {
            let streams = super::recorded::streams();
            assert!(
                !streams.is_empty(),
                "no built-in recording of {} boots or more (tests/corpus/)",
                super::recorded::MIN_REPLAYED_BOOTS
            );
            let i = rng.gen_range(0..streams.len());
            (i, rng.gen_range(0..streams[i].z.len()))
        } else {
            (0, 0)
        };
        World {
            n,
            culprits,
            shape: cell.shape,
            d: cell.d,
            noise: cell.noise,
            base: BASE,
            sigma_ln: SIGMA_LN,
            rng,
            boots: 0,
            builds: 0,
            built: vec![false; n + 1],
            step_at,
            burst: (0, 1.0),
            shift: (0, 0.0),
            replay,
            phase: 0,
            by_phase: [0; PHASES.len()],
            baselines: None,
            verdicts: [0; 2],
        }
    }

    /// A history of `n` candidates with one culprit drawn uniformly, and log-normal boots whose
    /// good level is `base`, log-scale σ `sigma_ln`, and bad level `base · exp(d · sigma_ln)`:
    /// a hunt's baselines as its model reads them ([`crate::sim::forecast`]).
    pub fn fitted(n: usize, d: f64, base: f64, sigma_ln: f64, rng: ChaCha12Rng) -> World {
        let cell = Cell {
            n,
            d,
            noise: Noise::LogNormal,
            shape: Shape::OneCulprit,
        };
        World {
            base,
            sigma_ln,
            ..World::new(&cell, rng)
        }
    }

    /// The commits whose change moves the metric (world indices), in order.
    pub fn culprits(&self) -> &[usize] {
        &self.culprits
    }

    /// Boots so far, failed ones too.
    pub fn boots(&self) -> usize {
        self.boots
    }

    /// Candidates built so far (booted at least once), the endpoints left out.
    pub fn candidate_builds(&self) -> usize {
        self.built
            .get(1..self.n)
            .map_or(0, |b| b.iter().filter(|&&x| x).count())
    }

    /// The world, leaving an empty one in its place (while a simulated host holds it).
    pub(super) fn take(&mut self) -> World {
        let empty = World {
            n: 0,
            culprits: Vec::new(),
            shape: self.shape,
            d: 0.0,
            noise: self.noise,
            base: self.base,
            sigma_ln: self.sigma_ln,
            rng: ChaCha12Rng::seed_from_u64(0),
            boots: 0,
            builds: 0,
            built: Vec::new(),
            step_at: 0,
            burst: (0, 1.0),
            shift: (0, 0.0),
            replay: (0, 0),
            phase: 0,
            by_phase: [0; PHASES.len()],
            baselines: None,
            verdicts: [0; 2],
        };
        std::mem::replace(self, empty)
    }

    pub(super) fn level(&self, i: usize) -> f64 {
        match self.shape {
            Shape::NoCulprit => 0.0,
            Shape::OneCulprit => f64::from(u8::from(i >= self.culprits[0])),
            Shape::TwoCulprits => {
                0.5 * f64::from(u8::from(i >= self.culprits[0]))
                    + 0.5 * f64::from(u8::from(i >= self.culprits[1]))
            }
        }
    }

    /// Boots commit `i` (0 = good endpoint, `n` = bad endpoint) once: its value, or None when
    /// the boot failed. Counts the boot, and the build the first time.
    pub fn boot(&mut self, i: usize) -> Option<f64> {
        self.boots += 1;
        self.by_phase[self.phase] += 1;
        if !self.built[i] {
            self.built[i] = true;
            self.builds += 1;
        }
        let lev = self.level(i);
        let z = normal(&mut self.rng);
        let additive = |z: f64| {
            let v = BASE * (1.0 + self.d * SIGMA_REL * lev) + BASE * SIGMA_REL * z;
            // A latency stays positive: clamp the far left tail (z < -8 at this σ).
            v.max(0.01 * BASE)
        };
        match self.noise {
            Noise::Normal => Some(additive(z)),
            Noise::LogNormal => {
                Some(self.base * (self.d * self.sigma_ln * lev + self.sigma_ln * z).exp())
            }
            Noise::Outliers => {
                let v = additive(z);
                if self.rng.gen::<f64>() < OUTLIER_SHARE {
                    Some(v * self.rng.gen_range(2.0..5.0))
                } else {
                    Some(v)
                }
            }
            Noise::Drift => {
                Some(additive(z) + BASE * SIGMA_REL * DRIFT_PER_BOOT * self.boots as f64)
            }
            Noise::Step => {
                let stepped = if self.boots >= self.step_at {
                    STEP_SIGMAS
                } else {
                    0.0
                };
                Some(additive(z) + BASE * SIGMA_REL * stepped)
            }
            Noise::Burst => {
                let v = additive(z);
                if self.burst.0 == 0 && self.rng.gen::<f64>() < BURST_RATE {
                    self.burst = (
                        self.rng.gen_range(1..=BURST_BOOTS),
                        self.rng.gen_range(BURST_FACTOR.0..BURST_FACTOR.1),
                    );
                }
                if self.burst.0 > 0 {
                    self.burst.0 -= 1;
                    Some(v * self.burst.1)
                } else {
                    Some(v)
                }
            }
            Noise::Wander => {
                let v = additive(z);
                if self.shift.0 == 0 && self.rng.gen::<f64>() < WANDER_RATE {
                    let size = self.rng.gen_range(WANDER_SIGMAS.0..WANDER_SIGMAS.1);
                    let sign = if self.rng.gen::<bool>() { 1.0 } else { -1.0 };
                    self.shift = (
                        self.rng.gen_range(WANDER_BOOTS.0..=WANDER_BOOTS.1),
                        sign * size,
                    );
                }
                if self.shift.0 > 0 {
                    self.shift.0 -= 1;
                    Some(v + BASE * SIGMA_REL * self.shift.1)
                } else {
                    Some(v)
                }
            }
            Noise::Recorded => {
                let s = &super::recorded::streams()[self.replay.0];
                // The boot just counted is the history's `boots`-th: the recording's boots in
                // their order from the drawn start, around again at its end.
                let z = s.z[(self.replay.1 + self.boots - 1) % s.z.len()];
                Some(BASE * (s.sigma * (self.d * lev + z)).exp())
            }
            Noise::Failed => {
                if self.rng.gen::<f64>() < FAIL_SHARE {
                    None
                } else {
                    Some(additive(z))
                }
            }
        }
    }

    /// `k` values of commit `i`, retrying failed boots (at most [`MAX_ATTEMPTS`] per value).
    pub(super) fn measure(&mut self, i: usize, k: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity(k);
        for _ in 0..k {
            for _ in 0..MAX_ATTEMPTS {
                if let Some(v) = self.boot(i) {
                    out.push(v);
                    break;
                }
            }
        }
        out
    }
}

//! The hunt: one engine for every kernel hunt. A pure driver ([`driver`], one file per phase
//! in [`phases`]) decides from the state ([`state`], a fold of the journal with one `apply`);
//! the executor ([`crate::exec`]) does what it says, journalling each step before it is taken
//! and applying it to the state, and feeds each host as it frees.
//!
//! The loop owns no state of its own beyond what the journal gives, so a rerun after `kill -9`
//! continues exactly where the journal ends: finished builds are not rebuilt (the kernel cache
//! answers), finished boots are not re-measured, and verdicts are re-applied to a fresh
//! bisection in the order they were given.

pub mod chain;
pub mod driver;
pub mod evidence;
pub mod judge;
pub mod phases;
pub mod prelude;
pub mod prune;
pub mod same_kernel;
pub mod state;
pub mod state_dir;
pub mod steps;
pub mod summary;

pub use prelude::{apply_replay, begin_or_resume, HuntRange};
pub use state::{BootRecord, ConfirmStart, Confirmation, DriftRecord, HuntState, Running};

use crate::build::{BuildError, Builder};
use crate::config::Build;
use crate::config::{ClassifyMode, Direction, HuntConfig};
use crate::error::exit_code;
use crate::exec::kernel::{KernelBuilder, Kernels};
use crate::hosts::{Host, HostError};
use crate::journal::{BootOutcome, BuildOutcome, Event, HuntEnd, Journal, JournalError};
use crate::prebuilt;
pub use driver::Forecasting;
use driver::{hunt_seed, Driver, HuntKind, Plan, Slot};
use judge::Settings;
use prelude::{content_hash, record};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a hunt stopped without an answer.
#[derive(Debug, thiserror::Error)]
pub enum HuntError {
    /// Revisions, repository or state directory are wrong; nothing was run.
    #[error("{0}")]
    BadInput(String),
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The builder failed (not the candidate's build).
    #[error("builder: {0}")]
    Build(#[from] BuildError),
    /// A host failed; rerun resumes.
    #[error("host: {0}")]
    Host(#[from] HostError),
    /// A step that needs a person (an endpoint that does not build or boot).
    #[error("{0}")]
    Infrastructure(String),
    /// An automatic hunt of `firstbad watch` spent its boot budget (this many boots) without
    /// an answer; a person decides.
    #[error("the hunt spent its budget of {0} boots without an answer; raise series.hunt_boots, or rerun the hunt by hand")]
    BudgetSpent(usize),
    /// The hunt ended but its end cannot be read back from its journal: it is not given
    /// ([`state_dir::confirm_saved`]).
    #[error("{0}")]
    NotSaved(String),
    /// The forecast stopped the hunt before its first candidate: a no-go, or `firstbad plan`
    /// once it is made ([`crate::forecast`]).
    #[error("{0}")]
    Forecast(driver::StopReason),
    /// Ctrl-C or SIGTERM stopped the hunt ([`crate::interrupt`]).
    #[error(
        "{0}: stopped the builds, boots and runs under way; the journal holds every step that \
         finished; rerun the same command to resume"
    )]
    Interrupted(crate::interrupt::Interrupted),
}

impl HuntError {
    /// The error of a hunt driven by [`crate::interrupt::block_on`]: its own, or the signal's.
    pub fn or_interrupted<T>(
        run: std::io::Result<Result<Result<T, HuntError>, crate::interrupt::Interrupted>>,
    ) -> Result<T, HuntError> {
        match run {
            Ok(Ok(result)) => result,
            Ok(Err(i)) => Err(HuntError::Interrupted(i)),
            Err(e) => Err(HuntError::Infrastructure(format!(
                "listening for SIGINT and SIGTERM: {e}"
            ))),
        }
    }
}

impl From<driver::StopReason> for HuntError {
    /// A stop the driver decided, as the error the hunt ends with: a journal that does not fit
    /// is bad input, a spent budget its own error, the rest a step that needs a person.
    fn from(why: driver::StopReason) -> HuntError {
        match why {
            driver::StopReason::JournalDoesNotFit(_) => HuntError::BadInput(why.to_string()),
            driver::StopReason::BudgetSpent(boots) => HuntError::BudgetSpent(boots),
            driver::StopReason::NoGo(_)
            | driver::StopReason::Planned { .. }
            | driver::StopReason::NoForecast(_) => HuntError::Forecast(why),
            other => HuntError::Infrastructure(other.to_string()),
        }
    }
}

impl HuntError {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            HuntError::BadInput(_)
            | HuntError::Host(HostError::BadInput(_))
            | HuntError::Build(BuildError::BadInput(_)) => exit_code::BAD_INPUT,
            // A result that could not be saved (a full disk, a state directory removed during
            // the run): nothing was lost that a rerun does not redo.
            HuntError::Journal(JournalError::Moved { .. } | JournalError::Sqlite { .. }) => {
                exit_code::INFRASTRUCTURE
            }
            HuntError::Journal(_) => exit_code::ERROR,
            HuntError::Build(_)
            | HuntError::Host(_)
            | HuntError::Infrastructure(_)
            | HuntError::NotSaved(_) => exit_code::INFRASTRUCTURE,
            HuntError::BudgetSpent(_) => exit_code::AMBIGUOUS,
            HuntError::Interrupted(i) => i.exit_code(),
            HuntError::Forecast(why) => why.exit_code(),
        }
    }

    /// Whether rerunning the same command resumes the hunt where its journal ends: not when
    /// the journal itself was lost during the run.
    pub fn resumes(&self) -> bool {
        !matches!(
            self,
            HuntError::NotSaved(_) | HuntError::Journal(JournalError::Moved { .. })
        )
    }
}

/// The journal file inside a state directory.
pub fn journal_path(state_dir: &Path) -> PathBuf {
    state_dir.join("journal.sqlite")
}

/// Where the static agent binary is: `$FIRSTBAD_AGENT`, or a static build beside this
/// executable or in its target directory (what `scripts/build-agent` makes).
pub fn find_agent() -> Result<PathBuf, HuntError> {
    if let Some(p) = std::env::var_os("FIRSTBAD_AGENT") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| HuntError::Infrastructure(e.to_string()))?;
    let mut candidates = Vec::new();
    if let Some(dir) = exe.parent() {
        candidates.push(dir.join("firstbad-agent.static"));
        // target/{debug,release}/firstbad -> target/x86_64-unknown-linux-gnu/release/
        if let Some(target) = dir.parent() {
            candidates.push(target.join("x86_64-unknown-linux-gnu/release/firstbad-agent"));
        }
        // The static CLI of `scripts/build-agent --with-cli` (the demo's) sits beside the
        // agent; a cargo build's target/debug may hold a dynamic agent, which is passed over.
        candidates.push(dir.join("firstbad-agent"));
    }
    let usable = |p: &PathBuf| p.is_file() && check_static(p).is_ok();
    candidates.into_iter().find(usable).ok_or_else(|| {
        HuntError::Infrastructure(
            "no static firstbad-agent found: run scripts/build-agent, or set FIRSTBAD_AGENT".into(),
        )
    })
}

/// Checks that an ELF binary has no program interpreter, i.e. runs without a libc on the
/// guest (the initramfs has none).
pub fn check_static(path: &Path) -> Result<(), String> {
    let b = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bad = || format!("{}: not a 64-bit little-endian ELF", path.display());
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return Err(bad());
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > b.len() {
            return Err(bad());
        }
        // PT_INTERP = 3: a dynamic loader is needed.
        if u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes")) == 3 {
            return Err(format!(
                "{} is dynamically linked; the guest has no libc: build it with scripts/build-agent",
                path.display()
            ));
        }
    }
    Ok(())
}

/// A short commit id for messages: a git commit id's first 12 digits; any other candidate
/// id (a prebuilt kernel's `package=version`) whole, since its start says nothing.
pub fn short(id: &str) -> &str {
    if is_commit_id(id) {
        &id[..12.min(id.len())]
    } else {
        id
    }
}

/// Whether a candidate id is a git commit id (hex digits) rather than a prebuilt kernel's.
pub fn is_commit_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What `firstbad run` ended with.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How the hunt ended.
    pub end: HuntEnd,
    /// The final re-test of a found culprit, and the confidence stated for it.
    pub confirmation: Option<Confirmation>,
    /// The process exit code for it: with further steps, 0 only when every step is confirmed.
    pub exit_code: u8,
    /// The further steps of a regression of several, in the order they were hunted
    /// ([`steps`]); empty for one.
    pub steps: Vec<FurtherStep>,
    /// Parts of the regression left unhunted once `classify.max_culprits` steps were.
    pub unexplained: Vec<(steps::Rest, String)>,
    /// Hosts that left the pool in this stage and stayed out, with why: a later stage of the
    /// same run keeps them out.
    pub retired: Vec<(String, String)>,
}

impl Outcome {
    /// The outcome of one stage that ended with `end`.
    pub fn of(end: HuntEnd, confirmation: Option<Confirmation>) -> Outcome {
        Outcome {
            exit_code: end_code(&end, confirmation.as_ref()),
            end,
            confirmation,
            steps: Vec::new(),
            unexplained: Vec::new(),
            retired: Vec::new(),
        }
    }

    /// The parts of the range from `good` to `bad` (at `span` of the whole regression) that
    /// this stage's culprit leaves unexplained, by its re-test's levels ([`steps::rest_of`]).
    pub fn rest(&self, ends: (&str, &str), span: (f64, f64)) -> Vec<steps::Rest> {
        match (&self.end, &self.confirmation) {
            (HuntEnd::Found { commit }, Some(c)) => c.levels.as_ref().map_or_else(Vec::new, |l| {
                steps::rest_of(ends, span, &c.parent, commit, l)
            }),
            _ => Vec::new(),
        }
    }

    /// The further steps to hunt after this, the first stage's outcome over the range from
    /// `good` to `bad`: [`steps::Steps::next_part`] names each; [`Outcome::add_step`] takes its
    /// outcome, [`Outcome::end_steps`] ends the run. The kernel and the command hunts' runs
    /// and the simulator go through these alike.
    pub fn steps_plan(&self, good: &str, bad: &str, max_culprits: u32) -> steps::Steps {
        steps::Steps::new(max_culprits as usize, self.rest((good, bad), steps::WHOLE))
    }

    /// The outcome of step `n`'s hunt of `part`; what it leaves goes into `plan`.
    pub fn add_step(
        &mut self,
        plan: &mut steps::Steps,
        n: usize,
        part: steps::Rest,
        outcome: Outcome,
    ) {
        plan.left(outcome.rest((&part.good, &part.bad), part.span));
        self.steps.push(FurtherStep {
            stage: steps::stage(n),
            part,
            outcome,
        });
    }

    /// Every step hunted: the parts past the cap, and the run's exit code ([`steps_code`]).
    pub fn end_steps(mut self, plan: steps::Steps) -> Outcome {
        self.unexplained = plan.not_hunted;
        self.exit_code = steps_code(self.exit_code, &self.steps, &self.unexplained);
        self
    }
}

/// The range of a part of the regression in `repo` (`source` the hunt file), with the hunt
/// file's `paths` and `first_parent`; `None` when its ends make no range the search takes (a
/// culprit's first parent off the range's history): the part then goes into `plan` as not
/// hunted, with the reason, and the run goes on.
pub fn part_range(
    plan: &mut steps::Steps,
    part: &steps::Rest,
    (source, repo): (&Path, &Path),
    paths: &[String],
    first_parent: bool,
) -> Result<Option<HuntRange>, HuntError> {
    match HuntRange::load(
        source,
        repo,
        std::slice::from_ref(&part.good),
        &part.bad,
        paths,
        first_parent,
    ) {
        Ok(range) => Ok(Some(range)),
        Err(HuntError::BadInput(why)) => {
            tracing::warn!("the part cannot be hunted: {why}");
            plan.cannot_hunt(part.clone(), why);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Says that a part of the regression is hunted next, and where.
pub fn log_step(n: usize, part: &steps::Rest) {
    tracing::info!(
        "part of the regression lies {} the culprit: hunting it from {} to {} ({})",
        match part.side {
            steps::Side::Before => "before",
            steps::Side::After => "after",
        },
        short(&part.good),
        short(&part.bad),
        steps::stage(n)
    );
}

/// A further step of a regression, hunted in the same run ([`steps`]).
#[derive(Debug, Clone)]
pub struct FurtherStep {
    /// Its journal stage (`step-2`, …).
    pub stage: String,
    /// The part of the regression it hunted.
    pub part: steps::Rest,
    /// How its hunt ended.
    pub outcome: Outcome,
}

/// The exit code of a run whose first stage ended with `first` and went on with `further`
/// steps, leaving `unexplained` parts past the cap: the first stage's unless it is 0; then 4
/// (ambiguous) when a further step was found and not confirmed, ended among skipped commits,
/// or a part was left unhunted. A part whose own baselines did not reproduce is not there.
pub fn steps_code(first: u8, further: &[FurtherStep], unexplained: &[(steps::Rest, String)]) -> u8 {
    if first != exit_code::OK {
        return first;
    }
    let open = further.iter().any(|s| {
        matches!(
            s.outcome.end,
            HuntEnd::Found { .. } | HuntEnd::OnlySkippedLeft { .. }
        ) && s.outcome.exit_code != exit_code::OK
    });
    if open || !unexplained.is_empty() {
        exit_code::AMBIGUOUS
    } else {
        exit_code::OK
    }
}

/// Runs (or resumes) a hunt to its end.
pub async fn run(cfg: &HuntConfig) -> Result<Outcome, HuntError> {
    run_with(cfg, None, &[], Forecasting::Gate).await
}

/// Runs (or resumes) a hunt, first applying the verdicts of a `git bisect log` (`firstbad run
/// --replay <file>`) so that they are not tested again, and putting the hosts named in
/// `restore` back into the pool (`--restore-host`). `forecast`: what the forecast made once
/// the baselines are in does ([`Forecasting::Gate`] for `firstbad run`, [`Forecasting::Only`]
/// for `firstbad plan`); the later steps of a regression are not forecast.
pub async fn run_with(
    cfg: &HuntConfig,
    replay: Option<&Path>,
    restore: &[String],
    forecast: Forecasting,
) -> Result<Outcome, HuntError> {
    let (range, kernels) = candidates(cfg)?;
    let ends = (range.goods[0].clone(), range.bad.clone());
    let run = Run {
        stage: "",
        state_dir: &cfg.state_dir,
        classify: cfg.classify.clone(),
        stop_at_baselines: false,
        pairs: None,
        budget: None,
        forecast,
        replay,
        restore,
        carried: &[],
    };
    let first = engine(cfg, range, &kernels, run).await?;
    if cfg.build.prebuilt().is_none() {
        return further_steps(cfg, first, &ends, restore).await;
    }
    match cfg.build.prebuilt().and_then(|p| p.chain.as_ref()) {
        // Only a confirmed first bad kernel is narrowed: an unconfirmed one may be the wrong
        // pair of kernels to build the source between.
        Some(chain) if first.exit_code == crate::error::exit_code::OK => {
            match chain::source_stage(cfg, chain, &kernels)? {
                Some(source) => chain::run_source(&source, restore).await,
                None => Ok(first),
            }
        }
        _ => Ok(first),
    }
}

/// The parts of the regression that the first stage's culprit leaves (from `good` to `bad`, its
/// range's ends), hunted one after the other in stages of the same journal ([`steps`]), each
/// from its own baselines; `first` with them.
async fn further_steps(
    cfg: &HuntConfig,
    mut first: Outcome,
    (good, bad): &(String, String),
    restore: &[String],
) -> Result<Outcome, HuntError> {
    let mut plan = first.steps_plan(good, bad, cfg.classify.max_culprits);
    // Hosts that left the pool in a stage stay out of the later ones: they need a person.
    let mut retired = first.retired.clone();
    while let Some((n, part)) = plan.next_part() {
        log_step(n, &part);
        let stage = steps::stage(n);
        let Some(range) = part_range(
            &mut plan,
            &part,
            (&cfg.source, &cfg.repo),
            &cfg.paths,
            cfg.first_parent,
        )?
        else {
            continue;
        };
        let run = Run {
            stage: &stage,
            state_dir: &cfg.state_dir,
            classify: cfg.classify.clone(),
            stop_at_baselines: false,
            pairs: None,
            budget: None,
            forecast: Forecasting::Off,
            replay: None,
            restore,
            carried: &retired,
        };
        let outcome = engine(cfg, range, &[], run).await?;
        for r in &outcome.retired {
            if !retired.iter().any(|(h, _)| *h == r.0) {
                retired.push(r.clone());
            }
        }
        first.add_step(&mut plan, n, part, outcome);
    }
    Ok(first.end_steps(plan))
}

/// `firstbad watch`'s automatic hunt: [`run`] that stops once it has spent `budget` boots
/// without an answer ([`HuntError::BudgetSpent`]).
pub async fn run_budgeted(cfg: &HuntConfig, budget: usize) -> Result<Outcome, HuntError> {
    let (range, kernels) = candidates(cfg)?;
    let run = Run {
        stage: "",
        state_dir: &cfg.state_dir,
        classify: cfg.classify.clone(),
        stop_at_baselines: false,
        pairs: None,
        budget: Some(budget),
        // A night's hunt has no person to stop for: its forecast is in its log and report.
        forecast: Forecasting::Advise,
        replay: None,
        restore: &[],
        carried: &[],
    };
    engine(cfg, range, &kernels, run).await
}

/// Where `firstbad reproduce` keeps its journal: beside the hunt's, never in it, so that the
/// bisection of the same hunt file starts on its own.
pub fn reproduce_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("reproduce")
}

/// `firstbad reproduce`: boots the hunt's good and bad kernels, interleaved, until the
/// baselines' statistics confirm the difference (exit 0) or refute it (exit 3), and stops
/// there. The two are compared as they are, whether or not one descends from the other, and
/// always in `classify.mode = "baselines"`: both kernels are measured.
pub async fn reproduce(cfg: &HuntConfig) -> Result<Outcome, HuntError> {
    let (range, kernels) = match cfg.build.prebuilt() {
        // The two ends of the list (or the entries good and bad name), as they are.
        Some(_) => {
            let (list, kernels) = candidates(cfg)?;
            let range =
                HuntRange::two(list.goods[0].clone(), list.bad).map_err(HuntError::BadInput)?;
            (range, kernels)
        }
        None => (
            HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?,
            Vec::new(),
        ),
    };
    let dir = reproduce_dir(&cfg.state_dir);
    let run = Run {
        stage: "",
        state_dir: &dir,
        classify: crate::config::ClassifyConfig {
            mode: ClassifyMode::Baselines,
            ..cfg.classify.clone()
        },
        stop_at_baselines: true,
        pairs: None,
        budget: None,
        forecast: Forecasting::Off,
        replay: None,
        restore: &[],
        carried: &[],
    };
    engine(cfg, range, &kernels, run).await
}

/// `firstbad watch`: one night of a series. Boots `cfg`'s good (the series' reference) and
/// bad (the night's head) `boots` times each, interleaved in seeded pairs, with every boot
/// journalled in `state_dir` (a kill resumes there), and ends with [`HuntEnd::Measured`].
/// The two are compared as they are, as `reproduce` compares them.
pub async fn measure_pair(
    cfg: &HuntConfig,
    state_dir: &Path,
    boots: usize,
) -> Result<Outcome, HuntError> {
    let range = HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?;
    let run = Run {
        stage: "",
        state_dir,
        classify: crate::config::ClassifyConfig {
            mode: ClassifyMode::Baselines,
            ..cfg.classify.clone()
        },
        stop_at_baselines: true,
        pairs: Some(boots),
        budget: None,
        forecast: Forecasting::Off,
        replay: None,
        restore: &[],
        carried: &[],
    };
    engine(cfg, range, &[], run).await
}

/// How one run of the engine on a kernel hunt file differs between `run` and `reproduce`.
struct Run<'a> {
    /// The journal's stage ("" but in a chained hunt's source stage).
    stage: &'a str,
    state_dir: &'a Path,
    classify: crate::config::ClassifyConfig,
    stop_at_baselines: bool,
    pairs: Option<usize>,
    budget: Option<usize>,
    forecast: Forecasting,
    replay: Option<&'a Path>,
    restore: &'a [String],
    /// Hosts that left the pool in an earlier stage of the run, with why: out of this one too.
    carried: &'a [(String, String)],
}

/// Runs the engine on a kernel hunt's `range` to its end.
async fn engine(
    cfg: &HuntConfig,
    range: HuntRange,
    kernels: &[prebuilt::Candidate],
    run: Run<'_>,
) -> Result<Outcome, HuntError> {
    let Run {
        stage,
        state_dir,
        classify,
        stop_at_baselines,
        pairs,
        budget,
        forecast,
        replay,
        restore,
        carried,
    } = run;
    // The first good is measured as the baseline; the others only bound the range.
    let good = range.goods[0].clone();
    let meaning = meaning(cfg, &classify, &range)?;
    let (_lock, journal, mut state) =
        match prelude::open_hunt(state_dir, stage, &range, meaning, tuning(&classify), replay)? {
            prelude::Opened::Ended(outcome) => return Ok(outcome),
            prelude::Opened::Run {
                lock,
                journal,
                state,
            } => (lock, journal, *state),
        };
    // Hosts an earlier stage took out stay out, unless put back in this one (`--restore-host`).
    // The journal is read again only then: the first stage carries nothing.
    let restored: Vec<String> = if carried.is_empty() {
        Vec::new()
    } else {
        journal
            .events()?
            .into_iter()
            .filter_map(|e| match e.event {
                Event::HostRestored { host } => Some(host),
                _ => None,
            })
            .collect()
    };
    for (host, reason) in carried {
        if !state.retired.iter().any(|(h, _)| h == host) && !restored.contains(host) {
            tracing::warn!("host {host} stays out of the pool: it left it in an earlier step");
            record(
                &journal,
                &mut state,
                Event::HostRetired {
                    host: host.clone(),
                    reason: reason.clone(),
                },
            )?;
        }
    }
    for name in restore {
        if !cfg.hosts.iter().any(|h| h.name == *name) {
            return Err(HuntError::BadInput(format!(
                "--restore-host {name}: the hunt file has no [[hosts]] named {name:?}"
            )));
        }
        if state.retired.iter().any(|(h, _)| h == name) {
            tracing::info!("host {name} is back in the pool");
            record(
                &journal,
                &mut state,
                Event::HostRestored { host: name.clone() },
            )?;
        }
    }

    let (builder, hosts) = prepare(cfg, state_dir, &state.retired, kernels).await?;
    let mut range = range;
    // A range to bisect (not reproduce's or a night's two kernels): the commits that cannot
    // change the kernel are left out before the first candidate is chosen.
    let bisects = !stop_at_baselines && range.history.is_some();
    if bisects {
        prune::prune_range(cfg, &mut range, &builder, &journal, &mut state).await?;
    }
    let pruned = state.pruned.as_ref().is_some_and(|p| !p.links.is_empty());
    let hosts = crate::hosts::machine::test_hosts(hosts, &cfg.workload);
    let first_parent = first_parent(&range, kernels)?;
    let plan = Plan {
        seed: hunt_seed(&good, &range.bad),
        good,
        bad: range.bad,
        goods: range.goods,
        dag: range.dag,
        settings: {
            let s = settings(cfg);
            Settings {
                classify,
                // Pruned commits share a class with the commit they are TREESAME to, as
                // commits outside `paths` do.
                split: s.split && !pruned,
                ..s
            }
        },
        hosts: cfg
            .hosts
            .iter()
            .map(|h| Slot {
                name: h.name.clone(),
                capacity: hosts
                    .iter()
                    .find(|k| k.name() == h.name)
                    .map_or(1, |k| k.capacity()),
            })
            .collect(),
        build_ahead: build_ahead(cfg),
        first_parent,
        kind: HuntKind::Measured,
        stop_at_baselines,
        pairs,
        budget,
        forecast,
    };
    let mut driver = Driver::new(plan).map_err(HuntError::BadInput)?;
    let paths = crate::exec::Paths {
        consoles: state_dir.join("consoles"),
    };
    let end = tracing::Instrument::instrument(
        crate::exec::drive(&mut driver, &mut state, &journal, &builder, &hosts, &paths),
        tracing::info_span!("hunt", name = %cfg.name),
    )
    .await?;
    // Boots an interrupted run left that this run did not take up (a farm's jobs): nobody
    // reads them.
    crate::exec::left_over(&state, &hosts).await;
    state_dir::confirm_saved(&journal, &end)?;
    Ok(Outcome {
        retired: state.retired.clone(),
        ..Outcome::of(end, state.confirmation.clone())
    })
}

/// A kernel hunt's range: the git range of `hunt.repo`, or a prebuilt hunt's list of kernels
/// as a line (with the kernels, resolved to their ids).
fn candidates(cfg: &HuntConfig) -> Result<(HuntRange, Vec<prebuilt::Candidate>), HuntError> {
    let Some(p) = cfg.build.prebuilt() else {
        let range = HuntRange::load(
            &cfg.source,
            &cfg.repo,
            &cfg.goods,
            &cfg.bad,
            &cfg.paths,
            cfg.first_parent,
        )?;
        return Ok((range, Vec::new()));
    };
    let bad_input = |m: String| HuntError::BadInput(format!("{}: {m}", cfg.source.display()));
    let kernels = prebuilt::resolve(p).map_err(|e| bad_input(e.to_string()))?;
    let (dag, good, bad) = prebuilt::line(&kernels, p).map_err(bad_input)?;
    tracing::info!(
        "prebuilt kernels, oldest first: {}",
        kernels
            .iter()
            .map(|k| k.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((HuntRange::without_git(dag, good, bad), kernels))
}

/// A candidate's first parent: from git, or the kernel before it in a prebuilt list.
fn first_parent(
    range: &HuntRange,
    kernels: &[prebuilt::Candidate],
) -> Result<driver::FirstParent, HuntError> {
    if range.history.is_some() {
        return range.first_parents();
    }
    let before: BTreeMap<String, String> = kernels
        .windows(2)
        .map(|w| (w[1].id.clone(), w[0].id.clone()))
        .collect();
    Ok(Box::new(move |c| before.get(c).cloned()))
}

/// The judging settings of a kernel hunt.
pub fn settings(cfg: &HuntConfig) -> Settings {
    Settings {
        classify: cfg.classify.clone(),
        direction: cfg.workload.direction,
        metric: cfg.workload.metric.clone(),
        split: cfg.paths.is_empty(),
        probe: Default::default(),
        same_kernel: matches!(&cfg.build, Build::Source(b) if b.prune),
    }
}

/// Whether the next candidates build while the hosts boot: when no host is a local qemu VM
/// sharing the builder's cores (a build beside a boot there adds noise to the boot), unless
/// `FIRSTBAD_BUILD_AHEAD` says `on` or `off`.
fn build_ahead(cfg: &HuntConfig) -> bool {
    match std::env::var("FIRSTBAD_BUILD_AHEAD").as_deref() {
        Ok("on") => true,
        Ok("off") => false,
        _ => !cfg
            .hosts
            .iter()
            .any(|h| matches!(h.kind, crate::config::HostKind::Qemu(_))),
    }
}

/// The fields of a kernel hunt that change what a verdict means, one by one: a rerun with
/// any of them changed is refused by name ([`begin_or_resume`]).
pub fn meaning(
    cfg: &HuntConfig,
    classify: &crate::config::ClassifyConfig,
    range: &HuntRange,
) -> Result<BTreeMap<String, String>, HuntError> {
    let mut m = range.meaning();
    m.extend(measured_meaning(cfg, classify, |b| match b {
        Build::Prebuilt(_) => Some(range.dag_ids().join(", ")),
        Build::Source(_) => None,
    })?);
    Ok(m)
}

/// What a kernel hunt file's measurements mean, without its range: the workload, the
/// metric, its direction, the kernel config and make arguments (`firstbad watch`'s series
/// is refused on a change of any of these).
pub fn measurement_meaning(cfg: &HuntConfig) -> Result<BTreeMap<String, String>, HuntError> {
    measured_meaning(cfg, &cfg.classify, |_| None)
}

fn measured_meaning(
    cfg: &HuntConfig,
    classify: &crate::config::ClassifyConfig,
    kernels: impl Fn(&Build) -> Option<String>,
) -> Result<BTreeMap<String, String>, HuntError> {
    let mut m = BTreeMap::new();
    judging_meaning(
        &mut m,
        classify,
        ("workload.direction", cfg.workload.direction),
    );
    m.insert("workload.metric".into(), cfg.workload.metric.clone());
    let workload = serde_json::to_string(&cfg.workload.workload).expect("workloads serialise");
    m.insert(
        "workload.file".into(),
        format!("contents {}", content_hash(workload.as_bytes())),
    );
    match &cfg.build {
        Build::Source(b) => {
            let kconfig = std::fs::read(&b.kernel_config)
                .map_err(|e| HuntError::BadInput(format!("{}: {e}", b.kernel_config.display())))?;
            m.insert(
                "build.config".into(),
                format!("contents {}", content_hash(&kconfig)),
            );
            m.insert("build.make_args".into(), b.make_args.join(" "));
        }
        // The list is the history: another list is another hunt.
        Build::Prebuilt(_) => {
            if let Some(k) = kernels(&cfg.build) {
                m.insert("build.kernels".into(), k);
            }
        }
    }
    Ok(m)
}

/// What `[classify]` and the direction (in the field `direction.0`) make a verdict mean, into
/// a hunt's meaning: shared by kernel and metric command hunts.
pub fn judging_meaning(
    m: &mut BTreeMap<String, String>,
    classify: &crate::config::ClassifyConfig,
    direction: (&str, Direction),
) {
    let (mode, level) = match classify.mode {
        ClassifyMode::Baselines => ("baselines", None),
        ClassifyMode::Relative(r) => ("relative", Some(("classify.relative", r))),
        ClassifyMode::Absolute(t) => ("absolute", Some(("classify.threshold", t))),
    };
    m.insert("classify.mode".into(), mode.into());
    if let Some((field, v)) = level {
        m.insert(field.into(), v.to_string());
    }
    m.insert(
        direction.0.into(),
        match direction.1 {
            Direction::LowerIsBetter => "lower-is-better",
            Direction::HigherIsBetter => "higher-is-better",
        }
        .into(),
    );
}

/// The settings that only tune the search, as this run uses them (journalled with each run).
pub fn tuning(c: &crate::config::ClassifyConfig) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("classify.alpha".into(), c.alpha.to_string()),
        ("classify.beta".into(), c.beta.to_string()),
        ("classify.min_effect".into(), c.min_effect.to_string()),
        ("classify.min_boots".into(), c.min_boots.to_string()),
        ("classify.max_boots".into(), c.max_boots.to_string()),
        (
            "classify.max_failed_boots".into(),
            c.max_failed_boots.to_string(),
        ),
        (
            "classify.drift_check_every".into(),
            c.drift_check_every.to_string(),
        ),
        ("classify.refine_boots".into(), c.refine_boots.to_string()),
        (
            "classify.max_baseline_boots".into(),
            c.max_baseline_boots.to_string(),
        ),
        ("classify.confirm_pairs".into(), c.confirm_pairs.to_string()),
        (
            "classify.confirm_max_pairs".into(),
            c.confirm_max_pairs.to_string(),
        ),
        (
            "classify.drift_lasts_boots".into(),
            c.drift_lasts_boots.to_string(),
        ),
        (
            "classify.drift_lasts_minutes".into(),
            c.drift_lasts_minutes.to_string(),
        ),
        ("classify.confidence".into(), c.confidence.to_string()),
        ("classify.max_culprits".into(), c.max_culprits.to_string()),
    ])
}

/// The builder and the test hosts of a hunt, checked and ready.
/// Hosts in `retired` (a resumed hunt's, from the journal) stay out of the pool.
async fn prepare(
    cfg: &HuntConfig,
    state_dir: &Path,
    retired: &[(String, String)],
    kernels: &[prebuilt::Candidate],
) -> Result<(Kernels, Vec<Host>), HuntError> {
    let agent = find_agent()?;
    check_static(&agent).map_err(HuntError::Infrastructure)?;
    let mut hosts = Vec::new();
    for host_cfg in &cfg.hosts {
        if let Some((_, why)) = retired.iter().find(|(h, _)| *h == host_cfg.name) {
            tracing::warn!(
                "host {} stays out of the pool: it left it earlier in this hunt ({why}); once \
                 it is fixed, `firstbad run --restore-host {}` brings it back",
                host_cfg.name,
                host_cfg.name
            );
            continue;
        }
        let host = Host::new(
            host_cfg,
            &agent,
            &state_dir.join("hosts").join(&host_cfg.name),
        );
        host.preflight()?;
        hosts.push(host);
    }
    if hosts.is_empty() {
        return Err(HuntError::Infrastructure(format!(
            "every host of this hunt has left its pool: {}. Fix them, then rerun with \
             `--restore-host NAME` for each",
            retired
                .iter()
                .map(|(h, why)| format!("{h} ({why})"))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    let b = match &cfg.build {
        Build::Prebuilt(p) => Kernels::Prebuilt(Arc::new(prebuilt::PrebuiltBuilder::new(
            kernels,
            &p.cache_dir,
        ))),
        Build::Source(b) => {
            let (repo, b) = (cfg.repo.clone(), b.clone());
            let builder = tokio::task::spawn_blocking(move || Builder::new(&repo, &b))
                .await
                .expect("builder setup does not panic")?;
            Kernels::Source(KernelBuilder(Arc::new(builder)))
        }
    };
    Ok((b, hosts))
}

/// Builds one revision with the hunt's configuration, boots it once on the hunt's first
/// host and runs the workload: a check of the set-up before a long hunt. Its steps go to a
/// journal of its own (`<state_dir>/try/try.sqlite`), never to the hunt's, and its console
/// to `<state_dir>/try/consoles/`.
pub async fn try_revision(
    cfg: &HuntConfig,
    rev: &str,
) -> Result<(BuildOutcome, Option<BootOutcome>), HuntError> {
    let (commit, kernels) = match cfg.build.prebuilt() {
        None => {
            let history = crate::history::History::open(&cfg.repo)
                .map_err(|e| HuntError::BadInput(e.to_string()))?;
            let commit = history
                .resolve(rev)
                .map_err(|e| HuntError::BadInput(format!("{rev}: {e}")))?;
            (commit, Vec::new())
        }
        Some(p) => {
            let kernels = prebuilt::resolve(p).map_err(|e| HuntError::BadInput(e.to_string()))?;
            let k = kernels
                .iter()
                .find(|k| k.kernel.entry == rev || k.id == rev)
                .ok_or_else(|| {
                    HuntError::BadInput(format!(
                        "{rev}: not a kernel of build.kernels; one of: {}",
                        kernels
                            .iter()
                            .map(|k| k.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
            (k.id.clone(), kernels)
        }
    };
    let (builder, mut hosts) = prepare(cfg, &cfg.state_dir, &[], &kernels).await?;
    let dir = cfg.state_dir.join("try");
    std::fs::create_dir_all(&dir)
        .map_err(|e| HuntError::BadInput(format!("cannot create {}: {e}", dir.display())))?;
    let journal = Journal::open(&dir.join("try.sqlite"))?;
    let mut state = HuntState::default();
    let built = prelude::build_recorded(&journal, &mut state, &builder, &commit).await?;
    let BuildOutcome::Built {
        kernel_release,
        image,
        ..
    } = &built
    else {
        return Ok((built, None));
    };
    let test_host =
        crate::hosts::machine::test_hosts(vec![hosts.remove(0)], &cfg.workload).remove(0);
    let host = test_host.name().to_owned();
    let (notes, mut checkpoints) = tokio::sync::mpsc::unbounded_channel();
    let job = crate::exec::BootJob {
        commit: commit.clone(),
        boot: 1,
        image: image.clone(),
        release: kernel_release.clone(),
        // Under try/ with its journal: what `firstbad try` leaves is no hunt's.
        console: dir
            .join("consoles")
            .join(format!("{}-boot1.log", short(&commit))),
        checkpoint: crate::exec::checkpoint::CheckpointLink::new(notes, None),
    };
    let started = Event::BootStarted {
        commit: commit.clone(),
        boot: 1,
        host: host.clone(),
    };
    record(&journal, &mut state, started)?;
    let boot = tracing::Instrument::instrument(
        Arc::clone(&test_host).boot(job),
        tracing::info_span!("boot", commit = short(&commit), boot = 1, host = %host),
    );
    tokio::pin!(boot);
    // A host journals its checkpoints (a farm's job) while the boot runs.
    let boot = loop {
        tokio::select! {
            b = &mut boot => break b?,
            Some(note) = checkpoints.recv() => {
                crate::exec::checkpoint::record_checkpoint(&journal, &mut state, note)?;
            }
        }
    };
    let finished = Event::BootFinished {
        commit,
        boot: 1,
        host,
        outcome: boot.clone(),
    };
    record(&journal, &mut state, finished)?;
    Ok((built, Some(boot)))
}

/// The exit code of a hunt that ended with `end`.
pub fn end_code(end: &HuntEnd, confirmation: Option<&Confirmation>) -> u8 {
    match end {
        HuntEnd::Found { .. } if confirmation.is_some_and(|c| !c.confirmed) => exit_code::AMBIGUOUS,
        HuntEnd::Found { .. } => exit_code::OK,
        HuntEnd::OnlySkippedLeft { .. } => exit_code::AMBIGUOUS,
        HuntEnd::NotReproduced { .. } => exit_code::NOT_REPRODUCED,
        HuntEnd::Reproduced { .. } | HuntEnd::Measured { .. } => exit_code::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 30: a journal that does not fit the range is bad input (2, it exited 5), a spent
    // budget no answer (4, undocumented), a journal write that failed a result not saved (5,
    // it exited 1), a drifted host a stop for a person (5).
    #[test]
    fn every_stop_and_journal_failure_has_its_documented_exit_code() {
        use driver::StopReason;
        let code = |why: StopReason| {
            let direct = why.exit_code();
            let ended = HuntError::from(why).exit_code();
            assert_eq!(direct, ended, "the stop and the error it ends with agree");
            ended
        };
        assert_eq!(
            code(StopReason::JournalDoesNotFit(
                "c3 is not in the range".into()
            )),
            exit_code::BAD_INPUT
        );
        assert_eq!(code(StopReason::BudgetSpent(120)), exit_code::AMBIGUOUS);
        assert_eq!(code(StopReason::NoHostLeft), exit_code::INFRASTRUCTURE);
        assert_eq!(
            code(StopReason::Drifted("moved".into())),
            exit_code::INFRASTRUCTURE
        );
        assert_eq!(
            code(StopReason::Endpoint("no build".into())),
            exit_code::INFRASTRUCTURE
        );
        assert_eq!(
            code(StopReason::Test("exit 127".into())),
            exit_code::INFRASTRUCTURE
        );
        let full = HuntError::Journal(JournalError::Sqlite {
            path: "/s/journal.sqlite".into(),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                None,
            ),
        });
        assert_eq!(full.exit_code(), exit_code::INFRASTRUCTURE);
        assert!(full.resumes(), "rerun once the disk has room");
    }

    #[test]
    fn the_test_binary_is_not_static_and_is_refused() {
        // cargo test binaries link glibc dynamically: exactly what the guest cannot run.
        let me = std::env::current_exe().unwrap();
        let e = check_static(&me).unwrap_err();
        assert!(e.contains("dynamically linked"), "{e}");
    }
}

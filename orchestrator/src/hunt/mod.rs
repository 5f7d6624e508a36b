//! The hunt: one engine for every kernel hunt. A pure driver ([`driver`], one file per phase
//! in [`phases`]) decides from the state ([`state`], a fold of the journal with one `apply`);
//! the executor ([`crate::exec`]) does what it says, journalling each step before it is taken
//! and applying it to the state, and feeds each host as it frees.
//!
//! The loop owns no state of its own beyond what the journal gives, so a rerun after `kill -9`
//! continues exactly where the journal ends: finished builds are not rebuilt (the kernel cache
//! answers), finished boots are not re-measured, and verdicts are re-applied to a fresh
//! bisection in the order they were given.

pub mod driver;
pub mod evidence;
pub mod judge;
mod meaning;
pub mod phases;
pub mod prelude;
pub mod prune;
mod records;
pub mod same_kernel;
pub mod state;
pub mod state_dir;
pub mod steps;
pub mod summary;

pub use prelude::{apply_replay, begin_or_resume, HuntRange};
pub use state::{
    BootRecord, ConfirmStart, Confirmation, DriftRecord, HuntState, RevertStart, Reverted, Running,
};

use crate::build::BuildError;
use crate::error::exit_code;
use crate::error::HostError;
use crate::journal::{HuntEnd, JournalError};
pub use driver::Forecasting;
pub use meaning::{judging_meaning, meaning, measurement_meaning, tuning};
use std::path::{Path, PathBuf};

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
    /// once it is made ([`crate::sim::forecast`]).
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

pub use crate::ids::{is_commit_id, short, shorts};

/// What `firstbad run` ended with.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How the hunt ended.
    pub end: HuntEnd,
    /// The final re-test of a found culprit, and the confidence stated for it.
    pub confirmation: Option<Confirmation>,
    /// The process exit code for it: with further steps, 0 only when every step is confirmed.
    pub exit_code: u8,
    /// What reverting the culprit on top of bad recovers, when the hunt measured it.
    pub reverted: Option<Reverted>,
    /// The further steps of a regression of several, in the order they were hunted
    /// ([`steps`]); empty for one.
    pub steps: Vec<FurtherStep>,
    /// Parts of the regression left unhunted past a cap ([`steps::Steps`]), with why.
    pub unexplained: Vec<(steps::Rest, String)>,
    /// What reverting every confirmed culprit together on top of bad recovers, when the run
    /// found more than one and measured it ([`steps::TOGETHER`]).
    pub together: Option<Reverted>,
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
            reverted: None,
            steps: Vec::new(),
            unexplained: Vec::new(),
            together: None,
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
        steps::Steps::new(
            max_culprits as usize,
            self.rest((good, bad), steps::WHOLE),
            self.confirmed_own(),
        )
    }

    /// The outcome of step `n`'s hunt of `part`; what it leaves goes into `plan`.
    pub fn add_step(
        &mut self,
        plan: &mut steps::Steps,
        n: usize,
        part: steps::Rest,
        outcome: Outcome,
    ) {
        plan.left(
            outcome.rest((&part.good, &part.bad), part.span),
            outcome.confirmed_own(),
        );
        self.steps.push(FurtherStep {
            stage: steps::stage(n),
            part,
            outcome,
        });
    }

    /// Whether this stage, its further steps aside, confirmed its culprit.
    pub fn confirmed_own(&self) -> bool {
        confirmed_culprit(&self.end, self.confirmation.as_ref()).is_some()
    }

    /// The confirmed culprits of the run, its own and its further steps', in the order they
    /// were found: what a revert stage reverts together once there are two or more.
    pub fn confirmed_culprits(&self) -> Vec<String> {
        std::iter::once(self)
            .chain(self.steps.iter().map(|s| &s.outcome))
            .filter_map(|o| confirmed_culprit(&o.end, o.confirmation.as_ref()))
            .map(str::to_owned)
            .collect()
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

/// The culprit a stage that ended with `end` found and its re-test confirmed, if any.
pub fn confirmed_culprit<'a>(end: &'a HuntEnd, c: Option<&Confirmation>) -> Option<&'a str> {
    match end {
        HuntEnd::Found { commit } if c.is_some_and(|c| c.confirmed) => Some(commit),
        _ => None,
    }
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

//! The hunt loop: decides what to build, boot and measure next, and records every step in the
//! journal before taking it.
//!
//! The loop owns no state of its own beyond what [`HuntState::replay`] derives from the
//! journal, so a rerun after `kill -9` continues exactly where the journal ends: finished
//! builds are not rebuilt (the kernel cache answers), finished boots are not re-measured, and
//! verdicts are re-applied to a fresh bisection in the order they were given.

use crate::build::{BuildError, Builder};
use crate::config::{ClassifyMode, HuntConfig};
use crate::error::exit_code;
use crate::history::{History, RangeOptions};
use crate::hosts::{Host, HostError, HostPool};
use crate::journal::{
    BootOutcome, BuildOutcome, Event, HuntEnd, HuntIdentity, Journal, JournalError, RangeInfo,
    Verdict,
};
use crate::posterior::{
    class_probability, commit_evidence, dag_posterior, dag_posterior_with_host, level,
    refine_budget, refine_step, rest, Candidate, Evidence, HostMove, Level, RefineRule, RefineStep,
};
use crate::search::{Bisection, Dag, Next};
use crate::sequential::{
    self, assess_baselines, oriented, AbsoluteTest, BaselineOutcome, Call, HostFailures, Model,
    SequentialConfig, Timeline, BASELINE_LOOKS,
};
use crate::stats::{mann_whitney_u, median};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
}

impl HuntError {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            HuntError::BadInput(_) => exit_code::BAD_INPUT,
            HuntError::Journal(_) => exit_code::ERROR,
            HuntError::Build(_) | HuntError::Host(_) | HuntError::Infrastructure(_) => {
                exit_code::INFRASTRUCTURE
            }
        }
    }
}

/// One finished boot as the journal has it.
#[derive(Debug, Clone)]
pub struct BootRecord {
    /// Boot number of the commit, from 1.
    pub boot: u32,
    /// Place among all of the hunt's finished boots, from 0 (the journal's order).
    pub seq: usize,
    /// The host.
    pub host: String,
    /// How it ended.
    pub outcome: BootOutcome,
}

/// One drift check of the good endpoint.
#[derive(Debug, Clone)]
pub struct DriftRecord {
    /// Verdicts given before it.
    pub after_verdicts: usize,
    /// In the posterior phase, the boots that phase had spent before it.
    pub in_refine_after: Option<usize>,
    /// Whether the host had drifted.
    pub drifted: bool,
    /// The figures, for a person.
    pub summary: String,
}

/// Where the final re-test of a culprit against its parent began.
#[derive(Debug, Clone)]
pub struct ConfirmStart {
    /// The culprit.
    pub commit: String,
    /// Its first parent.
    pub parent: String,
    /// Measured boots of the culprit before the re-test.
    pub commit_before: usize,
    /// Measured boots of the parent before the re-test.
    pub parent_before: usize,
}

/// The final re-test's result, as journalled.
#[derive(Debug, Clone)]
pub struct Confirmation {
    /// The culprit.
    pub commit: String,
    /// Posterior probability of the culprit (absent without a model).
    pub confidence: Option<f64>,
    /// Whether the culprit is borne out.
    pub confirmed: bool,
    /// The figures.
    pub summary: String,
}

/// Everything the journal says about a hunt.
#[derive(Debug, Default, Clone)]
pub struct HuntState {
    /// Finished builds by commit.
    pub builds: HashMap<String, BuildOutcome>,
    /// Finished boots by commit, in order.
    pub boots: HashMap<String, Vec<BootRecord>>,
    /// Verdicts in the order they were given.
    pub verdicts: Vec<(String, Verdict, String)>,
    /// The baseline summary, once confirmed.
    pub baselines: Option<String>,
    /// Measured boots of each endpoint behind the confirmed model (the first this many).
    pub baseline_boots: Option<usize>,
    /// Drift checks of the good endpoint, in order.
    pub drift_checks: Vec<DriftRecord>,
    /// The final re-test under way: culprit, parent, and their measured boots before it.
    pub confirm: Option<ConfirmStart>,
    /// The final re-test's result.
    pub confirmation: Option<Confirmation>,
    /// Boots (failed ones too) since the last verdict: what the posterior phase has spent.
    pub boots_since_verdict: usize,
    /// How the hunt ended, if it did.
    pub end: Option<HuntEnd>,
    /// Number of candidates at the start.
    pub candidates: Option<usize>,
    /// The steps begun and not finished (what a killed or running hunt is doing), joined.
    pub in_flight: Option<String>,
    /// Range options and notes, when the hunt has any.
    pub range: Option<RangeInfo>,
    /// Hosts that left the pool, with the error that took them out.
    pub retired: Vec<(String, String)>,
}

impl HuntState {
    /// Derives the state from journal events.
    pub fn replay(events: &[crate::journal::Entry]) -> HuntState {
        let mut s = HuntState::default();
        // Steps begun and not finished, oldest first: several boots run at once on a pool.
        let mut pending: Vec<(String, Option<u32>, String)> = Vec::new();
        for e in events {
            match &e.event {
                Event::HuntStarted { candidates } => s.candidates = Some(*candidates),
                Event::BuildStarted { commit } => {
                    pending.push((commit.clone(), None, format!("building {commit}")))
                }
                Event::BuildFinished { commit, outcome } => {
                    s.builds.insert(commit.clone(), outcome.clone());
                    pending.retain(|(c, b, _)| !(c == commit && b.is_none()));
                }
                Event::BootStarted { commit, boot, host } => pending.push((
                    commit.clone(),
                    Some(*boot),
                    format!("boot {boot} of {commit} on {host}"),
                )),
                Event::BootFinished {
                    commit,
                    boot,
                    host,
                    outcome,
                } => {
                    let seq = s.total_boots();
                    s.boots.entry(commit.clone()).or_default().push(BootRecord {
                        boot: *boot,
                        seq,
                        host: host.clone(),
                        outcome: outcome.clone(),
                    });
                    pending.retain(|(c, b, _)| !(c == commit && *b == Some(*boot)));
                    s.boots_since_verdict += 1;
                }
                Event::BaselinesConfirmed { summary, boots } => {
                    s.baselines = Some(summary.clone());
                    s.baseline_boots = *boots;
                }
                Event::DriftCheck {
                    after_verdicts,
                    in_refine_after,
                    drifted,
                    summary,
                } => s.drift_checks.push(DriftRecord {
                    after_verdicts: *after_verdicts,
                    in_refine_after: *in_refine_after,
                    drifted: *drifted,
                    summary: summary.clone(),
                }),
                Event::ConfirmStarted { commit, parent } => {
                    s.confirm = Some(ConfirmStart {
                        commit: commit.clone(),
                        parent: parent.clone(),
                        commit_before: s.values(commit).len(),
                        parent_before: s.values(parent).len(),
                    })
                }
                Event::Confirmation {
                    commit,
                    confidence,
                    confirmed,
                    summary,
                    ..
                } => {
                    s.confirmation = Some(Confirmation {
                        commit: commit.clone(),
                        confidence: *confidence,
                        confirmed: *confirmed,
                        summary: summary.clone(),
                    })
                }
                Event::Verdict {
                    commit,
                    verdict,
                    reason,
                } => {
                    s.verdicts.push((commit.clone(), *verdict, reason.clone()));
                    s.boots_since_verdict = 0;
                }
                Event::Finished { end } => s.end = Some(end.clone()),
                Event::Range(r) => s.range = Some(r.clone()),
                Event::HostRetired { host, reason } => {
                    s.retired.push((host.clone(), reason.clone()))
                }
                Event::HostRestored { host } => s.retired.retain(|(h, _)| h != host),
                // Local command hunts (crate::local) keep their own view of these.
                Event::TestStarted { .. } | Event::TestFinished { .. } => {}
            }
        }
        if !pending.is_empty() {
            s.in_flight = Some(
                pending
                    .into_iter()
                    .map(|(_, _, what)| what)
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
        s
    }

    /// The measured values of a commit's boots.
    pub fn values(&self, commit: &str) -> Vec<f64> {
        self.timed(commit).into_iter().map(|b| b.0).collect()
    }

    /// The measured boots of a commit as (value, boot time): the time is the boot's place
    /// among all of the hunt's finished boots, which the posterior's trend model reads.
    pub fn timed(&self, commit: &str) -> Vec<(f64, f64)> {
        self.boots
            .get(commit)
            .map(|b| {
                b.iter()
                    .filter_map(|r| match &r.outcome {
                        BootOutcome::Measured { value, .. } => Some((*value, r.seq as f64)),
                        BootOutcome::Failed { .. } => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The failure reasons of a commit's boots.
    pub fn failures(&self, commit: &str) -> Vec<String> {
        self.boots
            .get(commit)
            .map(|b| {
                b.iter()
                    .filter_map(|r| match &r.outcome {
                        BootOutcome::Failed { reason, .. } => Some(reason.clone()),
                        BootOutcome::Measured { .. } => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The endpoints' failed boots and all their boots: how often the hosts fail a boot
    /// whatever is booted, which sets how many failures skip a commit
    /// ([`sequential::failures_allowed`]).
    pub fn host_failures(&self, endpoints: &[&str]) -> HostFailures {
        endpoints
            .iter()
            .fold(HostFailures::default(), |mut host, endpoint| {
                host.failed += self.failures(endpoint).len();
                host.boots += self.boots.get(*endpoint).map_or(0, Vec::len);
                host
            })
    }

    /// The number the next boot of `commit` gets: one past the highest finished boot, so that
    /// boots finishing out of order (several hosts) never share a number, and a boot cut by
    /// `kill -9` is redone under its own number.
    fn next_boot_number(&self, commit: &str) -> u32 {
        self.boots
            .get(commit)
            .and_then(|b| b.iter().map(|r| r.boot).max())
            .unwrap_or(0)
            + 1
    }

    /// Every finished boot of the hunt.
    fn total_boots(&self) -> usize {
        self.boots.values().map(Vec::len).sum()
    }
}

/// The journal file inside a state directory.
pub fn journal_path(state_dir: &Path) -> PathBuf {
    state_dir.join("journal.sqlite")
}

/// Where the static agent binary is: `$FIRSTBAD_AGENT`, or the static build beside this
/// executable's target directory (what `scripts/build-agent` makes).
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
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
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

/// A short commit id for messages.
pub fn short(id: &str) -> &str {
    &id[..12.min(id.len())]
}

/// What `firstbad run` ended with.
pub struct Outcome {
    /// How the hunt ended.
    pub end: HuntEnd,
    /// The final re-test of a found culprit, and the confidence stated for it.
    pub confirmation: Option<Confirmation>,
    /// The process exit code for it.
    pub exit_code: u8,
}

/// Runs (or resumes) a hunt to its end.
pub async fn run(cfg: &HuntConfig) -> Result<Outcome, HuntError> {
    run_with(cfg, None, &[]).await
}

/// Runs (or resumes) a hunt, first applying the verdicts of a `git bisect log` (`firstbad run
/// --replay <file>`) so that they are not tested again, and putting the hosts named in
/// `restore` back into the pool (`--restore-host`).
pub async fn run_with(
    cfg: &HuntConfig,
    replay: Option<&Path>,
    restore: &[String],
) -> Result<Outcome, HuntError> {
    let HuntRange {
        history,
        dag,
        bad,
        goods,
        info: range_info,
    } = HuntRange::load(
        &cfg.source,
        &cfg.repo,
        &cfg.goods,
        &cfg.bad,
        &cfg.paths,
        cfg.first_parent,
    )?;
    // The first good is measured as the baseline; the others only bound the range.
    let good = goods[0].clone();

    std::fs::create_dir_all(&cfg.state_dir).map_err(|e| {
        HuntError::BadInput(format!(
            "cannot create state directory {}: {e}",
            cfg.state_dir.display()
        ))
    })?;
    let journal = Journal::open(&journal_path(&cfg.state_dir))?;
    let identity = HuntIdentity {
        good: good.clone(),
        bad: bad.clone(),
        fingerprint: fingerprint(cfg, range_info.as_ref())?,
    };
    begin_or_resume(
        &journal,
        &identity,
        &cfg.state_dir,
        "another kernel config/workload/range option",
        &dag,
        &goods,
        range_info.as_ref(),
    )?;
    let mut state = HuntState::replay(&journal.events()?);
    if let Some(end) = &state.end {
        tracing::info!("this hunt has already ended; `firstbad report` shows it");
        return Ok(Outcome {
            exit_code: end_code(end, state.confirmation.as_ref()),
            end: end.clone(),
            confirmation: state.confirmation.clone(),
        });
    }
    if let Some(step) = &state.in_flight {
        tracing::warn!("the previous run stopped during {step}; redoing that step");
    }
    if let Some(file) = replay {
        apply_replay(&history, &dag, &bad, &goods, &journal, &mut state, file)?;
    }
    for name in restore {
        if !cfg.hosts.iter().any(|h| h.name == *name) {
            return Err(HuntError::BadInput(format!(
                "--restore-host {name}: the hunt file has no [[hosts]] named {name:?}"
            )));
        }
        if state.retired.iter().any(|(h, _)| h == name) {
            tracing::info!("host {name} is back in the pool");
            journal.append(&Event::HostRestored { host: name.clone() })?;
            state.retired.retain(|(h, _)| h != name);
        }
    }

    let (builder, host) = prepare(cfg, &state.retired).await?;
    let mut ctx = Ctx {
        cfg,
        journal: &journal,
        builder,
        host,
    };

    // The endpoints must build: a hunt cannot start without both.
    for endpoint in [&good, &bad] {
        if let BuildOutcome::Failed { error_lines, log } =
            ctx.ensure_built(&mut state, endpoint).await?
        {
            return Err(HuntError::BadInput(format!(
                "the {} endpoint {} does not build ({}); log: {}",
                if endpoint == &good { "good" } else { "bad" },
                short(endpoint),
                error_lines
                    .first()
                    .map(String::as_str)
                    .unwrap_or("see the log"),
                log.display()
            )));
        }
    }
    let seed = hunt_seed(&good, &bad);
    let judge = match ctx.establish(&mut state, &good, &bad, seed).await? {
        Ok(judge) => judge,
        Err(message) => {
            let end = HuntEnd::NotReproduced {
                message: format!("{}: {message}", cfg.workload.metric),
            };
            journal.append(&Event::Finished { end: end.clone() })?;
            return Ok(Outcome {
                exit_code: exit_code::NOT_REPRODUCED,
                end,
                confirmation: None,
            });
        }
    };

    let mut bisection =
        Bisection::new(&dag, &bad, &goods).map_err(|e| HuntError::BadInput(e.to_string()))?;
    // Every commit that could be the culprit at the start: the posterior's hypotheses.
    let hypotheses: Vec<usize> = bisection
        .candidates()
        .filter_map(|id| dag.index_of(id))
        .collect();
    for (commit, verdict, _) in &state.verdicts {
        bisection.mark_result(commit, *verdict).map_err(|e| {
            HuntError::BadInput(format!(
                "{}: the journal does not fit this range ({e}); use another hunt.state_dir",
                cfg.state_dir.display()
            ))
        })?;
    }
    // With K hosts, K commits are under test at once: those chosen to split the candidates
    // into K + 1 near-equal parts (git's own choice when K = 1), each booted once a round
    // until its sequential test calls it. A verdict re-plans the round before more boots.
    let mut endpoints: Vec<&str> = goods.iter().map(String::as_str).collect();
    endpoints.push(&bad);
    let end = loop {
        ctx.drift_check(&mut state, &good, &bad, &judge, None)
            .await?;
        match bisection.next() {
            Next::Found(commit) => break HuntEnd::Found { commit },
            Next::OnlySkippedLeft(commits) => break HuntEnd::OnlySkippedLeft { commits },
            Next::Test(_) => {}
        }
        let k = ctx.host.len();
        let mut work = under_test(&state, &bisection, &endpoints);
        for commit in bisection.next_parallel(k) {
            if work.len() < k && !work.contains(&commit) {
                work.push(commit);
            }
        }
        work.truncate(k);
        let mut to_boot = Vec::new();
        let mut decided = false;
        for commit in work {
            if !state.boots.contains_key(&commit) {
                tracing::info!(
                    "testing {} ({} candidates left, ~{} steps)",
                    short(&commit),
                    bisection.remaining(),
                    bisection.steps_left()
                );
            }
            let call = match ctx.ensure_built(&mut state, &commit).await? {
                BuildOutcome::Failed { error_lines, .. } => Some((
                    Verdict::Skip,
                    format!(
                        "build failed: {}",
                        error_lines
                            .first()
                            .map(String::as_str)
                            .unwrap_or("see the log")
                    ),
                )),
                BuildOutcome::Built { .. } => {
                    ctx.decide(&state, &judge, &commit, state.host_failures(&endpoints))
                }
            };
            let Some((verdict, reason)) = call else {
                to_boot.push(commit);
                continue;
            };
            // Another verdict of this round may have ruled it out: its boots stay as
            // evidence for the posterior, without a verdict.
            if !bisection.is_candidate(&commit) {
                continue;
            }
            tracing::info!("{} is {}: {reason}", short(&commit), verdict.as_str());
            bisection
                .mark_result(&commit, verdict)
                .expect("a candidate's verdict leaves a candidate");
            journal.append(&Event::Verdict {
                commit: commit.clone(),
                verdict,
                reason: reason.clone(),
            })?;
            state.verdicts.push((commit, verdict, reason));
            state.boots_since_verdict = 0;
            decided = true;
        }
        if !decided {
            // Fewer commits to test than hosts (near the end, or after skips): the idle hosts
            // boot the same commits again, so their sequential tests finish in fewer rounds.
            let mut batch = to_boot.clone();
            for extra in to_boot.iter().cycle().take(k.saturating_sub(to_boot.len())) {
                batch.push(extra.clone());
            }
            ctx.measure_boots(&mut state, &batch).await?;
        }
    };
    // The posterior phase: git bisect's answer rests on hard verdicts, each wrong with
    // probability alpha or beta against exact centres, and more often against the baselines'
    // estimates; the posterior over every boot, which carries the centres' error, decides,
    // re-booting what is in doubt. A re-test already under way fixes the culprit (resume exactly).
    let end = match (&state.confirm, judge.model()) {
        (Some(c), _) => HuntEnd::Found {
            commit: c.commit.clone(),
        },
        (None, Some(model)) if cfg.classify.refine_boots > 0 => {
            ctx.refine(&mut state, &good, &judge, model, &dag, &hypotheses, end)
                .await?
        }
        _ => end,
    };
    if let HuntEnd::Found { commit } = &end {
        let parent = first_parent(&history, commit)?;
        ctx.confirm(
            &mut state,
            &judge,
            &good,
            commit,
            parent.as_deref(),
            seed,
            &dag,
            &hypotheses,
        )
        .await?;
    }
    journal.append(&Event::Finished { end: end.clone() })?;
    Ok(Outcome {
        exit_code: end_code(&end, state.confirmation.as_ref()),
        end,
        confirmation: state.confirmation.clone(),
    })
}

/// How commits are judged once the endpoints are measured.
#[derive(Debug, Clone, Copy)]
enum Judge {
    /// Like good or like bad, on a model of both (baselines or relative mode).
    Model(Model),
    /// Past an absolute threshold or not.
    Absolute(AbsoluteTest),
}

impl Judge {
    fn classify(&self, values: &[f64], cfg: &SequentialConfig) -> (Call, f64) {
        match self {
            Judge::Model(m) => sequential::classify(m, values, cfg),
            Judge::Absolute(a) => a.classify(values, cfg),
        }
    }

    fn model(&self) -> Option<&Model> {
        match self {
            Judge::Model(m) => Some(m),
            Judge::Absolute(_) => None,
        }
    }
}

/// The seed of a hunt's random choices (the order of endpoint boots): fixed by its endpoints,
/// so that a resumed hunt makes the same choices.
fn hunt_seed(good: &str, bad: &str) -> u64 {
    let hex = |s: &str| u64::from_str_radix(&s[..16.min(s.len())], 16).unwrap_or(0);
    hex(good) ^ hex(bad).rotate_left(17)
}

/// Whether boot `pair` of an interleaved pair sequence puts the first side first: a balanced
/// random order, the same on every rerun.
fn first_side_first(seed: u64, pair: usize) -> bool {
    rand::rngs::StdRng::seed_from_u64(seed ^ (pair as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .gen::<bool>()
}

/// The next `k` boots of two sides booted in balanced pairs, each pair in the seeded random
/// order of [`first_side_first`], given `a` and `b` boots done: true for the first side.
fn interleave(mut a: usize, mut b: usize, seed: u64, k: usize) -> Vec<bool> {
    (0..k)
        .map(|_| {
            let first = match a.cmp(&b) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => first_side_first(seed, a),
            };
            if first {
                a += 1
            } else {
                b += 1
            }
            first
        })
        .collect()
}

/// How the posterior saw the host move, for a person: the trend per 100 boots and a step, in
/// σ of boot-to-boot noise, with boot numbers counted over the whole hunt from 0.
fn host_summary(host: &HostMove, line: &Timeline) -> String {
    let step = match host.step {
        Some((at, size)) => format!(
            "a step of {size:+.2}σ from about boot {:.0} on",
            at * sequential::TREND_UNIT + line.origin
        ),
        None => "no step".to_owned(),
    };
    format!(
        "host as the posterior saw it: trend {:+.2}σ per {} boots, {step}",
        host.trend,
        sequential::TREND_UNIT
    )
}

/// Where the culprit and its parent sit between good (0%) and bad (100%), with 95% intervals
/// ([`level`]), and what to do when the step between them is not the whole regression
/// ([`rest`], `floor` the smallest part that counts): when the culprit is short of bad, more
/// of it came later (hunt again from the culprit); when the parent is worse than good, some
/// came earlier (hunt again up to the parent).
fn partial_summary(
    parent: Level,
    culprit: Level,
    floor: f64,
    parent_id: &str,
    culprit_id: &str,
) -> String {
    let pct = |l: &Level| {
        format!(
            "{:.0}% (95% interval {:.0} to {:.0}%)",
            100.0 * l.level,
            100.0 * l.lo,
            100.0 * l.hi
        )
    };
    let mut s = format!(
        "of the way from good to bad, the parent sits at {} and the culprit at {}",
        pct(&parent),
        pct(&culprit)
    );
    let r = rest(&parent, &culprit, floor);
    if r.after {
        s += &format!(
            "; the culprit is short of bad: more of the regression may come after it \
             (hunt again with good = {})",
            short(culprit_id)
        );
    }
    if r.before {
        s += &format!(
            "; the parent is already worse than good: some of the regression may come before \
             it (hunt again with bad = {})",
            short(parent_id)
        );
    }
    s
}

/// A centre on the oriented log scale back in the metric's unit.
fn unoriented(x: f64, direction: crate::config::Direction) -> f64 {
    match direction {
        crate::config::Direction::LowerIsBetter => x.exp(),
        crate::config::Direction::HigherIsBetter => (-x).exp(),
    }
}

/// A commit's first parent, if it has one.
/// The medians of `commits` host by host (`vm1: good 3.9 (4 boots), bad 63.1 (4 boots)`),
/// when more than one host measured them: a pool of unlike machines shows here, and its
/// host-to-host spread is part of the noise the model was estimated with.
fn per_host(state: &HuntState, commits: &[(&str, &str)]) -> Option<String> {
    let mut hosts: Vec<&str> = commits
        .iter()
        .flat_map(|(c, _)| state.boots.get(*c).into_iter().flatten())
        .map(|r| r.host.as_str())
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    if hosts.len() < 2 {
        return None;
    }
    let parts: Vec<String> = hosts
        .iter()
        .map(|h| {
            let sides: Vec<String> = commits
                .iter()
                .map(|(c, label)| {
                    let v: Vec<f64> = state
                        .boots
                        .get(*c)
                        .into_iter()
                        .flatten()
                        .filter(|r| r.host == *h)
                        .filter_map(|r| match &r.outcome {
                            BootOutcome::Measured { value, .. } => Some(*value),
                            BootOutcome::Failed { .. } => None,
                        })
                        .collect();
                    match v.len() {
                        0 => format!("{label} -"),
                        k => format!("{label} {:.3} ({k} boots)", median(&v)),
                    }
                })
                .collect();
            format!("{h}: {}", sides.join(", "))
        })
        .collect();
    Some(parts.join("; "))
}

/// Failed boots in a row after which a host that boots the same kernels worse than the rest
/// of the pool leaves it: one or two are what a flaky candidate does; three in a row on one
/// host, with one of those kernels measured on another host, point at the host.
const HOST_FAILURES_IN_A_ROW: usize = 3;

/// Why `host` should leave the pool, if its last [`HOST_FAILURES_IN_A_ROW`] boots all failed
/// and one of those commits was measured on another host.
fn failing_host(state: &HuntState, host: &str) -> Option<String> {
    // The host's boots in the order they finished: the journal order, which boot numbers
    // alone do not give across commits, so collect (commit, record) and sort by position.
    let mut mine: Vec<(&str, &BootRecord)> = state
        .boots
        .iter()
        .flat_map(|(c, rs)| rs.iter().map(move |r| (c.as_str(), r)))
        .filter(|(_, r)| r.host == host)
        .collect();
    mine.sort_by_key(|(_, r)| r.seq);
    let tail = mine.get(mine.len().checked_sub(HOST_FAILURES_IN_A_ROW)?..)?;
    if !tail
        .iter()
        .all(|(_, r)| matches!(r.outcome, BootOutcome::Failed { .. }))
    {
        return None;
    }
    let (commit, other) = tail.iter().find_map(|(c, _)| {
        state.boots.get(*c)?.iter().find_map(|r| match &r.outcome {
            BootOutcome::Measured { .. } if r.host != host => Some((*c, r.host.as_str())),
            _ => None,
        })
    })?;
    let last = match &tail[HOST_FAILURES_IN_A_ROW - 1].1.outcome {
        BootOutcome::Failed { reason, .. } => reason.as_str(),
        BootOutcome::Measured { .. } => "",
    };
    Some(format!(
        "its last {HOST_FAILURES_IN_A_ROW} boots failed (last: {last}), while {} measured \
         on {other}",
        short(commit)
    ))
}

/// The commits a parallel round left under test: booted, without a verdict, still candidates,
/// and not endpoints. Derived from the journal, so a resumed hunt goes on with them. Sorted
/// by id, so that the same journal gives the same order.
fn under_test(state: &HuntState, bisection: &Bisection, endpoints: &[&str]) -> Vec<String> {
    let mut ids: Vec<String> = state
        .boots
        .keys()
        .filter(|c| {
            !endpoints.contains(&c.as_str())
                && bisection.is_candidate(c)
                && !state.verdicts.iter().any(|(v, _, _)| v == *c)
        })
        .cloned()
        .collect();
    ids.sort();
    ids
}

fn first_parent(history: &History, commit: &str) -> Result<Option<String>, HuntError> {
    let oid = git2::Oid::from_str(commit).map_err(|e| HuntError::Infrastructure(e.to_string()))?;
    let c = history
        .repo()
        .find_commit(oid)
        .map_err(|e| HuntError::Infrastructure(format!("reading {}: {e}", short(commit))))?;
    Ok(c.parent_ids().next().map(|p| p.to_string()))
}

/// The boots of `id` that are evidence about the culprit, with their boot times: all of them
/// but the bad endpoint's (node 0's) baseline boots in baselines mode, which the model's bad
/// centre already stands for: counted again, they would make the posterior's shared bad centre
/// look twice as sure.
fn evidence_boots(cfg: &HuntConfig, state: &HuntState, dag: &Dag, id: &str) -> Vec<(f64, f64)> {
    let mut boots = state.timed(id);
    if matches!(cfg.classify.mode, ClassifyMode::Baselines) && dag.nodes()[0].id == id {
        let n = state.baseline_boots.unwrap_or(0).min(boots.len());
        boots.drain(..n);
    }
    boots
}

/// The good endpoint's boots after the baselines (the drift checks' re-measurements), with
/// their boot times: good under every hypothesis, and the posterior's firmest hold on the
/// host's trend.
fn reference_boots(state: &HuntState, good: &str) -> Vec<(f64, f64)> {
    let mut boots = state.timed(good);
    boots.drain(..state.baseline_boots.unwrap_or(0).min(boots.len()));
    boots
}

/// The mean boot time of the baseline boots the model came from: where its centres stand on
/// the posterior's trend axis. In relative mode only the good endpoint has baseline boots.
fn trend_origin(cfg: &HuntConfig, state: &HuntState, good: &str, bad: &str) -> f64 {
    let n = state.baseline_boots.unwrap_or(0);
    let endpoints: &[&str] = match cfg.classify.mode {
        ClassifyMode::Baselines => &[good, bad],
        _ => &[good],
    };
    let times: Vec<f64> = endpoints
        .iter()
        .flat_map(|c| state.timed(c).into_iter().take(n))
        .map(|b| b.1)
        .collect();
    if times.is_empty() {
        0.0
    } else {
        times.iter().sum::<f64>() / times.len() as f64
    }
}

/// What the posterior reads from a hunt's boots ([`posterior_inputs`]).
struct PosteriorInputs {
    /// The hypotheses (indices into the hunt's) whose commits gave evidence.
    tested: Vec<usize>,
    /// Their rows ([`bad_under`]).
    under: Vec<Vec<bool>>,
    /// Their evidence.
    evidence: Vec<Evidence>,
    /// The good endpoint's re-measurements, good under every hypothesis.
    reference: Option<Evidence>,
    /// The timeline the boots were read on.
    line: Timeline,
}

/// Every boot of the hunt as the posterior reads it, for the posterior phase and the final
/// confidence alike: each hypothesis's commit's evidence on the timeline of the baselines and
/// the good endpoint's re-measurements. `rows` keeps each tested commit's row across calls.
fn posterior_inputs(
    cfg: &HuntConfig,
    state: &HuntState,
    good: &str,
    model: &Model,
    dag: &Dag,
    hypotheses: &[usize],
    rows: &mut HashMap<usize, Vec<bool>>,
) -> PosteriorInputs {
    let remeasured = reference_boots(state, good);
    let origin = trend_origin(cfg, state, good, &dag.nodes()[0].id);
    let line = Timeline::new(model, origin, &remeasured);
    let (mut tested, mut under, mut evidence) = (Vec::new(), Vec::new(), Vec::new());
    for (h, &t) in hypotheses.iter().enumerate() {
        let boots = evidence_boots(cfg, state, dag, &dag.nodes()[t].id);
        if let Some(e) = commit_evidence(model, &line, &boots) {
            let row = rows
                .entry(t)
                .or_insert_with(|| bad_under(dag, hypotheses, t))
                .clone();
            tested.push(h);
            under.push(row);
            evidence.push(e);
        }
    }
    PosteriorInputs {
        tested,
        under,
        evidence,
        reference: commit_evidence(model, &line, &remeasured),
        line,
    }
}

/// Which candidate hypotheses make a commit bad: itself and its ancestors in the range.
fn bad_under(dag: &Dag, hypotheses: &[usize], tested: usize) -> Vec<bool> {
    let mut seen = vec![false; dag.len()];
    let mut stack = vec![tested];
    while let Some(i) = stack.pop() {
        if !std::mem::replace(&mut seen[i], true) {
            stack.extend(dag.nodes()[i].parents.iter().copied());
        }
    }
    hypotheses.iter().map(|&h| seen[h]).collect()
}

/// A hunt's range, loaded from the hunt file's revisions and range options.
pub struct HuntRange {
    /// The repository.
    pub history: History,
    /// The candidates.
    pub dag: Dag,
    /// The bad commit.
    pub bad: String,
    /// The good commits bounding the range (at least one; a merge base stands in for a good on
    /// another branch).
    pub goods: Vec<String>,
    /// The range options and notes, when there is anything beyond one good and one bad.
    pub info: Option<RangeInfo>,
}

impl HuntRange {
    /// Opens `repo`, resolves the revisions (an unknown one is named by its field in
    /// `source`), loads the range and logs what must be said about it (a merge base standing
    /// in for a good revision).
    pub fn load(
        source: &Path,
        repo: &Path,
        goods: &[String],
        bad: &str,
        paths: &[String],
        first_parent: bool,
    ) -> Result<HuntRange, HuntError> {
        let bad_input = |m: String| HuntError::BadInput(format!("{}: {m}", source.display()));
        let history = History::open(repo).map_err(|e| bad_input(format!("hunt.repo: {e}")))?;
        // Name the field of a revision git does not know; range() then checks how they relate.
        for (i, g) in goods.iter().enumerate() {
            let field = if goods.len() == 1 {
                "hunt.good".to_string()
            } else {
                format!("hunt.good[{i}]")
            };
            history
                .resolve(g)
                .map_err(|e| bad_input(format!("{field}: {e}")))?;
        }
        history
            .resolve(bad)
            .map_err(|e| bad_input(format!("hunt.bad: {e}")))?;
        let options = RangeOptions {
            paths: paths.to_vec(),
            first_parent,
        };
        let range = history
            .range(bad, goods, &options)
            .map_err(|e| bad_input(e.to_string()))?;
        for note in &range.notes {
            tracing::warn!("{note}");
        }
        let goods: Vec<String> = range.goods.iter().map(|g| g.id.clone()).collect();
        if goods.is_empty() {
            return Err(bad_input("hunt.good: no good revision".into()));
        }
        let info =
            (goods.len() > 1 || !paths.is_empty() || first_parent || !range.notes.is_empty()).then(
                || RangeInfo {
                    goods: goods.clone(),
                    paths: paths.to_vec(),
                    first_parent,
                    notes: range.notes.clone(),
                },
            );
        Ok(HuntRange {
            history,
            dag: range.dag,
            bad: range.bad.id.clone(),
            goods,
            info,
        })
    }
}

/// Starts a hunt's journal (identity, candidate count, range options), or checks that the
/// journal already there belongs to this hunt and says that it resumes. `differs` names what,
/// besides the endpoints, makes another hunt (for the message).
pub fn begin_or_resume(
    journal: &Journal,
    identity: &HuntIdentity,
    state_dir: &Path,
    differs: &str,
    dag: &Dag,
    goods: &[String],
    range_info: Option<&RangeInfo>,
) -> Result<(), HuntError> {
    match journal.identity()? {
        Some(existing) if &existing != identity => Err(HuntError::BadInput(format!(
            "{} holds another hunt (good {}, bad {}, or {differs}); use another \
             hunt.state_dir or remove it",
            state_dir.display(),
            short(&existing.good),
            short(&existing.bad)
        ))),
        Some(_) => {
            tracing::info!("resuming the hunt journalled in {}", state_dir.display());
            Ok(())
        }
        None => {
            journal.set_identity(identity)?;
            let candidates = Bisection::new(dag, &identity.bad, goods)
                .map_err(|e| HuntError::BadInput(e.to_string()))?
                .remaining();
            journal.append(&Event::HuntStarted { candidates })?;
            if let Some(info) = range_info {
                journal.append(&Event::Range(info.clone()))?;
            }
            Ok(())
        }
    }
}

/// The builder and the test host of a hunt, checked and ready.
/// Hosts in `retired` (a resumed hunt's, from the journal) stay out of the pool.
async fn prepare(
    cfg: &HuntConfig,
    retired: &[(String, String)],
) -> Result<(Builder, HostPool), HuntError> {
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
            &cfg.state_dir.join("hosts").join(&host_cfg.name),
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
    let host = HostPool::new(hosts);
    let repo = cfg.repo.clone();
    let b = cfg.build.clone();
    let builder = tokio::task::spawn_blocking(move || Builder::new(&repo, &b))
        .await
        .expect("builder setup does not panic")?;
    Ok((builder, host))
}

/// Builds one revision with the hunt's configuration, boots it once on the hunt's first
/// host and runs the workload: a check of the set-up before a long hunt. Journals nothing.
pub async fn try_revision(
    cfg: &HuntConfig,
    rev: &str,
) -> Result<(BuildOutcome, Option<BootOutcome>), HuntError> {
    let history = History::open(&cfg.repo).map_err(|e| HuntError::BadInput(e.to_string()))?;
    let commit = history
        .resolve(rev)
        .map_err(|e| HuntError::BadInput(format!("{rev}: {e}")))?;
    let (builder, host) = prepare(cfg, &[]).await?;
    let dir = tempfile_dir(&cfg.state_dir)?;
    let journal = Journal::open(&dir.join("try.sqlite"))?;
    let mut ctx = Ctx {
        cfg,
        journal: &journal,
        builder,
        host,
    };
    let mut state = HuntState::default();
    let built = ctx.ensure_built(&mut state, &commit).await?;
    if matches!(built, BuildOutcome::Failed { .. }) {
        return Ok((built, None));
    }
    ctx.measure_boot(&mut state, &commit).await?;
    let boot = state
        .boots
        .remove(&commit)
        .and_then(|mut b| b.pop())
        .map(|b| b.outcome);
    Ok((built, boot))
}

fn tempfile_dir(state_dir: &Path) -> Result<PathBuf, HuntError> {
    let dir = state_dir.join("try");
    std::fs::create_dir_all(&dir)
        .map_err(|e| HuntError::BadInput(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

fn end_code(end: &HuntEnd, confirmation: Option<&Confirmation>) -> u8 {
    match end {
        HuntEnd::Found { .. } if confirmation.is_some_and(|c| !c.confirmed) => exit_code::AMBIGUOUS,
        HuntEnd::Found { .. } => exit_code::OK,
        HuntEnd::OnlySkippedLeft { .. } => exit_code::AMBIGUOUS,
        HuntEnd::NotReproduced { .. } => exit_code::NOT_REPRODUCED,
    }
}

/// Journals the verdicts of a `git bisect log` that fit the range, in order, with the reason
/// "from replay file X"; verdicts already in the journal, and those naming the hunt's own
/// endpoints or commits outside the range, are left out (the latter with a warning).
pub fn apply_replay(
    history: &History,
    dag: &crate::search::Dag,
    bad: &str,
    goods: &[String],
    journal: &Journal,
    state: &mut HuntState,
    file: &Path,
) -> Result<(), HuntError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| HuntError::BadInput(format!("--replay {}: {e}", file.display())))?;
    let log = crate::replay::parse(&text)
        .map_err(|e| HuntError::BadInput(format!("--replay {}: {e}", file.display())))?;
    let mut bisection =
        Bisection::new(dag, bad, goods).map_err(|e| HuntError::BadInput(e.to_string()))?;
    for (commit, verdict, _) in &state.verdicts {
        // Contradictions with the journal are reported by the main loop.
        let _ = bisection.mark(commit, *verdict);
    }
    let reason = format!("from replay file {}", file.display());
    let mut applied = 0;
    for v in &log.verdicts {
        let at = format!("--replay {}: line {}", file.display(), v.line);
        let commit = history
            .resolve(&v.rev)
            .map_err(|e| HuntError::BadInput(format!("{at}: {e}")))?;
        let verdict = match v.verdict {
            crate::search::Verdict::Good => Verdict::Good,
            crate::search::Verdict::Bad => Verdict::Bad,
            crate::search::Verdict::Skip => Verdict::Skip,
        };
        let endpoint = (commit == bad && verdict == Verdict::Bad)
            || (goods.contains(&commit) && verdict == Verdict::Good);
        if endpoint
            || state
                .verdicts
                .iter()
                .any(|(c, w, _)| c == &commit && *w == verdict)
        {
            continue;
        }
        match bisection.mark(&commit, verdict) {
            Ok(()) => {}
            Err(crate::search::MarkError::UnknownCommit { .. }) => {
                tracing::warn!(
                    "{at}: {} {} is outside the range; left out",
                    verdict.as_str(),
                    short(&commit)
                );
                continue;
            }
            Err(e) => return Err(HuntError::BadInput(format!("{at}: {e}"))),
        }
        journal.append(&Event::Verdict {
            commit: commit.clone(),
            verdict,
            reason: reason.clone(),
        })?;
        state.verdicts.push((commit, verdict, reason.clone()));
        applied += 1;
    }
    tracing::info!(
        "applied {applied} verdicts from {}; {} candidates left",
        file.display(),
        bisection.remaining()
    );
    Ok(())
}

/// What makes two runs' measurements comparable: the kernel config, the workload, the
/// metric, and the range options (goods beyond the first, paths, first-parent). A journal
/// made with another fingerprint belongs to another hunt.
fn fingerprint(cfg: &HuntConfig, range: Option<&RangeInfo>) -> Result<String, HuntError> {
    let kconfig = std::fs::read(&cfg.build.kernel_config)
        .map_err(|e| HuntError::BadInput(format!("{}: {e}", cfg.build.kernel_config.display())))?;
    let mut m = kconfig;
    m.extend_from_slice(
        serde_json::to_string(&cfg.workload.workload)
            .expect("workloads serialise")
            .as_bytes(),
    );
    m.extend_from_slice(cfg.workload.metric.as_bytes());
    m.extend_from_slice(cfg.build.make_args.join(" ").as_bytes());
    // Only when set, so that journals of one-good hunts made before range options still fit.
    if let Some(r) = range {
        let text = format!(
            "range goods={} paths={} first_parent={}",
            r.goods.join(","),
            r.paths.join(","),
            r.first_parent
        );
        m.extend_from_slice(text.as_bytes());
    }
    Ok(git2::Oid::hash_object(git2::ObjectType::Blob, &m)
        .map_err(|e| HuntError::Infrastructure(e.to_string()))?
        .to_string())
}

/// One boot of a built kernel on `host` and one run of the workload: the boot's outcome (a
/// failed boot is the candidate's), or the host's own error.
async fn boot_and_measure(
    host: &mut Host,
    image: &Path,
    release: &str,
    console: &Path,
    workload: &crate::config::WorkloadConfig,
) -> Result<BootOutcome, HostError> {
    let mut session = match host.boot(image, release, console).await {
        Ok(session) => session,
        Err(Err(host_error)) => return Err(host_error),
        Err(Ok(failure)) => {
            return Ok(BootOutcome::Failed {
                reason: failure.reason,
                console: failure.console,
            })
        }
    };
    let r = session
        .run(&workload.workload, Duration::from_secs(workload.timeout_s))
        .await;
    let (identity, boot_seconds) = (session.identity().clone(), session.boot_seconds());
    session.shutdown().await;
    Ok(match r {
        Err(failure) => BootOutcome::Failed {
            reason: failure.reason,
            console: failure.console,
        },
        Ok(result) => match result.metrics.get(&workload.metric) {
            Some(&value) if value.is_finite() => BootOutcome::Measured {
                kernel_release: identity.kernel_release,
                boot_id: identity.boot_id,
                value,
                result,
                console: console.to_owned(),
                boot_seconds,
            },
            _ => BootOutcome::Failed {
                reason: format!("the workload reported no {} metric", workload.metric),
                console: console.to_owned(),
            },
        },
    })
}

struct Ctx<'a> {
    cfg: &'a HuntConfig,
    journal: &'a Journal,
    builder: Builder,
    /// The hosts; a batch of boots goes one to a host, and a host with a host error leaves the
    /// pool.
    host: HostPool,
}

impl Ctx<'_> {
    async fn ensure_built(
        &mut self,
        state: &mut HuntState,
        commit: &str,
    ) -> Result<BuildOutcome, HuntError> {
        if let Some(done) = state.builds.get(commit) {
            // A journalled kernel must still be in the cache; if someone cleaned the cache,
            // build again rather than boot a missing file.
            match done {
                BuildOutcome::Built { image, .. } if !image.is_file() => {}
                other => return Ok(other.clone()),
            }
        }
        self.journal.append(&Event::BuildStarted {
            commit: commit.to_owned(),
        })?;
        tracing::info!("building {}", short(commit));
        let outcome = {
            let b = &self.builder;
            let c = commit.to_owned();
            tokio::task::block_in_place(|| b.build(&c))?
        };
        match &outcome {
            BuildOutcome::Built {
                kernel_release,
                seconds,
                ..
            } => tracing::info!("built {kernel_release} in {seconds:.0} s"),
            BuildOutcome::Failed { error_lines, log } => tracing::warn!(
                "{} does not build: {} (log {})",
                short(commit),
                error_lines.first().map(String::as_str).unwrap_or("?"),
                log.display()
            ),
        }
        self.journal.append(&Event::BuildFinished {
            commit: commit.to_owned(),
            outcome: outcome.clone(),
        })?;
        state.builds.insert(commit.to_owned(), outcome.clone());
        Ok(outcome)
    }

    /// Boots `commit` once on the first host of the pool that the rotation gives.
    async fn measure_boot(&mut self, state: &mut HuntState, commit: &str) -> Result<(), HuntError> {
        self.measure_boots(state, &[commit.to_owned()]).await
    }

    /// Boots each of `commits` once, at the same time, one to a host (at most as many as the
    /// pool holds; a commit may appear more than once). Every boot is journalled before it
    /// starts and again as it finishes, in the order they finish. Which host gets which boot
    /// rotates with the hunt's boot count, so that each host measures every side of a batch
    /// over the hunt. A host error takes that host out of the pool (journalled) and makes the
    /// boot a failed one, never a verdict; on the last host it stops the hunt, after the other
    /// boots of the batch are journalled.
    async fn measure_boots(
        &mut self,
        state: &mut HuntState,
        commits: &[String],
    ) -> Result<(), HuntError> {
        struct Planned {
            commit: String,
            boot: u32,
            host: usize,
            host_name: String,
            image: PathBuf,
            release: String,
            console: PathBuf,
        }
        let hosts = self.host.len();
        let rotation = state.total_boots() % hosts;
        let mut plans = Vec::new();
        let mut numbers: HashMap<&str, u32> = HashMap::new();
        for (i, commit) in commits.iter().take(hosts).enumerate() {
            let BuildOutcome::Built {
                kernel_release,
                image,
                ..
            } = self.ensure_built(state, commit).await?
            else {
                unreachable!("only built commits are booted");
            };
            let boot = *numbers
                .entry(commit)
                .and_modify(|n| *n += 1)
                .or_insert_with(|| state.next_boot_number(commit));
            let host = (i + rotation) % hosts;
            let host_name = self.host.hosts_mut()[host].name().to_owned();
            self.journal.append(&Event::BootStarted {
                commit: commit.clone(),
                boot,
                host: host_name.clone(),
            })?;
            let console = self
                .cfg
                .state_dir
                .join("consoles")
                .join(format!("{}-boot{boot}.log", short(commit)));
            tracing::info!("boot {boot} of {} on {host_name}", short(commit));
            plans.push(Planned {
                commit: commit.clone(),
                boot,
                host,
                host_name,
                image,
                release: kernel_release,
                console,
            });
        }

        let workload = &self.cfg.workload;
        let mut free: Vec<Option<&mut Host>> = self.host.hosts_mut().iter_mut().map(Some).collect();
        let mut running = futures_util::stream::FuturesUnordered::new();
        for plan in plans {
            let host = free[plan.host]
                .take()
                .expect("one boot to a host in a batch");
            running.push(async move {
                let r = boot_and_measure(host, &plan.image, &plan.release, &plan.console, workload)
                    .await;
                (plan, r)
            });
        }
        let mut retired: Vec<String> = Vec::new();
        let mut stop: Option<HostError> = None;
        while let Some((plan, r)) = futures_util::StreamExt::next(&mut running).await {
            let outcome = match r {
                Ok(outcome) => outcome,
                // With another host left, this one leaves the pool and the boot is a failed
                // one (never a verdict); the hunt goes on with the others.
                Err(host_error) if retired.len() + 1 < hosts => {
                    let reason = host_error.to_string();
                    tracing::error!(
                        "host {} leaves the pool: {reason}; the hunt goes on with the other {}",
                        plan.host_name,
                        hosts - retired.len() - 1
                    );
                    self.journal.append(&Event::HostRetired {
                        host: plan.host_name.clone(),
                        reason: reason.clone(),
                    })?;
                    state.retired.push((plan.host_name.clone(), reason.clone()));
                    retired.push(plan.host_name.clone());
                    BootOutcome::Failed {
                        reason: format!("host {} left the pool: {reason}", plan.host_name),
                        console: plan.console.clone(),
                    }
                }
                Err(host_error) => {
                    // The last host: nothing to journal for this boot (it is redone on a
                    // rerun), but the batch's other boots still are.
                    stop.get_or_insert(host_error);
                    continue;
                }
            };
            match &outcome {
                BootOutcome::Measured { value, .. } => tracing::info!(
                    "{} boot {} on {}: {} = {value:.2}",
                    short(&plan.commit),
                    plan.boot,
                    plan.host_name,
                    workload.metric
                ),
                BootOutcome::Failed { reason, console } => tracing::warn!(
                    "{} boot {} on {} failed: {reason} (console {})",
                    short(&plan.commit),
                    plan.boot,
                    plan.host_name,
                    console.display()
                ),
            }
            self.journal.append(&Event::BootFinished {
                commit: plan.commit.clone(),
                boot: plan.boot,
                host: plan.host_name.clone(),
                outcome: outcome.clone(),
            })?;
            let seq = state.total_boots();
            state
                .boots
                .entry(plan.commit.clone())
                .or_default()
                .push(BootRecord {
                    boot: plan.boot,
                    seq,
                    host: plan.host_name,
                    outcome,
                });
            state.boots_since_verdict += 1;
        }
        drop(running);
        for name in &retired {
            self.host.retire(name);
        }
        if let Some(e) = stop {
            return Err(e.into());
        }
        // A host whose boots keep failing while the same kernels boot elsewhere is the
        // problem, not the kernels: it leaves the pool (never the last one).
        for name in self
            .host
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
        {
            if self.host.len() < 2 {
                break;
            }
            if let Some(reason) = failing_host(state, &name) {
                tracing::error!("host {name} leaves the pool: {reason}");
                self.journal.append(&Event::HostRetired {
                    host: name.clone(),
                    reason: reason.clone(),
                })?;
                state.retired.push((name.clone(), reason));
                self.host.retire(&name);
            }
        }
        Ok(())
    }

    /// Boots an endpoint until the sequential test calls it, it reaches the boot cap
    /// (undecided: a skip), or too many of its boots fail (a skip): in the relative and
    /// absolute modes, before the hosts' failure rate is known, so with the rule for hosts
    /// that never fail.
    async fn judge_commit(
        &mut self,
        state: &mut HuntState,
        judge: &Judge,
        commit: &str,
    ) -> Result<(Verdict, String), HuntError> {
        loop {
            if let Some(decided) = self.decide(state, judge, commit, HostFailures::default()) {
                return Ok(decided);
            }
            self.measure_boot(state, commit).await?;
        }
    }

    /// The verdict the boots of a built commit give so far, or `None` while the sequential
    /// test wants another boot. `host`: how often the endpoints' boots fail, which sets how
    /// many failures skip the commit.
    fn decide(
        &self,
        state: &HuntState,
        judge: &Judge,
        commit: &str,
        host: HostFailures,
    ) -> Option<(Verdict, String)> {
        let c = &self.cfg.classify;
        let seq = SequentialConfig::from(c);
        let values = state.values(commit);
        let (call, llr) = judge.classify(&values, &seq);
        let k = values.len();
        let figures = format!(
            "{k} boot(s), median {:.3}, log-likelihood ratio {llr:+.2} (bad at {:+.2}, good at {:+.2})",
            median(&values),
            seq.upper(),
            seq.lower()
        );
        match call {
            Call::Bad if k >= c.min_boots as usize => {
                return Some((Verdict::Bad, format!("like bad: {figures}")))
            }
            Call::Good if k >= c.min_boots as usize => {
                return Some((Verdict::Good, format!("like good: {figures}")))
            }
            Call::Undecided => return Some((Verdict::Skip, format!("undecided after {figures}"))),
            _ => {}
        }
        let failures = state.failures(commit);
        if failures.len() >= sequential::failures_allowed(c.max_failed_boots as usize, k, host) {
            return Some((
                Verdict::Skip,
                format!(
                    "{} boots failed, {k} measured{}; last: {}",
                    failures.len(),
                    if host.boots > 0 {
                        format!(" (the endpoints: {} of {} failed)", host.failed, host.boots)
                    } else {
                        String::new()
                    },
                    failures.last().map(String::as_str).unwrap_or("")
                ),
            ));
        }
        None
    }

    /// Stops the hunt when an endpoint keeps failing: a hunt cannot go on without it.
    fn endpoint_ok(&self, state: &HuntState, commit: &str, which: &str) -> Result<(), HuntError> {
        let failed = state.failures(commit);
        // A few failures among many baseline boots are noise of the lab; a run of them is not.
        // The endpoints are what measures the hosts' failure rate, so theirs is the rule for a
        // host that never fails: past about one boot in 8, the hunt stops.
        let allowed = sequential::failures_allowed(
            self.cfg.classify.max_failed_boots as usize,
            state.values(commit).len(),
            HostFailures::default(),
        );
        if failed.len() > allowed {
            return Err(HuntError::Infrastructure(format!(
                "the {which} endpoint {} failed to boot or measure {} times; last: {}",
                short(commit),
                failed.len(),
                failed.last().map(String::as_str).unwrap_or("")
            )));
        }
        Ok(())
    }

    /// Measures the endpoints until the mode's judge is established, or the regression is
    /// refuted (`Ok(Err(figures))`).
    async fn establish(
        &mut self,
        state: &mut HuntState,
        good: &str,
        bad: &str,
        seed: u64,
    ) -> Result<Result<Judge, String>, HuntError> {
        let c = &self.cfg.classify;
        let seq = SequentialConfig::from(c);
        let dir = self.cfg.workload.direction;
        if state.baselines.is_some() {
            // Resumed: the same boots give the same model.
            let (g, b) = (state.values(good), state.values(bad));
            let n = state.baseline_boots.unwrap_or(g.len().min(b.len()));
            return Ok(Ok(match c.mode {
                ClassifyMode::Baselines => {
                    Judge::Model(Model::from_baselines(&g[..n], &b[..n], dir))
                }
                ClassifyMode::Relative(r) => Judge::Model(Model::relative(&g[..n], r, dir)),
                ClassifyMode::Absolute(t) => Judge::Absolute(AbsoluteTest {
                    threshold: t,
                    direction: dir,
                }),
            }));
        }
        let (judge, n, summary) = match c.mode {
            ClassifyMode::Baselines => loop {
                let (g, b) = (state.values(good), state.values(bad));
                match assess_baselines(&g, &b, dir, &seq) {
                    BaselineOutcome::Confirmed(model, summary) => {
                        let n = g
                            .len()
                            .min(b.len())
                            .min(*BASELINE_LOOKS.last().expect("set"));
                        let summary = match per_host(state, &[(good, "good"), (bad, "bad")]) {
                            Some(hosts) => format!("{summary}; per host: {hosts}"),
                            None => summary,
                        };
                        break (Judge::Model(model), Some(n), summary);
                    }
                    BaselineOutcome::Refuted(message) => return Ok(Err(message)),
                    BaselineOutcome::NeedMore => {}
                }
                self.endpoint_ok(state, good, "good")?;
                self.endpoint_ok(state, bad, "bad")?;
                // Interleaved in balanced pairs, each pair in a random order: a host that
                // drifts while the baselines are taken hits both endpoints alike. With several
                // hosts, a batch boots the next few of that order at once.
                let batch: Vec<String> = interleave(g.len(), b.len(), seed, self.host.len())
                    .into_iter()
                    .map(|first| if first { good } else { bad }.to_owned())
                    .collect();
                self.measure_boots(state, &batch).await?;
            },
            ClassifyMode::Relative(r) => {
                let n = BASELINE_LOOKS[0];
                while state.values(good).len() < n {
                    self.endpoint_ok(state, good, "good")?;
                    let missing = n - state.values(good).len();
                    let batch = vec![good.to_owned(); missing.min(self.host.len())];
                    self.measure_boots(state, &batch).await?;
                }
                let model = Model::relative(&state.values(good)[..n], r, dir);
                let judge = Judge::Model(model);
                match self.judge_commit(state, &judge, bad).await? {
                    (Verdict::Bad, why) => (
                        judge,
                        Some(n),
                        format!(
                            "regression confirmed: the bad endpoint is at least {:.0}% worse than good                              ({n} good boots, median {:.3}, noise {:.1}% per boot); bad endpoint {why}",
                            r * 100.0,
                            median(&state.values(good)[..n]),
                            model.sigma * 100.0
                        ),
                    ),
                    (_, why) => {
                        return Ok(Err(format!(
                            "the bad endpoint is not {:.0}% worse than good ({n} good boots, median {:.3}): {why}",
                            r * 100.0,
                            median(&state.values(good)[..n])
                        )))
                    }
                }
            }
            ClassifyMode::Absolute(t) => {
                let judge = Judge::Absolute(AbsoluteTest {
                    threshold: t,
                    direction: dir,
                });
                let mut said = Vec::new();
                for (endpoint, which, want) in
                    [(good, "good", Verdict::Good), (bad, "bad", Verdict::Bad)]
                {
                    let (v, why) = self.judge_commit(state, &judge, endpoint).await?;
                    if v != want {
                        return Ok(Err(format!(
                            "against the threshold {t}, the {which} endpoint is not {}: {why}",
                            want.as_str()
                        )));
                    }
                    said.push(format!("{which} endpoint {why}"));
                }
                (
                    judge,
                    None,
                    format!("threshold {t} separates the endpoints: {}", said.join("; ")),
                )
            }
        };
        tracing::info!("{}: {summary}", self.cfg.workload.metric);
        self.journal.append(&Event::BaselinesConfirmed {
            summary: summary.clone(),
            boots: n,
        })?;
        state.baselines = Some(summary);
        state.baseline_boots = n;
        Ok(Ok(judge))
    }

    /// After every `drift_check_every` verdicts, boots the good endpoint once more and tests
    /// its recent re-measurements against the baselines and the earlier ones' trend
    /// ([`sequential::drift`]): if it has moved in a way the trend does not explain, every
    /// verdict since the last check is suspect, so the hunt stops for a person. The
    /// re-measurements are also the posterior's firmest evidence of how the host moves.
    ///
    /// In the posterior phase (`in_refine`: the boots it has spent), where no verdicts come,
    /// the check falls every few boots of the phase instead ([`sequential::refine_drift_due`]).
    async fn drift_check(
        &mut self,
        state: &mut HuntState,
        good: &str,
        bad: &str,
        judge: &Judge,
        in_refine: Option<usize>,
    ) -> Result<(), HuntError> {
        let every = self.cfg.classify.drift_check_every as usize;
        let Some(model) = judge.model().copied() else {
            return Ok(());
        };
        let v = state.verdicts.len();
        let due = match in_refine {
            None => {
                v > 0
                    && v.is_multiple_of(every.max(1))
                    && !state
                        .drift_checks
                        .iter()
                        .any(|d| d.after_verdicts == v && d.in_refine_after.is_none() && !d.drifted)
            }
            Some(spent) => {
                let last = state
                    .drift_checks
                    .iter()
                    .filter(|d| d.after_verdicts == v && !d.drifted)
                    .filter_map(|d| d.in_refine_after)
                    .max()
                    .unwrap_or(0);
                sequential::refine_drift_due(spent, last, every)
            }
        };
        if every == 0 || !due {
            return Ok(());
        }
        self.endpoint_ok(state, good, "good")?;
        // Every host of the pool re-measures good at once: each can drift on its own.
        let batch = vec![good.to_owned(); self.host.len()];
        self.measure_boots(state, &batch).await?;
        let remeasured = reference_boots(state, good);
        let origin = trend_origin(self.cfg, state, good, bad);
        let Some(d) = sequential::drift(&model, origin, &remeasured) else {
            // The boot failed: the next check tries again.
            return Ok(());
        };
        let recent = &remeasured[remeasured.len().saturating_sub(sequential::DRIFT_WINDOW)..];
        let when = match in_refine {
            None => format!("after {v} verdicts"),
            Some(spent) => format!("after {spent} boots of the posterior phase"),
        };
        let summary = format!(
            "good endpoint re-measured {when}, recent boots [{}]: {:.2} of the way \
             from the good centre {:.3} to the bad centre {:.3} beyond the trend of the \
             earlier ones ({:+.2}σ per {} boots), z = {:+.1} (drift at |z| ≥ {} and ≥ {} of the \
             way)",
            recent
                .iter()
                .map(|x| format!("{:.3}", x.0))
                .collect::<Vec<_>>()
                .join(", "),
            d.shift,
            unoriented(model.good, model.direction),
            unoriented(model.bad, model.direction),
            d.trend,
            sequential::TREND_UNIT,
            d.z,
            sequential::DRIFT_Z,
            sequential::DRIFT_MIN_SHIFT
        );
        self.journal.append(&Event::DriftCheck {
            after_verdicts: v,
            in_refine_after: in_refine,
            drifted: d.drifted,
            summary: summary.clone(),
        })?;
        state.drift_checks.push(DriftRecord {
            after_verdicts: v,
            in_refine_after: in_refine,
            drifted: d.drifted,
            summary: summary.clone(),
        });
        if d.drifted {
            let recent = state.boots.get(good).map_or(&[][..], |b| {
                &b[b.len().saturating_sub(sequential::DRIFT_WINDOW)..]
            });
            let mut hosts: Vec<&str> = recent.iter().map(|r| r.host.as_str()).collect();
            hosts.sort_unstable();
            hosts.dedup();
            return Err(HuntError::Infrastructure(format!(
                "the test host drifted ({}): {summary}. The verdicts given since the previous \
                 check are suspect; check the host, then rerun to resume (the check is repeated \
                 first)",
                hosts.join(", ")
            )));
        }
        tracing::info!("no drift: {summary}");
        Ok(())
    }

    /// The posterior phase after the bisection: [`refine_step`] on every boot of the hunt,
    /// until one commit alone holds `confidence` of the posterior or `refine_boots` boots per
    /// bit of the range are spent; each step boots the commit, tested or not, whose boot tells
    /// the most about the culprit. Every choice derives from the journalled boots, so a resumed
    /// hunt takes the same steps. Returns the most probable culprit, or `end` unchanged when
    /// nothing was tested.
    #[allow(clippy::too_many_arguments)]
    async fn refine(
        &mut self,
        state: &mut HuntState,
        good: &str,
        judge: &Judge,
        model: &Model,
        dag: &Dag,
        hypotheses: &[usize],
        end: HuntEnd,
    ) -> Result<HuntEnd, HuntError> {
        let c = &self.cfg.classify;
        let rule = RefineRule {
            confidence: c.confidence,
            budget: refine_budget(c.refine_boots as usize, hypotheses.len()),
            // With paths, commits that do not touch them share a class with one that does and
            // are not candidates for git either: a class is then answered by its tested member.
            split: self.cfg.paths.is_empty(),
            n_baseline: model.n_baseline,
        };
        let mut rows: HashMap<usize, Vec<bool>> = HashMap::new();
        let bad = &dag.nodes()[0].id;
        loop {
            // No verdicts come in this phase: the good endpoint is re-measured every few boots.
            self.drift_check(state, good, bad, judge, Some(state.boots_since_verdict))
                .await?;
            let PosteriorInputs {
                tested,
                under,
                evidence,
                reference,
                line,
            } = posterior_inputs(self.cfg, state, good, model, dag, hypotheses, &mut rows);
            if tested.is_empty() {
                return Ok(end);
            }
            let (p, _) = dag_posterior(hypotheses.len(), &under, &evidence, reference.as_ref());
            let candidate = |h: usize| {
                let id = &dag.nodes()[hypotheses[h]].id;
                let boots = evidence_boots(self.cfg, state, dag, id);
                Candidate {
                    // Commits that cannot give evidence: they do not build, or keep failing to
                    // boot without ever giving a value.
                    usable: !matches!(state.builds.get(id), Some(BuildOutcome::Failed { .. }))
                        && (!boots.is_empty()
                            || state.failures(id).len() < c.max_failed_boots as usize),
                    built: matches!(state.builds.get(id), Some(BuildOutcome::Built { .. })),
                    boots: boots
                        .iter()
                        .filter(|b| line.admit(model, b.0, b.1).is_some())
                        .count(),
                }
            };
            // P(an untested commit is bad): the mass of the hypotheses it descends from.
            let bad_mass = |h: usize| {
                let row = bad_under(dag, hypotheses, hypotheses[h]);
                p.iter().zip(&row).filter(|(_, &b)| b).map(|(x, _)| x).sum()
            };
            let spent = state.boots_since_verdict;
            let probe = match refine_step(&p, &tested, &under, spent, &rule, candidate, bad_mass) {
                RefineStep::Stop {
                    answer,
                    mass,
                    settled,
                } => {
                    let id = &dag.nodes()[hypotheses[answer]].id;
                    tracing::info!(
                        "posterior: {} at {:.1}% ({spent} boots in this phase{})",
                        short(id),
                        mass * 100.0,
                        if settled { "" } else { ", stopped short" }
                    );
                    return Ok(HuntEnd::Found { commit: id.clone() });
                }
                RefineStep::Boot(h) => hypotheses[h],
            };
            let id = dag.nodes()[probe].id.clone();
            tracing::info!(
                "posterior: {spent} of {} boots in this phase; booting {}",
                rule.budget,
                short(&id)
            );
            if let BuildOutcome::Failed { .. } = self.ensure_built(state, &id).await? {
                continue;
            }
            self.measure_boot(state, &id).await?;
        }
    }

    /// The final re-test: the culprit and its first parent booted in interleaved pairs, then
    /// the confidence in the culprit from every boot of the hunt (the DAG posterior).
    #[allow(clippy::too_many_arguments)]
    async fn confirm(
        &mut self,
        state: &mut HuntState,
        judge: &Judge,
        good: &str,
        commit: &str,
        parent: Option<&str>,
        seed: u64,
        dag: &Dag,
        hypotheses: &[usize],
    ) -> Result<(), HuntError> {
        if state
            .confirmation
            .as_ref()
            .is_some_and(|c| c.commit == commit)
        {
            return Ok(());
        }
        let c = &self.cfg.classify;
        let pairs = c.confirm_pairs as usize;
        let mut retest = String::new();
        let mut ordered = true;
        let parent_built = match parent {
            Some(p) => matches!(
                self.ensure_built(state, p).await?,
                BuildOutcome::Built { .. }
            ),
            None => false,
        };
        match parent {
            Some(p) if pairs > 0 && parent_built => {
                if state.confirm.as_ref().is_none_or(|s| s.commit != commit) {
                    self.journal.append(&Event::ConfirmStarted {
                        commit: commit.to_owned(),
                        parent: p.to_owned(),
                    })?;
                    state.confirm = Some(ConfirmStart {
                        commit: commit.to_owned(),
                        parent: p.to_owned(),
                        commit_before: state.values(commit).len(),
                        parent_before: state.values(p).len(),
                    });
                }
                let start = state.confirm.clone().expect("set above");
                let failed_before = state.failures(commit).len() + state.failures(p).len();
                let (cv, pv) = loop {
                    let cv = state.values(commit)[start.commit_before..].to_vec();
                    let pv = state.values(p)[start.parent_before..].to_vec();
                    if cv.len() >= pairs && pv.len() >= pairs {
                        break (cv, pv);
                    }
                    let failed = state.failures(commit).len() + state.failures(p).len();
                    if failed - failed_before > c.max_failed_boots as usize {
                        retest = format!(
                            "re-test stopped after {} failed boots; ",
                            failed - failed_before
                        );
                        break (cv, pv);
                    }
                    let batch: Vec<String> =
                        interleave(pv.len(), cv.len(), seed ^ 1, self.host.len())
                            .into_iter()
                            .map(|first| if first { p } else { commit }.to_owned())
                            .collect();
                    self.measure_boots(state, &batch).await?;
                };
                let dir = self.cfg.workload.direction;
                let (co, po): (Vec<f64>, Vec<f64>) = (
                    cv.iter().map(|&x| oriented(x, dir)).collect(),
                    pv.iter().map(|&x| oriented(x, dir)).collect(),
                );
                ordered = !cv.is_empty() && !pv.is_empty() && median(&co) > median(&po);
                retest += &format!(
                    "re-test of {} against its parent {} in {} interleaved pairs: parent median {:.3}, \
                     culprit median {:.3} ({:+.1}%), Mann-Whitney p = {:.3}",
                    short(commit),
                    short(p),
                    cv.len().min(pv.len()),
                    median(&pv),
                    median(&cv),
                    ((median(&co) - median(&po)).exp() - 1.0) * 100.0,
                    mann_whitney_u(&co, &po).p_value
                );
            }
            Some(p) if !parent_built => {
                retest = format!("the parent {} does not build: no paired re-test", short(p))
            }
            _ => retest = "no paired re-test".to_owned(),
        }
        let confidence = judge.model().and_then(|m| {
            let claimed = dag.index_of(commit)?;
            let claimed = hypotheses.iter().position(|&h| h == claimed)?;
            let inputs = posterior_inputs(
                self.cfg,
                state,
                good,
                m,
                dag,
                hypotheses,
                &mut HashMap::new(),
            );
            if inputs.under.is_empty() {
                return None;
            }
            let (p, _, host) = dag_posterior_with_host(
                hypotheses.len(),
                &inputs.under,
                &inputs.evidence,
                inputs.reference.as_ref(),
            );
            let mut said = host_summary(&host, &inputs.line);
            // How much of the regression the step from the parent to the culprit is: only
            // against measured endpoints (baselines mode), where bad is the regression itself.
            if matches!(self.cfg.classify.mode, ClassifyMode::Baselines) {
                let at = |id: &str| {
                    let e = if id == good {
                        inputs.reference.clone()
                    } else {
                        commit_evidence(m, &inputs.line, &evidence_boots(self.cfg, state, dag, id))
                    };
                    e.as_ref().and_then(|e| level(e, &host))
                };
                // The smallest part that counts: min_effect, as a share of the effect.
                let floor = m.share_of(c.min_effect);
                let part = parent
                    .and_then(|p| Some(partial_summary(at(p)?, at(commit)?, floor, p, commit)));
                if let Some(part) = part {
                    said = format!("{said}; {part}");
                }
            }
            Some((class_probability(&inputs.under, &p, claimed), said))
        });
        let confirmed = ordered && confidence.as_ref().is_none_or(|(p, _)| *p >= c.confidence);
        let summary = match &confidence {
            Some((p, host)) => format!(
                "{retest}; posterior probability of the culprit {:.1}% (target {:.0}%); {host}",
                p * 100.0,
                c.confidence * 100.0
            ),
            None => retest,
        };
        let confidence = confidence.map(|(p, _)| p);
        if confirmed {
            tracing::info!("culprit confirmed: {summary}");
        } else {
            tracing::warn!("culprit NOT confirmed: {summary}");
        }
        self.journal.append(&Event::Confirmation {
            commit: commit.to_owned(),
            parent: parent.unwrap_or_default().to_owned(),
            confidence,
            confirmed,
            summary: summary.clone(),
        })?;
        state.confirmation = Some(Confirmation {
            commit: commit.to_owned(),
            confidence,
            confirmed,
            summary,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds a finished boot of `commit` on `host`, measured or failed.
    fn add(state: &mut HuntState, commit: &str, host: &str, ok: bool) {
        let seq = state.total_boots();
        let outcome = if ok {
            BootOutcome::Measured {
                kernel_release: String::new(),
                boot_id: String::new(),
                value: 1.0,
                result: firstbad_wire::WorkloadResult {
                    kind: "fsync-latency".into(),
                    series: Default::default(),
                    metrics: Default::default(),
                    duration_s: 1.0,
                    system: None,
                    vmstat: Vec::new(),
                },
                console: PathBuf::new(),
                boot_seconds: 1.0,
            }
        } else {
            BootOutcome::Failed {
                reason: format!("boot timeout on {host}"),
                console: PathBuf::new(),
            }
        };
        let records = state.boots.entry(commit.to_owned()).or_default();
        records.push(BootRecord {
            boot: records.len() as u32 + 1,
            seq,
            host: host.to_owned(),
            outcome,
        });
    }

    #[test]
    fn a_host_that_fails_kernels_which_boot_elsewhere_leaves_the_pool() {
        let mut state = HuntState::default();
        add(&mut state, "a", "vm1", true);
        add(&mut state, "a", "vm2", true);
        add(&mut state, "b", "vm1", false);
        add(&mut state, "c", "vm1", false);
        add(&mut state, "b", "vm2", false);
        add(&mut state, "d", "vm2", false);
        assert_eq!(failing_host(&state, "vm1"), None, "two failures in a row");
        add(&mut state, "a", "vm1", false);
        let why = failing_host(&state, "vm1").expect("a booted on vm2, not on vm1");
        assert!(
            why.contains("last 3 boots failed") && why.contains("on vm2"),
            "{why}"
        );
        // vm2's failures are of kernels no other host has measured: the kernels', not its.
        add(&mut state, "e", "vm2", false);
        assert_eq!(failing_host(&state, "vm2"), None);
    }

    #[test]
    fn the_hosts_failure_rate_is_read_from_the_endpoints_only() {
        let mut state = HuntState::default();
        for k in 0..10 {
            add(&mut state, "good", "vm1", k != 3);
            add(&mut state, "bad", "vm1", true);
        }
        // A broken commit's failures are its own, not the host's.
        for _ in 0..5 {
            add(&mut state, "broken", "vm1", false);
        }
        let host = state.host_failures(&["good", "bad"]);
        assert_eq!(
            host,
            HostFailures {
                failed: 1,
                boots: 20
            }
        );
        // One boot in 20 failed: a commit that gave 10 values is skipped at its 4th failure
        // (ln(100) / ln(10) = 2, + 10 × ln(1.9) / ln(10) = 2.8 rounded down), where a sound
        // host skips it at its 3rd (2 + 10 / 8 rounded down).
        assert_eq!(sequential::failures_allowed(2, 10, host), 4);
        assert_eq!(
            sequential::failures_allowed(2, 10, HostFailures::default()),
            3
        );
    }

    #[test]
    fn batches_of_boots_keep_the_sides_in_balanced_seeded_pairs() {
        for seed in [1u64, 7, 42] {
            // One at a time, each boot chosen after the last: the order a single host uses.
            let one_by_one = interleave(0, 0, seed, 16);
            for k in [2usize, 3, 4] {
                let (mut a, mut b, mut all) = (0, 0, Vec::new());
                while all.len() < 16 {
                    let batch = interleave(a, b, seed, k);
                    a += batch.iter().filter(|&&f| f).count();
                    b += batch.iter().filter(|&&f| !f).count();
                    all.extend(batch);
                }
                all.truncate(16);
                assert_eq!(all, one_by_one, "k = {k}, seed {seed}");
            }
            let firsts = one_by_one.iter().filter(|&&f| f).count();
            assert_eq!(firsts, 8, "balanced pairs");
            for pair in one_by_one.chunks(2) {
                assert_ne!(pair[0], pair[1], "each pair boots both sides");
            }
        }
        assert_eq!(
            interleave(3, 5, 9, 2),
            [true, true],
            "the side behind catches up first"
        );
    }

    #[test]
    fn the_test_binary_is_not_static_and_is_refused() {
        // cargo test binaries link glibc dynamically: exactly what the guest cannot run.
        let me = std::env::current_exe().unwrap();
        let e = check_static(&me).unwrap_err();
        assert!(e.contains("dynamically linked"), "{e}");
    }

    #[test]
    fn a_culprit_that_is_part_of_the_regression_says_where_the_rest_is() {
        let at = |level: f64, half: f64| Level {
            level,
            lo: level - half,
            hi: level + half,
        };
        let (parent, culprit) = ("1111111111111111", "2222222222222222");
        // The whole step: levels and intervals, no advice.
        let whole = partial_summary(at(0.02, 0.2), at(0.97, 0.2), 0.05, parent, culprit);
        assert_eq!(
            whole,
            "of the way from good to bad, the parent sits at 2% (95% interval -18 to 22%) and \
             the culprit at 97% (95% interval 77 to 117%)"
        );
        // Half of it, the rest later: hunt on from the culprit.
        let first_half = partial_summary(at(0.0, 0.2), at(0.5, 0.2), 0.05, parent, culprit);
        assert!(
            first_half.ends_with(
                "; the culprit is short of bad: more of the regression may come after it \
                 (hunt again with good = 222222222222)"
            ),
            "{first_half}"
        );
        assert!(!first_half.contains("before"), "{first_half}");
        // The second half: some came before the parent.
        let second_half = partial_summary(at(0.5, 0.2), at(1.0, 0.2), 0.05, parent, culprit);
        assert!(
            second_half.ends_with(
                "; the parent is already worse than good: some of the regression may come \
                 before it (hunt again with bad = 111111111111)"
            ),
            "{second_half}"
        );
        // Clearly short of bad, but by less than the floor: not worth a hunt.
        let nearly = partial_summary(at(0.0, 0.01), at(0.97, 0.01), 0.05, parent, culprit);
        assert!(!nearly.contains("hunt again"), "{nearly}");
    }
}

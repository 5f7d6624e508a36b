//! The hunt loop: decides what to build, boot and measure next, and records every step in the
//! journal before taking it.
//!
//! The loop owns no state of its own beyond what [`HuntState::replay`] derives from the
//! journal, so a rerun after `kill -9` continues exactly where the journal ends: finished
//! builds are not rebuilt (the kernel cache answers), finished boots are not re-measured, and
//! verdicts are re-applied to a fresh bisection in the order they were given.

use crate::build::{BuildError, Builder};
use crate::classify::{check_baselines, BaselineCheck, Baselines, Decision};
use crate::config::HuntConfig;
use crate::error::exit_code;
use crate::history::{History, RangeOptions};
use crate::hosts::{Host, HostError, HostPool};
use crate::journal::{
    BootOutcome, BuildOutcome, Event, HuntEnd, HuntIdentity, Journal, JournalError, RangeInfo,
    Verdict,
};
use crate::search::{Bisection, Next};
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
    /// The host.
    pub host: String,
    /// How it ended.
    pub outcome: BootOutcome,
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
    /// How the hunt ended, if it did.
    pub end: Option<HuntEnd>,
    /// Number of candidates at the start.
    pub candidates: Option<usize>,
    /// The last step begun and not finished (what a killed run was doing).
    pub in_flight: Option<String>,
    /// Range options and notes, when the hunt has any.
    pub range: Option<RangeInfo>,
}

impl HuntState {
    /// Derives the state from journal events.
    pub fn replay(events: &[crate::journal::Entry]) -> HuntState {
        let mut s = HuntState::default();
        for e in events {
            match &e.event {
                Event::HuntStarted { candidates } => s.candidates = Some(*candidates),
                Event::BuildStarted { commit } => s.in_flight = Some(format!("building {commit}")),
                Event::BuildFinished { commit, outcome } => {
                    s.builds.insert(commit.clone(), outcome.clone());
                    s.in_flight = None;
                }
                Event::BootStarted { commit, boot, host } => {
                    s.in_flight = Some(format!("boot {boot} of {commit} on {host}"))
                }
                Event::BootFinished {
                    commit,
                    boot,
                    host,
                    outcome,
                } => {
                    s.boots.entry(commit.clone()).or_default().push(BootRecord {
                        boot: *boot,
                        host: host.clone(),
                        outcome: outcome.clone(),
                    });
                    s.in_flight = None;
                }
                Event::BaselinesConfirmed { summary } => s.baselines = Some(summary.clone()),
                Event::Verdict {
                    commit,
                    verdict,
                    reason,
                } => s.verdicts.push((commit.clone(), *verdict, reason.clone())),
                Event::Finished { end } => s.end = Some(end.clone()),
                Event::Range(r) => s.range = Some(r.clone()),
            }
        }
        s
    }

    /// The measured values of a commit's boots.
    pub fn values(&self, commit: &str) -> Vec<f64> {
        self.boots
            .get(commit)
            .map(|b| {
                b.iter()
                    .filter_map(|r| match &r.outcome {
                        BootOutcome::Measured { value, .. } => Some(*value),
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

    fn boots_done(&self, commit: &str) -> u32 {
        self.boots.get(commit).map_or(0, |b| b.len() as u32)
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
    /// The process exit code for it.
    pub exit_code: u8,
}

/// Runs (or resumes) a hunt to its end.
pub async fn run(cfg: &HuntConfig) -> Result<Outcome, HuntError> {
    run_with(cfg, None).await
}

/// Runs (or resumes) a hunt, first applying the verdicts of a `git bisect log` (`firstbad run
/// --replay <file>`) so that they are not tested again.
pub async fn run_with(cfg: &HuntConfig, replay: Option<&Path>) -> Result<Outcome, HuntError> {
    let history = History::open(&cfg.repo).map_err(|e| HuntError::BadInput(e.to_string()))?;
    let options = RangeOptions {
        paths: cfg.paths.clone(),
        first_parent: cfg.first_parent,
    };
    // Name the field of a revision git does not know; range() then checks how they relate.
    for (i, g) in cfg.goods.iter().enumerate() {
        let field = if cfg.goods.len() == 1 {
            "hunt.good".to_string()
        } else {
            format!("hunt.good[{i}]")
        };
        history
            .resolve(g)
            .map_err(|e| HuntError::BadInput(format!("{}: {field}: {e}", cfg.source.display())))?;
    }
    history
        .resolve(&cfg.bad)
        .map_err(|e| HuntError::BadInput(format!("{}: hunt.bad: {e}", cfg.source.display())))?;
    let range = history
        .range(&cfg.bad, &cfg.goods, &options)
        .map_err(|e| HuntError::BadInput(format!("{}: {e}", cfg.source.display())))?;
    for note in &range.notes {
        tracing::warn!("{note}");
    }
    let bad = range.bad.id.clone();
    let goods: Vec<String> = range.goods.iter().map(|g| g.id.clone()).collect();
    // The first good is measured as the baseline; the others only bound the range.
    let good = goods.first().cloned().ok_or_else(|| {
        HuntError::BadInput(format!(
            "{}: hunt.good: no good revision",
            cfg.source.display()
        ))
    })?;
    let dag = range.dag;
    let range_info =
        (goods.len() > 1 || !cfg.paths.is_empty() || cfg.first_parent || !range.notes.is_empty())
            .then(|| RangeInfo {
                goods: goods.clone(),
                paths: cfg.paths.clone(),
                first_parent: cfg.first_parent,
                notes: range.notes.clone(),
            });

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
    match journal.identity()? {
        Some(existing) if existing != identity => {
            return Err(HuntError::BadInput(format!(
                "{} holds another hunt (good {}, bad {}, or another kernel config/workload/\
                 range option); use another hunt.state_dir or remove it",
                cfg.state_dir.display(),
                short(&existing.good),
                short(&existing.bad)
            )))
        }
        Some(_) => tracing::info!(
            "resuming the hunt journalled in {}",
            cfg.state_dir.display()
        ),
        None => {
            journal.set_identity(&identity)?;
            let candidates = Bisection::new(&dag, &bad, &goods)
                .map_err(|e| HuntError::BadInput(e.to_string()))?
                .remaining();
            journal.append(&Event::HuntStarted { candidates })?;
            if let Some(info) = &range_info {
                journal.append(&Event::Range(info.clone()))?;
            }
        }
    }
    let mut state = HuntState::replay(&journal.events()?);
    if let Some(end) = &state.end {
        tracing::info!("this hunt has already ended; `firstbad report` shows it");
        return Ok(Outcome {
            exit_code: end_code(end),
            end: end.clone(),
        });
    }
    if let Some(step) = &state.in_flight {
        tracing::warn!("the previous run stopped during {step}; redoing that step");
    }
    if let Some(file) = replay {
        apply_replay(&history, &dag, &bad, &goods, &journal, &mut state, file)?;
    }

    let (builder, host) = prepare(cfg).await?;
    let mut ctx = Ctx {
        cfg,
        journal: &journal,
        builder,
        host,
    };

    // Baselines: both endpoints, interleaved, good first.
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
    let n = cfg.classify.baseline_boots as usize;
    loop {
        let (g, b) = (state.values(&good).len(), state.values(&bad).len());
        if g >= n && b >= n {
            break;
        }
        let next = if g <= b { &good } else { &bad };
        let failed = state.failures(next);
        if failed.len() > cfg.classify.max_failed_boots as usize {
            return Err(HuntError::Infrastructure(format!(
                "the {} endpoint {} failed to boot or measure {} times; last: {}",
                if next == &good { "good" } else { "bad" },
                short(next),
                failed.len(),
                failed.last().map(String::as_str).unwrap_or("")
            )));
        }
        ctx.measure_boot(&mut state, next).await?;
    }
    let baselines: Baselines = match check_baselines(
        &state.values(&good),
        &state.values(&bad),
        cfg.workload.direction,
        &cfg.classify,
    ) {
        BaselineCheck::Confirmed(b, summary) => {
            if state.baselines.is_none() {
                tracing::info!("{}: {summary}", cfg.workload.metric);
                journal.append(&Event::BaselinesConfirmed {
                    summary: summary.clone(),
                })?;
                state.baselines = Some(summary);
            }
            b
        }
        BaselineCheck::NotReproduced(message) => {
            let end = HuntEnd::NotReproduced {
                message: format!("{}: {message}", cfg.workload.metric),
            };
            journal.append(&Event::Finished { end: end.clone() })?;
            return Ok(Outcome {
                exit_code: exit_code::NOT_REPRODUCED,
                end,
            });
        }
    };

    let mut bisection =
        Bisection::new(&dag, &bad, &goods).map_err(|e| HuntError::BadInput(e.to_string()))?;
    for (commit, verdict, _) in &state.verdicts {
        bisection.mark(commit, *verdict).map_err(|e| {
            HuntError::BadInput(format!(
                "{}: the journal does not fit this range ({e}); use another hunt.state_dir",
                cfg.state_dir.display()
            ))
        })?;
    }
    let end = loop {
        match bisection.next() {
            Next::Found(commit) => break HuntEnd::Found { commit },
            Next::OnlySkippedLeft(commits) => break HuntEnd::OnlySkippedLeft { commits },
            Next::Test(commit) => {
                tracing::info!(
                    "testing {} ({} candidates left, ~{} steps)",
                    short(&commit),
                    bisection.remaining(),
                    bisection.steps_left()
                );
                let (verdict, reason) =
                    ctx.classify_commit(&mut state, &baselines, &commit).await?;
                tracing::info!("{} is {}: {reason}", short(&commit), verdict.as_str());
                journal.append(&Event::Verdict {
                    commit: commit.clone(),
                    verdict,
                    reason: reason.clone(),
                })?;
                state.verdicts.push((commit.clone(), verdict, reason));
                bisection
                    .mark(&commit, verdict)
                    .expect("the engine's own candidate can be marked");
            }
        }
    };
    journal.append(&Event::Finished { end: end.clone() })?;
    Ok(Outcome {
        exit_code: end_code(&end),
        end,
    })
}

/// The builder and the test host of a hunt, checked and ready.
async fn prepare(cfg: &HuntConfig) -> Result<(Builder, HostPool), HuntError> {
    let agent = find_agent()?;
    check_static(&agent).map_err(HuntError::Infrastructure)?;
    let mut hosts = Vec::new();
    for host_cfg in &cfg.hosts {
        let host = Host::new(
            host_cfg,
            &agent,
            &cfg.state_dir.join("hosts").join(&host_cfg.name),
        );
        host.preflight()?;
        hosts.push(host);
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
    let (builder, host) = prepare(cfg).await?;
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

fn end_code(end: &HuntEnd) -> u8 {
    match end {
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

struct Ctx<'a> {
    cfg: &'a HuntConfig,
    journal: &'a Journal,
    builder: Builder,
    /// The hosts; boots go to the first, and a host with a host error leaves the pool.
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

    async fn measure_boot(&mut self, state: &mut HuntState, commit: &str) -> Result<(), HuntError> {
        let BuildOutcome::Built {
            kernel_release,
            image,
            ..
        } = self.ensure_built(state, commit).await?
        else {
            unreachable!("only built commits are booted");
        };
        let boot = state.boots_done(commit) + 1;
        let host = self.host.current().name().to_owned();
        self.journal.append(&Event::BootStarted {
            commit: commit.to_owned(),
            boot,
            host: host.clone(),
        })?;
        let console = self
            .cfg
            .state_dir
            .join("consoles")
            .join(format!("{}-boot{boot}.log", short(commit)));
        tracing::info!("boot {boot} of {} on {host}", short(commit));
        let outcome = match self
            .host
            .current()
            .boot(&image, &kernel_release, &console)
            .await
        {
            // With another host left, this one leaves the pool and the boot is a failed one
            // (never a verdict); the next boot goes to the next host.
            Err(Err(host_error)) => match self.host.retire(&host_error) {
                Some(next) => BootOutcome::Failed {
                    reason: format!(
                        "host {host} left the pool ({host_error}); next boots on {next}"
                    ),
                    console: console.clone(),
                },
                None => return Err(host_error.into()),
            },
            Err(Ok(failure)) => BootOutcome::Failed {
                reason: failure.reason,
                console: failure.console,
            },
            Ok(mut session) => {
                let timeout = Duration::from_secs(self.cfg.workload.timeout_s);
                let r = session.run(&self.cfg.workload.workload, timeout).await;
                let (identity, boot_seconds) = (session.identity().clone(), session.boot_seconds());
                session.shutdown().await;
                match r {
                    Err(failure) => BootOutcome::Failed {
                        reason: failure.reason,
                        console: failure.console,
                    },
                    Ok(result) => match result.metrics.get(&self.cfg.workload.metric) {
                        Some(&value) if value.is_finite() => BootOutcome::Measured {
                            kernel_release: identity.kernel_release,
                            boot_id: identity.boot_id,
                            value,
                            result,
                            console: console.clone(),
                            boot_seconds,
                        },
                        _ => BootOutcome::Failed {
                            reason: format!(
                                "the workload reported no {} metric",
                                self.cfg.workload.metric
                            ),
                            console: console.clone(),
                        },
                    },
                }
            }
        };
        match &outcome {
            BootOutcome::Measured { value, .. } => {
                tracing::info!(
                    "{} boot {boot}: {} = {value:.2}",
                    short(commit),
                    self.cfg.workload.metric
                )
            }
            BootOutcome::Failed { reason, console } => tracing::warn!(
                "{} boot {boot} failed: {reason} (console {})",
                short(commit),
                console.display()
            ),
        }
        self.journal.append(&Event::BootFinished {
            commit: commit.to_owned(),
            boot,
            host: host.clone(),
            outcome: outcome.clone(),
        })?;
        state
            .boots
            .entry(commit.to_owned())
            .or_default()
            .push(BootRecord {
                boot,
                host: host.clone(),
                outcome,
            });
        Ok(())
    }

    async fn classify_commit(
        &mut self,
        state: &mut HuntState,
        baselines: &Baselines,
        commit: &str,
    ) -> Result<(Verdict, String), HuntError> {
        if let BuildOutcome::Failed { error_lines, .. } = self.ensure_built(state, commit).await? {
            return Ok((
                Verdict::Skip,
                format!(
                    "build failed: {}",
                    error_lines
                        .first()
                        .map(String::as_str)
                        .unwrap_or("see the log")
                ),
            ));
        }
        loop {
            match baselines.classify(&state.values(commit), &self.cfg.classify) {
                Decision::Good(why) => return Ok((Verdict::Good, why)),
                Decision::Bad(why) => return Ok((Verdict::Bad, why)),
                Decision::Undecided(why) => {
                    return Ok((Verdict::Skip, format!("undecided: {why}")))
                }
                Decision::NeedMore => {}
            }
            let failures = state.failures(commit);
            if failures.len() >= self.cfg.classify.max_failed_boots as usize {
                return Ok((
                    Verdict::Skip,
                    format!(
                        "{} boots failed: {}",
                        failures.len(),
                        failures.last().map(String::as_str).unwrap_or("")
                    ),
                ));
            }
            self.measure_boot(state, commit).await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_binary_is_not_static_and_is_refused() {
        // cargo test binaries link glibc dynamically: exactly what the guest cannot run.
        let me = std::env::current_exe().unwrap();
        let e = check_static(&me).unwrap_err();
        assert!(e.contains("dynamically linked"), "{e}");
    }
}

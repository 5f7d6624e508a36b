//! `firstbad run`: start a hunt, or resume it from its journal; and how a hunt's end is printed.

use super::{chain_of, load_file, open_state, runtime, RepoCommits};
use firstbad::config::HuntFile;
use firstbad::engine;
use firstbad::error::exit_code;
use firstbad::history::History;
use firstbad::hunt::{self, short};
use firstbad::journal::HuntEnd;
use firstbad::report::Commits;
use std::path::{Path, PathBuf};

/// Runs (or resumes) the hunt of `hunt`; the exit code.
pub(super) fn run(
    hunt: &Path,
    replay: Option<PathBuf>,
    restore_host: Vec<String>,
    fresh: bool,
    no_prune: bool,
    forecast: hunt::Forecasting,
) -> anyhow::Result<u8> {
    let mut file = match load_file(hunt) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    if no_prune {
        match &mut file {
            HuntFile::Kernel(cfg) => match &mut cfg.build {
                firstbad::config::Build::Source(b) => b.prune = false,
                // A chained hunt's source stage between two kernels.
                firstbad::config::Build::Prebuilt(p) => {
                    if let Some(chain) = &mut p.chain {
                        chain.build.prune = false;
                    }
                }
            },
            HuntFile::Local(_) => {
                eprintln!(
                    "{}: --no-prune is for kernel hunts: a [test] hunt builds nothing",
                    hunt.display()
                );
                return Ok(firstbad::error::exit_code::BAD_INPUT);
            }
        }
    }
    if fresh {
        match hunt::state_dir::start_afresh(file.state_dir()) {
            Ok(Some(to)) => eprintln!(
                "firstbad: --fresh: moved the earlier hunt's files into {}",
                to.display()
            ),
            Ok(None) => {}
            Err(e) => {
                eprintln!("firstbad: {e}");
                return Ok(e.exit_code());
            }
        }
    }
    let result = match &file {
        HuntFile::Kernel(cfg) => {
            let rt = runtime()?;
            let run = engine::run_with(cfg, replay.as_deref(), &restore_host, forecast);
            hunt::HuntError::or_interrupted(firstbad::interrupt::block_on(&rt, run))
        }
        HuntFile::Local(_) if forecast == hunt::Forecasting::Only => {
            eprintln!(
                "{}: firstbad plan is for kernel hunts: a [test] hunt's runs take seconds, run \
                 it",
                hunt.display()
            );
            return Ok(firstbad::error::exit_code::BAD_INPUT);
        }
        HuntFile::Local(_) if !restore_host.is_empty() => {
            eprintln!(
                "{}: --restore-host is for kernel hunts; a [test] hunt has no hosts",
                hunt.display()
            );
            return Ok(firstbad::error::exit_code::BAD_INPUT);
        }
        HuntFile::Local(cfg) => firstbad::local::run(cfg, replay.as_deref()),
    };
    Ok(print_outcome(result, &file, hunt))
}

/// Prints how a hunt ended (the culprit, the confirmation, the range, or why it stopped) and
/// returns the exit code.
pub(super) fn print_outcome(
    result: Result<firstbad::hunt::Outcome, firstbad::hunt::HuntError>,
    file: &HuntFile,
    hunt: &Path,
) -> u8 {
    match result {
        Ok(outcome) => {
            // A chained hunt's answer is a commit of its source stage's repository.
            let repo = chain_of(file).map_or(file.repo(), |c| c.repo.as_path());
            if let Some(line) = chained_line(file) {
                println!("{line}");
            }
            let history = History::open(repo).ok();
            let commits = RepoCommits(history);
            match &outcome.end {
                HuntEnd::Found { commit } => {
                    print_found("first bad commit", commit, &outcome, &commits);
                }
                HuntEnd::OnlySkippedLeft { commits: c } => {
                    println!("only skipped commits left; the first bad commit is one of:");
                    for id in c {
                        let subject = commits.info(id).map(|c| c.subject).unwrap_or_default();
                        println!("  {} {subject}", short(id));
                    }
                }
                HuntEnd::NotReproduced { message } => {
                    println!("regression not reproduced: {message}");
                }
                HuntEnd::Reproduced { summary } => {
                    println!("reproduced: {summary}");
                }
                HuntEnd::Measured { summary } => {
                    println!("measured: {summary}");
                }
            }
            print_steps(&outcome, &commits);
            if !matches!(
                outcome.end,
                HuntEnd::Reproduced { .. } | HuntEnd::Measured { .. }
            ) {
                eprintln!(
                    "firstbad: `firstbad report {}` shows every step and the bisect log",
                    hunt.display()
                );
            }
            outcome.exit_code
        }
        Err(e) => {
            if let hunt::HuntError::Forecast(_) = &e {
                print_forecast(file);
            }
            eprintln!("firstbad: {e}");
            if e.exit_code() == exit_code::INFRASTRUCTURE && e.resumes() {
                eprintln!("firstbad: the journal is intact; rerun the same command to resume");
            }
            e.exit_code()
        }
    }
}

/// The forecast the hunt's journal holds, a line each (`firstbad plan`, a no-go).
fn print_forecast(file: &HuntFile) {
    let state = super::open_state(file.state_dir(), "").ok().flatten();
    if let Some(f) = state.and_then(|(_, s)| s.forecast) {
        println!("forecast:");
        for line in f.lines() {
            println!("  {line}");
        }
    }
}

/// "`what`: <commit> <subject>", the confirmation's verdict and figures, and the step's share of
/// the range it was hunted in.
fn print_found(what: &str, commit: &str, outcome: &hunt::Outcome, commits: &RepoCommits) {
    let subject = commits.info(commit).map(|c| c.subject).unwrap_or_default();
    println!(
        "{what}: {} {}",
        short(commit),
        firstbad::report::text::one_line(&subject)
    );
    if let Some(c) = &outcome.confirmation {
        println!(
            "{}: {}",
            if c.confirmed {
                "confirmed"
            } else {
                "NOT confirmed"
            },
            c.summary
        );
    }
    if let Some(r) = &outcome.reverted {
        println!("reverted on top: {}", r.summary);
    }
}

/// The further steps of a regression of several (issue 31 item 1): each part hunted, what it
/// found, and the parts left past `classify.max_culprits`.
fn print_steps(outcome: &hunt::Outcome, commits: &RepoCommits) {
    if outcome.steps.is_empty() && outcome.unexplained.is_empty() {
        return;
    }
    // A step's share of its own part, as a share of the whole regression: the part's span
    // comes from the levels of the steps that left it, whose own intervals are not carried.
    // The levels are on the log scale; the first stage's ratio of bad to good gives the same
    // step in the metric's own unit, which is what a person reads beside the medians.
    let ratio = outcome
        .confirmation
        .as_ref()
        .and_then(|c| c.levels)
        .and_then(|l| l.ratio);
    let share = |o: &hunt::Outcome, span: (f64, f64)| {
        o.confirmation.as_ref().and_then(|c| c.levels).map(|l| {
            let s = l.share();
            let whole = |x: f64| 100.0 * hunt::steps::of_whole(span, x);
            let about = if span == hunt::steps::WHOLE {
                ""
            } else {
                "about; "
            };
            // A step whose ends are its part's ends by the kernels' identity has no re-test
            // and no interval of its own: only its part's place in the whole is uncertain.
            let by = if s.lo == s.hi {
                "its part's whole by its kernels' identity"
            } else {
                "the re-test's interval"
            };
            let interval = |what: &str, l: f64, lo: f64, hi: f64| {
                format!(
                    "{l:.0}% of the whole regression{what} ({about}{lo:.0}-{hi:.0}% by {by})",
                    lo = lo.max(0.0)
                )
            };
            let log = interval("", whole(s.level), whole(s.lo), whole(s.hi));
            match l.metric_share_apart(span, ratio) {
                Some(m) => {
                    format!(
                        "{}; on the log scale the statistics read, {:.0}% ({:.0}-{:.0}%)",
                        interval(
                            " in the metric's own unit",
                            100.0 * m.level,
                            100.0 * m.lo,
                            100.0 * m.hi
                        ),
                        whole(s.level),
                        whole(s.lo.max(0.0)),
                        whole(s.hi)
                    )
                }
                _ => log,
            }
        })
    };
    if let Some(s) = share(outcome, hunt::steps::WHOLE) {
        println!("the regression has more than one step: the first found is {s}");
    }
    for step in &outcome.steps {
        let part = format!(
            "{} from {} to {}",
            step.stage,
            short(&step.part.good),
            short(&step.part.bad)
        );
        match &step.outcome.end {
            HuntEnd::Found { commit } => {
                print_found(
                    &format!("first bad commit of {part}"),
                    commit,
                    &step.outcome,
                    commits,
                );
                // print_found has said what its revert on top of its part recovers.
                if let Some(s) = share(&step.outcome, step.part.span) {
                    println!("  its share: {s}");
                }
            }
            HuntEnd::OnlySkippedLeft { commits: c } => println!(
                "{part}: only skipped commits left; the first bad commit is one of {}",
                c.iter().map(|c| short(c)).collect::<Vec<_>>().join(", ")
            ),
            HuntEnd::NotReproduced { message } => {
                println!("{part}: no further regression there: {message}")
            }
            HuntEnd::Reproduced { .. } | HuntEnd::Measured { .. } => {}
        }
    }
    for (part, why) in &outcome.unexplained {
        println!(
            "not hunted: the part from {} to {} ({why})",
            short(&part.good),
            short(&part.bad)
        );
    }
    if let Some(r) = &outcome.together {
        println!("reverted together on top: {}", r.summary);
    }
}

/// What a chained hunt's prebuilt stage found, once its source stage has begun: "first bad
/// prebuilt kernel: K; bisected R from G (the last good kernel's revision) to B (its own)".
fn chained_line(file: &HuntFile) -> Option<String> {
    let chain = chain_of(file)?;
    let (_, state) = open_state(file.state_dir(), "").ok()??;
    let (source, _) = open_state(file.state_dir(), engine::chain::SOURCE_STAGE).ok()??;
    let HuntEnd::Found { commit } = state.end.as_ref()? else {
        return None;
    };
    Some(format!(
        "first bad prebuilt kernel: {commit}; bisected {} from {} (the last good kernel's \
         revision) to {} (its own); `firstbad report` shows both stages",
        chain.repo.display(),
        short(&source.good),
        short(&source.bad)
    ))
}

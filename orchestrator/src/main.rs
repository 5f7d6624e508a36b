//! The `firstbad` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use firstbad::config::HuntConfig;
use firstbad::error::exit_code;
use firstbad::history::{CommitInfo, History};
use firstbad::hunt::{self, journal_path, short, HuntState};
use firstbad::journal::{HuntEnd, Journal};
use firstbad::report::{self, Commits};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Find the first bad commit of a Linux kernel performance regression.
///
/// firstbad builds each candidate kernel, boots it on a test host, measures it with a
/// workload through its agent, and bisects from per-boot statistics. Every step goes to a
/// journal first: rerun the same command after any interruption and it resumes.
///
/// Exit codes: 0 found (or success), 1 error, 2 bad input (hunt file, revisions),
/// 3 regression not reproduced, 4 only skipped commits left (a range is reported),
/// 5 infrastructure failure (a host, an endpoint that does not build or boot).
#[derive(Parser)]
#[command(name = "firstbad", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a hunt, or resume it from its journal.
    Run {
        /// The hunt file (see configs/demo.toml).
        hunt: PathBuf,
    },
    /// Show where a hunt is (safe while it runs, from another terminal).
    Status {
        /// The hunt file.
        hunt: PathBuf,
    },
    /// Print the hunt's report: the first bad commit, every tested commit with its
    /// verdict and per-boot numbers, and the git bisect log.
    Report {
        /// The hunt file.
        hunt: PathBuf,
    },
    /// Build one revision with the hunt's settings, boot it once and run the workload:
    /// check a set-up before starting a long hunt. Records nothing in the hunt's journal.
    Try {
        /// The hunt file.
        hunt: PathBuf,
        /// The revision to try (any syntax git accepts).
        rev: String,
    },
    /// Print the hunt's `git bisect log`, which `git bisect replay` accepts.
    Log {
        /// The hunt file.
        hunt: PathBuf,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FIRSTBAD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("firstbad: error: {e:#}");
            ExitCode::from(exit_code::ERROR)
        }
    }
}

fn load(path: &Path) -> Result<HuntConfig, u8> {
    HuntConfig::load(path).map_err(|e| {
        eprintln!("firstbad: {e}");
        exit_code::BAD_INPUT
    })
}

struct RepoCommits(Option<History>);

impl Commits for RepoCommits {
    fn info(&self, id: &str) -> Option<CommitInfo> {
        self.0.as_ref()?.info(id).ok()
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Run { hunt } => {
            let cfg = match load(&hunt) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            match rt.block_on(hunt::run(&cfg)) {
                Ok(outcome) => {
                    let history = History::open(&cfg.repo).ok();
                    let commits = RepoCommits(history);
                    match &outcome.end {
                        HuntEnd::Found { commit } => {
                            let subject =
                                commits.info(commit).map(|c| c.subject).unwrap_or_default();
                            println!("first bad commit: {} {subject}", short(commit));
                        }
                        HuntEnd::OnlySkippedLeft { commits: c } => {
                            println!("only skipped commits left; the first bad commit is one of:");
                            for id in c {
                                let subject =
                                    commits.info(id).map(|c| c.subject).unwrap_or_default();
                                println!("  {} {subject}", short(id));
                            }
                        }
                        HuntEnd::NotReproduced { message } => {
                            println!("regression not reproduced: {message}");
                        }
                    }
                    eprintln!(
                        "firstbad: `firstbad report {}` shows every step and the bisect log",
                        hunt.display()
                    );
                    Ok(outcome.exit_code)
                }
                Err(e) => {
                    eprintln!("firstbad: {e}");
                    if e.exit_code() == exit_code::INFRASTRUCTURE {
                        eprintln!(
                            "firstbad: the journal is intact; rerun the same command to resume"
                        );
                    }
                    Ok(e.exit_code())
                }
            }
        }
        Command::Status { hunt } => {
            let cfg = match load(&hunt) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let Some((id, state)) = open_state(&cfg)? else {
                println!(
                    "{}: not started (no journal in {})",
                    cfg.name,
                    cfg.state_dir.display()
                );
                return Ok(exit_code::OK);
            };
            println!(
                "hunt {}: good {} bad {}",
                cfg.name,
                short(&id.good),
                short(&id.bad)
            );
            if let Some(n) = state.candidates {
                println!("candidates at start: {n}");
            }
            println!(
                "baselines: {}",
                state.baselines.as_deref().unwrap_or("not yet confirmed")
            );
            println!("verdicts: {}", state.verdicts.len());
            for (c, v, reason) in &state.verdicts {
                println!("  {} {:<4} {reason}", short(c), v.as_str());
            }
            match (&state.end, &state.in_flight) {
                (Some(end), _) => println!("ended: {}", serde_json::to_string(end)?),
                (None, Some(step)) => println!("now: {step}"),
                (None, None) => println!("now: between steps"),
            }
            Ok(exit_code::OK)
        }
        Command::Try { hunt, rev } => {
            let cfg = match load(&hunt) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            match rt.block_on(hunt::try_revision(&cfg, &rev)) {
                Ok((build, boot)) => {
                    println!("build: {}", serde_json::to_string_pretty(&build)?);
                    if let Some(boot) = boot {
                        let mut v = serde_json::to_value(&boot)?;
                        // Summaries only: every sample is in the JSON of a real hunt's journal.
                        if let Some(series) = v.pointer_mut("/result/series") {
                            *series = serde_json::Value::String("(omitted)".into());
                        }
                        println!("boot: {}", serde_json::to_string_pretty(&v)?);
                    }
                    Ok(exit_code::OK)
                }
                Err(e) => {
                    eprintln!("firstbad: {e}");
                    Ok(e.exit_code())
                }
            }
        }
        Command::Report { hunt } => report_cmd(&hunt, false),
        Command::Log { hunt } => report_cmd(&hunt, true),
    }
}

fn report_cmd(hunt: &Path, log_only: bool) -> anyhow::Result<u8> {
    let cfg = match load(hunt) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let Some((id, state)) = open_state(&cfg)? else {
        eprintln!(
            "firstbad: {}: no journal in {}: run `firstbad run {}` first",
            cfg.name,
            cfg.state_dir.display(),
            hunt.display()
        );
        return Ok(exit_code::BAD_INPUT);
    };
    let commits = RepoCommits(History::open(&cfg.repo).ok());
    if log_only {
        print!("{}", report::bisect_log(&id, &state, &commits));
    } else {
        print!(
            "{}",
            report::markdown(&cfg.name, &cfg.workload.metric, &id, &state, &commits)
        );
    }
    Ok(exit_code::OK)
}

fn open_state(
    cfg: &HuntConfig,
) -> anyhow::Result<Option<(firstbad::journal::HuntIdentity, HuntState)>> {
    let path = journal_path(&cfg.state_dir);
    if !path.exists() {
        return Ok(None);
    }
    let j = Journal::open_read_only(&path)?;
    let Some(id) = j.identity()? else {
        return Ok(None);
    };
    Ok(Some((id, HuntState::replay(&j.events()?))))
}

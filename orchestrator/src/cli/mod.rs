//! The `firstbad` command line: the arguments, and one file a subcommand, each returning its
//! exit code. What they share (loading a hunt file, the runtime, a journal's state, a report's
//! context) is here.

mod report;
mod reproduce;
mod run;
mod sim;
mod status;
mod try_rev;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use firstbad::config::{HuntConfig, HuntFile};
use firstbad::error::exit_code;
use firstbad::history::{CommitInfo, History};
use firstbad::hunt::{self, journal_path, HuntState};
use firstbad::journal::Journal;
use firstbad::report::Commits;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Find the first bad commit of a Linux kernel performance regression.
///
/// firstbad builds each candidate kernel, boots it on a test host, measures it with a
/// workload through its agent, and bisects from per-boot statistics. Every step goes to a
/// journal first: rerun the same command after any interruption and it resumes.
///
/// Exit codes: 0 found (or success), 1 error, 2 bad input (hunt file, revisions, a state
/// directory holding a hunt's files but no whole journal), 3 regression not reproduced,
/// 4 ambiguous (only skipped commits left, the culprit not confirmed, or a forecast's no-go),
/// 5 infrastructure
/// failure (a host, an endpoint that does not build or boot, a result that could not be saved).
#[derive(Parser)]
#[command(name = "firstbad", version, about, long_about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Start a hunt, or resume it from its journal.
    Run {
        /// The hunt file (see configs/demo.toml; configs/command.toml for a hunt that runs a
        /// command in a checkout of each candidate instead of booting kernels).
        hunt: PathBuf,
        /// A `git bisect log` whose verdicts are applied first and not tested again.
        #[arg(long, value_name = "FILE")]
        replay: Option<PathBuf>,
        /// Put a host that left the pool (after a host error) back into it; repeatable.
        #[arg(long, value_name = "NAME")]
        restore_host: Vec<String>,
        /// Start the hunt afresh: first move everything in its state directory (journal,
        /// logs, checkouts, consoles) into <state_dir>/discarded-<UTC time>/, deleting
        /// nothing. Without it, a state directory holding a hunt's files but no whole journal
        /// is refused (exit 2) rather than hunted again.
        #[arg(long)]
        fresh: bool,
        /// Boot every commit of the range, also those that change no file the kernel is
        /// built from (`[build] prune = false`). Decided when a hunt starts: a resumed hunt
        /// keeps its journal's choice.
        #[arg(long)]
        no_prune: bool,
        /// Go on past a forecast that says the hunt is unlikely to name the culprit (a no-go
        /// stops the hunt before its first candidate, exit 4, and says what would help).
        #[arg(long)]
        despite_forecast: bool,
    },
    /// Measure the endpoints as the hunt's baselines, then print the forecast of the rest:
    /// the regression against the noise, the boots, builds and hours it should take on these
    /// hosts, and the chance of naming the culprit (exit 0 go, 4 no-go). Nothing past the
    /// baselines runs; they stay in the hunt's journal, and `firstbad run` goes on from them.
    Plan {
        /// The hunt file.
        hunt: PathBuf,
    },
    /// Show where a hunt is (safe while it runs, from another terminal).
    Status {
        /// The hunt file.
        hunt: PathBuf,
        /// Keep showing the status, refreshed, until the hunt ends (Ctrl-C to stop).
        #[arg(long)]
        follow: bool,
        /// Seconds between refreshes with --follow.
        #[arg(long, default_value_t = 2)]
        interval: u64,
    },
    /// Print the hunt's report: the first bad commit, every tested commit with its
    /// verdict and per-boot numbers, and the git bisect log.
    Report {
        /// The hunt file.
        hunt: PathBuf,
        /// markdown; email (plain text for LKML/bugzilla, with trailers); json (schema in
        /// docs/report-schema.md); html (self-contained, inline SVG plots).
        #[arg(long, value_enum, default_value_t = Format::Markdown)]
        format: Format,
        /// Write the HTML report to this file (same as --format html -o FILE).
        #[arg(long, value_name = "FILE", conflicts_with = "format")]
        html: Option<PathBuf>,
        /// Write the report to this file instead of standard output.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Write a reproduce bundle into this directory and DIR.tar: the kernel config, the
        /// workload file, a hunt file of the culprit and its parent, a script that runs
        /// `firstbad reproduce` on them, and the e-mail report.
        #[arg(long, value_name = "DIR", conflicts_with_all = ["format", "html", "output"])]
        bundle: Option<PathBuf>,
    },
    /// Build one revision with the hunt's settings, boot it once and run the workload:
    /// check a set-up before starting a long hunt. Records nothing in the hunt's journal.
    Try {
        /// The hunt file.
        hunt: PathBuf,
        /// The revision to try (any syntax git accepts).
        rev: String,
        /// Build the kernel into the build cache and stop: boot nothing. Warms a cache
        /// before a hunt (or before the test suite, as scripts/test does), so that no
        /// boot waits behind a clean kernel build.
        #[arg(long)]
        build_only: bool,
    },
    /// Reproduce a report ("fast in kernel A, slow in B"): boot the hunt file's good and bad
    /// kernels, interleaved, until the baselines' statistics confirm the difference (exit 0)
    /// or refute it (exit 3), bisecting nothing. Prints a report to paste into a bug
    /// tracker, and writes it as HTML (plots, every boot's samples) beside its journal in
    /// <state_dir>/reproduce/. Rerun it to resume, or to print the report again.
    Reproduce {
        /// The hunt file (its `good` and `bad` are the two kernels).
        hunt: PathBuf,
        /// Write the HTML report here instead of <state_dir>/reproduce/report.html.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Nightly regression hunts: run one cycle of a series (configs/nightly.toml): fetch the
    /// branch, boot its new head against the series' reference, place a change among the
    /// nights, hunt a regression's first bad commit, tell people. For cron or a systemd
    /// timer (docs/nightly.md); rerun after any interruption and it resumes.
    Watch {
        /// The series file.
        series: PathBuf,
        /// Keep running: a cycle, then sleep this long (e.g. `24h`, `30m`), and again.
        #[arg(long, value_name = "DURATION", value_parser = firstbad::watch::cli::duration)]
        every: Option<std::time::Duration>,
        #[command(subcommand)]
        action: Option<WatchAction>,
    },
    /// Write a series as static HTML (every boot night by night, the changes, links to their
    /// hunts' reports; no scripts, nothing fetched) and as JSON (series.json) into a directory.
    Dashboard {
        /// The series file.
        series: PathBuf,
        /// The directory to write index.html, series.json and the hunts' reports into.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Print the hunt's `git bisect log`, which `git bisect replay` accepts.
    Log {
        /// The hunt file.
        hunt: PathBuf,
    },
    /// Run firstbad's classifier and search on synthetic noisy histories, next to git bisect,
    /// majority vote, LKP and Pinpoint, and print the comparison table (Markdown), then where
    /// firstbad-run's boots went (per phase) and how often its bisection's verdicts were wrong.
    Sim(sim::Args),
}

/// What `firstbad watch <series>` does besides a cycle.
#[derive(Subcommand)]
pub(crate) enum WatchAction {
    /// Acknowledge a change: it stops alerting, and the newest head becomes the reference.
    Ack {
        /// The change's number (`firstbad watch <series> status` lists them).
        id: u32,
    },
    /// Print the series: its nights, reference and changes, with their hunts' states.
    Status,
}

/// Report formats.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Markdown for a person.
    Markdown,
    /// Plain text for LKML or bugzilla.
    Email,
    /// JSON for CI systems and dashboards.
    Json,
    /// One self-contained HTML file.
    Html,
}

/// Parses the command line, runs the subcommand, and turns its end into the exit code.
pub(crate) fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("firstbad: error: {e:#}");
            ExitCode::from(exit_code::ERROR)
        }
    }
}

/// Log lines on stderr (`FIRSTBAD_LOG` filters, default `info`). On a terminal, every running
/// build and boot also has a live status line (elapsed time, make's progress, the boot's
/// phase) below the log; plain lines otherwise, for files and CI.
fn init_logging() {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_env("FIRSTBAD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    if !terminal {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_ansi(false)
            .with_env_filter(filter)
            .init();
        return;
    }
    let style = tracing_indicatif::style::ProgressStyle::with_template(
        "{spinner} {span_name}{{{span_fields}}} {elapsed} {wide_msg}",
    )
    .expect("a valid template");
    let bars = tracing_indicatif::IndicatifLayer::new().with_progress_style(style);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(bars.get_stderr_writer())
                .with_target(false),
        )
        .with(bars)
        .init();
}

/// Each subcommand's file.
fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Run {
            hunt,
            replay,
            restore_host,
            fresh,
            no_prune,
            despite_forecast,
        } => {
            let forecast = if despite_forecast {
                hunt::Forecasting::Advise
            } else {
                hunt::Forecasting::Gate
            };
            run::run(&hunt, replay, restore_host, fresh, no_prune, forecast)
        }
        Command::Plan { hunt: file } => run::run(
            &file,
            None,
            Vec::new(),
            false,
            false,
            hunt::Forecasting::Only,
        ),
        Command::Watch {
            series,
            every,
            action,
        } => {
            use firstbad::watch::cli::Action;
            let action = match action {
                None => Action::Cycle { every },
                Some(WatchAction::Ack { id }) => Action::Ack(id),
                Some(WatchAction::Status) => Action::Status,
            };
            firstbad::watch::cli::run(&series, action, runtime()?)
        }
        Command::Dashboard { series, out } => firstbad::watch::cli::dashboard(&series, &out),
        Command::Reproduce { hunt, html } => reproduce::run(&hunt, html),
        Command::Status {
            hunt,
            follow,
            interval,
        } => status::run(&hunt, follow, interval),
        Command::Try {
            hunt,
            rev,
            build_only,
        } => try_rev::run(&hunt, &rev, !build_only),
        Command::Report {
            hunt,
            format,
            html,
            output,
            bundle,
        } => match (html, bundle) {
            (_, Some(dir)) => report::bundle_cmd(&hunt, &dir),
            (Some(file), None) => report::report_cmd(&hunt, Some(Format::Html), Some(file)),
            (None, None) => report::report_cmd(&hunt, Some(format), output),
        },
        Command::Log { hunt } => report::report_cmd(&hunt, None, None),
        Command::Sim(args) => sim::run(args),
    }
}

/// The hunt file at `path`, or the exit code of bad input (the error printed).
fn load_file(path: &Path) -> Result<HuntFile, u8> {
    HuntFile::load(path).map_err(|e| {
        eprintln!("firstbad: {e}");
        exit_code::BAD_INPUT
    })
}

/// A kernel hunt file at `path`, or the exit code of bad input (the error printed).
fn load(path: &Path) -> Result<HuntConfig, u8> {
    HuntConfig::load(path).map_err(|e| {
        eprintln!("firstbad: {e}");
        exit_code::BAD_INPUT
    })
}

/// Commit subjects from the hunt's repository, when it opens.
struct RepoCommits(Option<History>);

impl Commits for RepoCommits {
    fn info(&self, id: &str) -> Option<CommitInfo> {
        self.0.as_ref()?.info(id).ok()
    }
}

/// The async runtime for commands that build, boot and measure.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// A chained prebuilt hunt's `[chain]`.
fn chain_of(file: &HuntFile) -> Option<&firstbad::config::ChainConfig> {
    match file {
        HuntFile::Kernel(cfg) => cfg.build.prebuilt()?.chain.as_ref(),
        HuntFile::Local(_) => None,
    }
}

/// The journal of `state_dir` at `stage`: its identity and state, `None` before any.
fn open_state(
    state_dir: &Path,
    stage: &str,
) -> anyhow::Result<Option<(firstbad::journal::HuntIdentity, HuntState)>> {
    let path = journal_path(state_dir);
    if !path.exists() {
        return Ok(None);
    }
    let j = Journal::open_read_only(&path)?.stage(stage);
    let Some(id) = j.identity()? else {
        return Ok(None);
    };
    Ok(Some((id, HuntState::replay(&j.events()?))))
}

/// A further step's stage of a run: its number, identity, journal entries and state.
type StepStage = (
    usize,
    firstbad::journal::HuntIdentity,
    Vec<firstbad::journal::Entry>,
    HuntState,
);

/// The further steps' stages of a run in `state_dir` (`step-2`, `step-3`, …, as far as they
/// have begun).
fn step_stages(state_dir: &Path) -> anyhow::Result<Vec<StepStage>> {
    let path = journal_path(state_dir);
    let mut out = Vec::new();
    if !path.exists() {
        return Ok(out);
    }
    for n in 2.. {
        let j = Journal::open_read_only(&path)?.stage(&hunt::steps::stage(n));
        let Some(id) = j.identity()? else { break };
        let entries = j.events()?;
        let state = HuntState::replay(&entries);
        out.push((n, id, entries, state));
    }
    Ok(out)
}

/// Whether the run of `file` whose first stage is `first` (identity and state) and whose
/// further steps are `steps` has hunted every part of its regression, up to `max_culprits`
/// (its last step has ended, and left nothing more to hunt), and has measured its culprits
/// reverted together when it confirmed two or more (`together`, that stage's state).
fn run_ended(
    file: &HuntFile,
    first: (&firstbad::journal::HuntIdentity, &HuntState),
    steps: &[StepStage],
    together: Option<&HuntState>,
) -> bool {
    let rest = |id: &firstbad::journal::HuntIdentity, s: &HuntState, span| {
        s.end.clone().map(|end| {
            let o = hunt::Outcome::of(end, s.confirmation.clone());
            (o.rest((&id.good, &id.bad), span), o.confirmed_own())
        })
    };
    let Some((first_rest, first_confirmed)) = rest(first.0, first.1, hunt::steps::WHOLE) else {
        return false;
    };
    let plan = hunt::steps::Steps::new(file.max_culprits() as usize, first_rest, first_confirmed);
    let hunted = plan.all_hunted(|n, part| {
        steps
            .iter()
            .find(|(k, ..)| *k == n)
            .and_then(|(_, id, _, s)| rest(id, s, part.span))
    });
    let confirmed = std::iter::once(first.1)
        .chain(steps.iter().map(|(.., s)| s))
        .filter(|s| {
            s.end
                .as_ref()
                .is_some_and(|e| hunt::confirmed_culprit(e, s.confirmation.as_ref()).is_some())
        })
        .count();
    let reverts = match file {
        HuntFile::Kernel(c) => c.classify.revert && c.build.prebuilt().is_none(),
        HuntFile::Local(c) => c.test.measure.as_ref().is_some_and(|m| m.classify.revert),
    };
    let together_done = together.is_some_and(|s| s.end.is_some());
    hunted && (confirmed < 2 || !reverts || together_done)
}

/// Writes a report to `output`, or prints it.
fn write_or_print(text: &str, output: Option<PathBuf>) -> anyhow::Result<u8> {
    match output {
        Some(path) => {
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("firstbad: wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(exit_code::OK)
}

//! The `firstbad` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use firstbad::config::{HuntConfig, HuntFile, LocalConfig};
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
/// Exit codes: 0 found (or success), 1 error, 2 bad input (hunt file, revisions, a state
/// directory holding a hunt's files but no whole journal), 3 regression not reproduced,
/// 4 ambiguous (only skipped commits left, or the culprit not confirmed), 5 infrastructure
/// failure (a host, an endpoint that does not build or boot, a result that could not be saved).
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
    },
    /// Build one revision with the hunt's settings, boot it once and run the workload:
    /// check a set-up before starting a long hunt. Records nothing in the hunt's journal.
    Try {
        /// The hunt file.
        hunt: PathBuf,
        /// The revision to try (any syntax git accepts).
        rev: String,
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
    Sim {
        /// Every cell, 1000 replicates each (minutes in release); default: the quick run.
        #[arg(long)]
        full: bool,
        /// Replicates per cell (default 1000 with --full, 100 without).
        #[arg(long)]
        replicates: Option<usize>,
        /// Seed of all random draws: the same seed gives the same table.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Only these candidate counts N (repeat or comma-separate), e.g. `--n 64,1024`.
        #[arg(long, value_delimiter = ',')]
        n: Vec<usize>,
        /// Only these effects Δ/σ, e.g. `--d 1,2`.
        #[arg(long, value_delimiter = ',')]
        d: Vec<f64>,
        /// Only these noise kinds: normal, lognormal, outliers, drift, step, failed, burst.
        #[arg(long, value_delimiter = ',')]
        noise: Vec<String>,
        /// Only these history shapes: one, none, two.
        #[arg(long, value_delimiter = ',')]
        shape: Vec<String>,
        /// Only these strategies, e.g. `--strategy firstbad,firstbad-run,majority-25`: git-bisect-K,
        /// majority-K (odd), lkp-gap-K and pinpoint-K take any repeat count K.
        #[arg(long, value_delimiter = ',', value_parser = strategy_name)]
        strategy: Vec<String>,
        /// Boots at equal accuracy: per cell, raise the repeat counts of git bisect, majority
        /// vote, LKP and Pinpoint until each is as accurate as `firstbad run` on the same
        /// histories, and print what that costs against firstbad's boots (histories with a
        /// culprit only).
        #[arg(long, conflicts_with = "strategy")]
        matched: bool,
        /// Nightly detection instead of bisection: firstbad's nightly detector against Otava's
        /// E-divisive and Perfherder's t-test on simulated nightly series (docs/nightly-detection.md).
        #[arg(long, conflicts_with_all = ["strategy", "matched"])]
        nightly: bool,
        /// Threads to run replicates on (default: one per core). The table is the same
        /// whatever this is: each replicate draws from its own seed.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        jobs: Option<u32>,
    },
}

/// What `firstbad watch <series>` does besides a cycle.
#[derive(Subcommand)]
enum WatchAction {
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
enum Format {
    /// Markdown for a person.
    Markdown,
    /// Plain text for LKML or bugzilla.
    Email,
    /// JSON for CI systems and dashboards.
    Json,
    /// One self-contained HTML file.
    Html,
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    match run(cli) {
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

fn load_file(path: &Path) -> Result<HuntFile, u8> {
    HuntFile::load(path).map_err(|e| {
        eprintln!("firstbad: {e}");
        exit_code::BAD_INPUT
    })
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

/// The async runtime for commands that build, boot and measure.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Run {
            hunt,
            replay,
            restore_host,
            fresh,
        } => {
            let file = match load_file(&hunt) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
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
                    runtime()?.block_on(hunt::run_with(cfg, replay.as_deref(), &restore_host))
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
            Ok(print_outcome(result, &file, &hunt))
        }
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
        Command::Reproduce { hunt, html } => {
            let file = match load_file(&hunt) {
                Ok(f) => f,
                Err(code) => return Ok(code),
            };
            let result = match &file {
                HuntFile::Kernel(cfg) => runtime()?.block_on(hunt::reproduce(cfg)),
                HuntFile::Local(cfg) => match &cfg.test.measure {
                    Some(m) => firstbad::local::measured::reproduce(cfg, m),
                    None => {
                        eprintln!(
                            "firstbad: {}: reproduce compares two measured versions: give \
                             [test] a metric (docs/metric-hunts.md), or use a \
                             kernel hunt file",
                            hunt.display()
                        );
                        return Ok(exit_code::BAD_INPUT);
                    }
                },
            };
            let ended = result.is_ok();
            let code = print_outcome(result, &file, &hunt);
            if !ended {
                return Ok(code);
            }
            let dir = hunt::reproduce_dir(file.state_dir());
            let Some((id, state)) = open_state(&dir, "")? else {
                return Ok(code);
            };
            let ctx = report_context(&file, true).expect("a measured hunt: checked above");
            println!();
            print!(
                "{}",
                render(&ctx, file.repo(), &id, &state, Some(Format::Email))
            );
            let html = html.unwrap_or_else(|| dir.join("report.html"));
            let text = render(&ctx, file.repo(), &id, &state, Some(Format::Html));
            std::fs::write(&html, text).with_context(|| format!("writing {}", html.display()))?;
            eprintln!(
                "firstbad: wrote {} (plots and every boot's samples)",
                html.display()
            );
            Ok(code)
        }
        Command::Status {
            hunt,
            follow,
            interval,
        } => {
            let file = match load_file(&hunt) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            loop {
                let path = journal_path(file.state_dir());
                let opened = if path.exists() {
                    let j = Journal::open_read_only(&path)?;
                    j.identity()?
                        .map(|id| (id, j.events()))
                        .map(|(id, e)| e.map(|e| (id, e)))
                } else {
                    None
                };
                let ended = match opened.transpose()? {
                    None => {
                        println!(
                            "{}: not started (no journal in {})",
                            file.name(),
                            file.state_dir().display()
                        );
                        false
                    }
                    Some((id, entries)) => {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_millis() as i64);
                        if follow && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                            print!("\x1b[2J\x1b[H");
                        }
                        match &file {
                            HuntFile::Kernel(cfg) => {
                                print!("{}", report::status::render(cfg, &id, &entries, now));
                                // A chained hunt in its source stage: that stage too.
                                if let Some(chain) = chain_of(&file) {
                                    let j = Journal::open_read_only(&path)?
                                        .stage(hunt::chain::SOURCE_STAGE);
                                    if let Some(sid) = j.identity()? {
                                        let source = hunt::chain::source_config(cfg, chain);
                                        println!("\nsource stage ({}):", chain.repo.display());
                                        let entries = j.events()?;
                                        print!(
                                            "{}",
                                            report::status::render(&source, &sid, &entries, now)
                                        );
                                        // Followed until the source stage ends.
                                        if HuntState::replay(&entries).end.is_none() && follow {
                                            std::thread::sleep(std::time::Duration::from_secs(
                                                interval.max(1),
                                            ));
                                            continue;
                                        }
                                    }
                                }
                            }
                            HuntFile::Local(cfg) => match &cfg.test.measure {
                                Some(m) => {
                                    let view = report::status::Hunt {
                                        name: &cfg.name,
                                        repo: &cfg.repo,
                                        hosts: (0..cfg.test.jobs)
                                            .map(|j| format!("job{j}"))
                                            .collect(),
                                        classify: &m.classify,
                                    };
                                    print!(
                                        "{}",
                                        report::status::render_hunt(&view, &id, &entries, now)
                                    )
                                }
                                None => {
                                    print!("{}", report::local::status(cfg, &id, &entries, now))
                                }
                            },
                        }
                        HuntState::replay(&entries).end.is_some()
                    }
                };
                if !follow || ended {
                    return Ok(exit_code::OK);
                }
                if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                    println!("---");
                }
                std::thread::sleep(std::time::Duration::from_secs(interval.max(1)));
            }
        }
        Command::Try { hunt, rev } => {
            let cfg = match load(&hunt) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let rt = runtime()?;
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
        Command::Report {
            hunt,
            format,
            html,
            output,
        } => match html {
            Some(file) => report_cmd(&hunt, Some(Format::Html), Some(file)),
            None => report_cmd(&hunt, Some(format), output),
        },
        Command::Log { hunt } => report_cmd(&hunt, None, None),
        Command::Sim {
            full,
            replicates,
            seed,
            n,
            d,
            noise,
            shape,
            strategy,
            matched,
            nightly,
            jobs,
        } => {
            if nightly {
                return sim_nightly(replicates, seed);
            }
            let jobs = jobs.map_or_else(firstbad::sim::default_jobs, |j| j as usize);
            let filter = firstbad::sim::Filter {
                n,
                d,
                noise,
                shape,
                strategy,
            };
            if matched {
                return sim_matched(full, replicates, seed, jobs, &filter);
            }
            let rows = firstbad::sim::table(full, replicates, seed, jobs, &filter, |r| {
                eprint!(
                    "{}",
                    firstbad::sim::markdown(std::slice::from_ref(r))
                        .lines()
                        .nth(2)
                        .map(|l| format!("{l}\n"))
                        .unwrap_or_default()
                );
            });
            print!("{}", firstbad::sim::markdown(&rows));
            let phases = firstbad::sim::phases_markdown(&rows);
            if !phases.is_empty() {
                print!("\nWhere firstbad-run's boots went (mean per history):\n\n{phases}");
            }
            Ok(exit_code::OK)
        }
    }
}

/// Checks a `--strategy` name against [`firstbad::sim::Strategy::from_name`].
fn strategy_name(s: &str) -> Result<String, String> {
    match firstbad::sim::Strategy::from_name(s) {
        Some(_) => Ok(s.to_string()),
        None => Err(format!(
            "unknown strategy {s:?}: one of firstbad, firstbad-greedy, firstbad-run, \
             firstbad-run-boundary, git-bisect-K, \
             majority-K (K odd), lkp-gap, lkp-gap-K, pinpoint, pinpoint-K"
        )),
    }
}

/// `firstbad sim --nightly`: the nightly detectors' table, each row on stderr as it is done.
fn sim_nightly(replicates: Option<usize>, seed: u64) -> anyhow::Result<u8> {
    use firstbad::sim::nightly;
    let reps = replicates.unwrap_or(nightly::NIGHTLY_REPLICATES);
    let rows = nightly::nightly_table(reps, seed, |r| eprint!("{}", nightly::nightly_row(r)));
    print!("{}", nightly::nightly_markdown(&rows));
    Ok(exit_code::OK)
}

/// `firstbad sim --matched`: boots at equal accuracy for every cell the filter keeps.
fn sim_matched(
    full: bool,
    replicates: Option<usize>,
    seed: u64,
    jobs: usize,
    filter: &firstbad::sim::Filter,
) -> anyhow::Result<u8> {
    use firstbad::sim;
    let reps = replicates.unwrap_or(if full {
        sim::FULL_REPLICATES
    } else {
        sim::QUICK_REPLICATES
    });
    let mut rows = Vec::new();
    // On no-culprit histories "as accurate" means naming nothing, which a strategy that never
    // names a commit does best: those cells are left out.
    let kept = sim::cells(full)
        .into_iter()
        .filter(|c| filter.keeps_cell(c) && c.shape != sim::Shape::NoCulprit);
    for cell in kept {
        let m = sim::matched(&cell, reps, seed, jobs, |r| {
            eprintln!(
                "{}: {:.1}% right, {:.0} boots",
                r.strategy.name(),
                100.0 * r.accuracy,
                r.boots_mean
            )
        });
        eprint!("{}", sim::matched_markdown(&m));
        rows.extend(m);
    }
    print!("{}", sim::matched_markdown(&rows));
    Ok(exit_code::OK)
}

/// Prints (or writes to `output`) the report in `format`, or the bisect log for `None`.
fn report_cmd(hunt: &Path, format: Option<Format>, output: Option<PathBuf>) -> anyhow::Result<u8> {
    let file = match load_file(hunt) {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    // A metric command hunt's journal is a kernel hunt's, runs for boots: the same reports.
    let Some(ctx) = report_context(&file, false) else {
        let HuntFile::Local(cfg) = &file else {
            unreachable!("every kernel hunt is measured")
        };
        return local_report_cmd(hunt, cfg, format, output);
    };
    let (repo, state_dir) = (file.repo(), file.state_dir());
    let Some((id, state)) = open_state(state_dir, "")? else {
        eprintln!(
            "firstbad: {}: no journal in {}: run `firstbad run {}` first",
            ctx.name,
            state_dir.display(),
            hunt.display()
        );
        return Ok(exit_code::BAD_INPUT);
    };
    let text = render(&ctx, repo, &id, &state, format);
    let source = match chain_of(&file) {
        Some(chain) => open_state(state_dir, hunt::chain::SOURCE_STAGE)?
            .map(|(sid, sstate)| render(&ctx, &chain.repo, &sid, &sstate, format)),
        None => None,
    };
    let Some(source) = source else {
        return write_or_print(&text, output);
    };
    // A chained hunt: one report of both stages where the format can hold two; the source
    // stage's, which names the commit, where it cannot.
    let text = match format {
        Some(Format::Markdown) => format!(
            "# Stage 1 of 2: prebuilt kernels\n\n{text}\n# Stage 2 of 2: the source between \
             the last good and the first bad kernel\n\n{source}"
        ),
        Some(Format::Json) => format!(
            "{{\"stages\": {{\"prebuilt\": {}, \"source\": {}}}}}\n",
            text.trim_end(),
            source.trim_end()
        ),
        // The bisect log: only the stage that bisected git revisions has one.
        None | Some(Format::Email) | Some(Format::Html) => source,
    };
    write_or_print(&text, output)
}

/// A chained prebuilt hunt's `[chain]`.
fn chain_of(file: &HuntFile) -> Option<&firstbad::config::ChainConfig> {
    match file {
        HuntFile::Kernel(cfg) => cfg.build.prebuilt()?.chain.as_ref(),
        HuntFile::Local(_) => None,
    }
}

/// A measured hunt's report in `format` (the bisect log for `None`).
fn render(
    ctx: &report::Context,
    repo: &Path,
    id: &firstbad::journal::HuntIdentity,
    state: &HuntState,
    format: Option<Format>,
) -> String {
    let commits = report::GitCommits::open(repo);
    match format {
        None => report::bisect_log(id, state, &commits),
        Some(Format::Markdown) => report::markdown(ctx.name, ctx.metric, id, state, &commits),
        Some(Format::Email) => {
            report::email::email(&report::Report::build(ctx, id, state, &commits))
        }
        Some(Format::Json) => report::Report::build(ctx, id, state, &commits).json() + "\n",
        Some(Format::Html) => {
            let range = commits.range(&id.good, &id.bad);
            report::html::html(
                &report::Report::build(ctx, id, state, &commits),
                range.as_deref(),
            )
        }
    }
}

/// [`report_cmd`] for a local command hunt: the bisect log and the Markdown report.
fn local_report_cmd(
    hunt: &Path,
    cfg: &LocalConfig,
    format: Option<Format>,
    output: Option<PathBuf>,
) -> anyhow::Result<u8> {
    let path = journal_path(&cfg.state_dir);
    let opened = if path.exists() {
        let j = Journal::open_read_only(&path)?;
        j.identity()?
            .map(|id| j.events().map(|e| (id, e)))
            .transpose()?
    } else {
        None
    };
    let Some((id, entries)) = opened else {
        eprintln!(
            "firstbad: {}: no journal in {}: run `firstbad run {}` first",
            cfg.name,
            cfg.state_dir.display(),
            hunt.display()
        );
        return Ok(exit_code::BAD_INPUT);
    };
    let commits = report::GitCommits::open(&cfg.repo);
    let text = match format {
        None => report::bisect_log(&id, &HuntState::replay(&entries), &commits),
        Some(Format::Markdown) => report::local::markdown(cfg, &id, &entries, &commits),
        Some(_) => {
            eprintln!(
                "firstbad: {}: a hunt judged by exit status has Markdown reports and the \
                 bisect log (`firstbad log`); email, json and html show samples, which a \
                 hunt with [test] metric has",
                hunt.display()
            );
            return Ok(exit_code::BAD_INPUT);
        }
    };
    write_or_print(&text, output)
}

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

/// Prints how a hunt ended (the culprit, the confirmation, the range, or why it stopped) and
/// returns the exit code.
fn print_outcome(
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
                    let subject = commits.info(commit).map(|c| c.subject).unwrap_or_default();
                    println!(
                        "first bad commit: {} {}",
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
            eprintln!("firstbad: {e}");
            if e.exit_code() == exit_code::INFRASTRUCTURE && e.resumes() {
                eprintln!("firstbad: the journal is intact; rerun the same command to resume");
            }
            e.exit_code()
        }
    }
}

/// What a chained hunt's prebuilt stage found, once its source stage has begun: "first bad
/// prebuilt kernel: K; bisected R from G (the last good kernel's revision) to B (its own)".
fn chained_line(file: &HuntFile) -> Option<String> {
    let chain = chain_of(file)?;
    let (_, state) = open_state(file.state_dir(), "").ok()??;
    let (source, _) = open_state(file.state_dir(), hunt::chain::SOURCE_STAGE).ok()??;
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

/// What a report of a measured hunt reads from its hunt file (a kernel hunt, or a metric
/// command hunt whose command is its workload); `None` for a hunt judged by exit status.
fn report_context(file: &HuntFile, reproduction: bool) -> Option<report::Context<'_>> {
    Some(match file {
        HuntFile::Kernel(cfg) => report::Context::kernel(cfg, reproduction),
        HuntFile::Local(cfg) => {
            let m = cfg.test.measure.as_ref()?;
            report::Context {
                name: &cfg.name,
                hunt_file: &cfg.source,
                // The command is in the hunt file: it is the workload.
                workload_file: &cfg.source,
                metric: &m.metric.field,
                direction: m.direction,
                settings: &cfg.report,
                classify: &m.classify,
                command: Some(&cfg.test.command),
                reproduction,
            }
        }
    })
}

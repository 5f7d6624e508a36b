//! `firstbad-agent`: runs I/O workloads on a test host and reports every sample over HTTP, or,
//! with `run`, runs one workload and prints its result on the console (LAVA farm devices).
//!
//! It runs as PID 1's child in a tiny initramfs (busybox, no `/etc/passwd`, no DNS), so it
//! needs nothing beyond the kernel, `/proc` and its token file.

mod connections;
mod identity;
mod oneshot;
mod server;
mod sysinfo;
mod workloads;

use anyhow::{bail, Context};
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The exit codes, as `--help` lists them.
const EXIT_CODES: &str = "Exit codes: 0 when `run` printed a result; 1 when `run` printed an \
    error line, or the server could not start; 2 for a bad command line, and for a `run` that \
    printed nothing on stdout (no usable token to tag the lines with, or stdout is gone).";

/// Command line of `firstbad-agent`: the HTTP server's flags, or a subcommand.
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    long_about = None,
    after_help = EXIT_CODES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The server's flags, when no subcommand is given (clap then requires --scratch and a
    /// token).
    #[command(flatten)]
    serve: ServeArgs,
}

/// The subcommands beside the server.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Runs one workload, prints its result on stdout as console lines
    /// (`firstbad_wire::oneshot`) and exits: for test hosts the orchestrator cannot reach.
    Run(oneshot::RunArgs),
}

/// What both modes take: the token, the scratch directory and what workloads may touch.
#[derive(Debug, clap::Args)]
struct Common {
    /// File holding the bearer token every request must carry (surrounding whitespace
    /// ignored); in `run`, the boot's token that tags every line.
    #[arg(long, conflicts_with = "token", required_unless_present = "token")]
    token_file: Option<PathBuf>,
    /// The bearer token itself, instead of --token-file (visible in `ps`: for tests).
    #[arg(long)]
    token: Option<String>,
    /// Directory the workloads write into; the agent writes nowhere else.
    // An Option that clap requires: `firstbad-agent run` leaves the server's flags unset.
    #[arg(long, required = true)]
    scratch: Option<PathBuf>,
    /// A block device `sequential` workloads may read and overwrite (repeatable); its contents
    /// are destroyed.
    #[arg(long)]
    scratch_device: Vec<PathBuf>,
    /// Allow `command` workloads, which run a user's script as the agent's user.
    #[arg(long)]
    allow_command: bool,
    /// Most memory one run's buffers and samples may take, in MiB (default: a quarter of the
    /// host's MemTotal, at most 2048).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    run_memory_mb: Option<u64>,
}

/// The most of a `--token-file` read: a token is one line (the orchestrator's LAVA token
/// file has the same bound).
const MAX_TOKEN_FILE_BYTES: usize = 4096;

impl Common {
    /// The token from --token or --token-file, trimmed; never empty.
    fn token(&self) -> anyhow::Result<String> {
        let token = match (&self.token, &self.token_file) {
            (Some(token), _) => token.trim().to_owned(),
            (None, Some(path)) => {
                use oneshot::SmallFileError;
                let shown = path.display();
                let bytes = oneshot::read_small_file(path, MAX_TOKEN_FILE_BYTES).map_err(|e| {
                    anyhow::anyhow!(match e {
                        SmallFileError::NotRegular(what) => format!(
                            "--token-file {shown}: {what}, not a regular file: give the file \
                             holding the token"
                        ),
                        SmallFileError::TooLarge => format!(
                            "--token-file {shown}: more than {MAX_TOKEN_FILE_BYTES} bytes: a \
                             token is one line"
                        ),
                        SmallFileError::Io(e) => format!("--token-file {shown}: cannot read: {e}"),
                    })
                })?;
                String::from_utf8(bytes)
                    .with_context(|| format!("--token-file {shown}: not UTF-8 text"))?
                    .trim()
                    .to_owned()
            }
            (None, None) => bail!("give --token-file or --token"),
        };
        if token.is_empty() {
            bail!("the token is empty: put a secret in --token-file (or --token)");
        }
        Ok(token)
    }

    /// The scratch directory, resolved; it must be a directory.
    fn scratch(&self) -> anyhow::Result<PathBuf> {
        let Some(given) = &self.scratch else {
            bail!("give --scratch");
        };
        let scratch = std::fs::canonicalize(given)
            .with_context(|| format!("--scratch {}: cannot resolve", given.display()))?;
        if !scratch.is_dir() {
            bail!("--scratch {}: not a directory", scratch.display());
        }
        Ok(scratch)
    }

    /// What workloads may touch, once every scratch device was checked.
    fn limits(&self) -> anyhow::Result<workloads::Limits> {
        for (i, device) in self.scratch_device.iter().enumerate() {
            if self.scratch_device[..i].contains(device) {
                bail!("--scratch-device {}: given twice", device.display());
            }
            workloads::check_scratch_device(device)
                .map_err(|e| anyhow::anyhow!("--scratch-device {}: {e}", device.display()))?;
        }
        Ok(workloads::Limits {
            devices: self.scratch_device.clone(),
            allow_command: self.allow_command,
            budget: match self.run_memory_mb {
                Some(mb) => workloads::budget::Budget::of_this_host().with_memory(mb << 20),
                None => workloads::budget::Budget::of_this_host(),
            },
        })
    }
}

/// The HTTP server's command line (`firstbad-agent --listen … --token-file … --scratch …`).
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on (an IP and port, no host names: there is no DNS on a test host).
    #[arg(long, default_value_t = SocketAddr::from(([0, 0, 0, 0], firstbad_wire::GUEST_AGENT_PORT)))]
    listen: SocketAddr,
    #[command(flatten)]
    common: Common,
    /// Seconds a connection may wait for a request's headers to be complete, counted from when
    /// the agent starts waiting for them (a new connection, or a kept-alive one after its last
    /// answer), before it is closed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_s: u64,
    /// Seconds a client has to send a request's body once its headers are in.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    body_timeout_s: u64,
    /// Seconds a connection may stay open with no request in progress and no byte moving, e.g.
    /// a client that stops reading an answer (one waiting for headers goes at the header
    /// timeout first).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout_s: u64,
    /// Most connections open at once (lowered to fit the descriptor limit); past it the oldest
    /// idle or slow connection is closed, unauthenticated ones first.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Logs end up on a serial console or in a file, where colour codes are noise.
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match cli.command {
        Some(Command::Run(args)) => {
            oneshot::run(&args).unwrap_or_else(|err| fail(&err, oneshot::EXIT_NOTHING_PRINTED))
        }
        None => match serve_api(cli.serve) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => fail(&err, 1),
        },
    }
}

/// Prints `err` with its causes on stderr; `code` is the exit code.
fn fail(err: &anyhow::Error, code: u8) -> ExitCode {
    eprintln!("firstbad-agent: error: {err:#}");
    ExitCode::from(code)
}

/// Checks the command line, then serves the API until the process is killed.
fn serve_api(cli: ServeArgs) -> anyhow::Result<()> {
    let token = cli.common.token()?;
    let scratch = cli.common.scratch()?;
    let limits = cli.common.limits()?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // The identity read now, while descriptors are free (identity.rs, BOOT_ID).
    crate::identity::identity().context("reading this kernel's identity")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(cli.listen)
            .await
            .with_context(|| format!("--listen {}: cannot bind", cli.listen))?;
        let bound = listener
            .local_addr()
            .context("cannot read the bound address")?;
        // The orchestrator and the tests wait for exactly this line.
        eprintln!("firstbad-agent: listening on {bound}");
        if limits.allow_command {
            tracing::warn!(
                "--allow-command: command workloads will run scripts sent with the token"
            );
        }
        tracing::info!(budget = ?limits.budget, "per-run bounds");
        let app = server::router(server::AppState::new(token, scratch, limits));
        let conn_limits = connections::ConnLimits {
            header_timeout: Duration::from_secs(cli.header_timeout_s),
            body_timeout: Duration::from_secs(cli.body_timeout_s),
            idle_timeout: Duration::from_secs(cli.idle_timeout_s),
            max_connections: connections::connection_cap(
                usize::try_from(cli.max_connections).unwrap_or(usize::MAX),
            ),
        };
        tracing::info!(?conn_limits, "serving");
        connections::serve(listener, app, conn_limits).await;
        Ok(())
    })
}

//! Hunt configuration: a TOML file parsed into raw structs, then validated once into types
//! that cannot hold a bad value.
//!
//! Relative paths are relative to the directory of the file that names them; `~/` and
//! `${VAR}` / `${VAR:-default}` are expanded in paths. Every number has a range
//! ([`bounds::BOUNDS`], docs/hunt-file-bounds.md), and a file over 1 MiB, not UTF-8 or
//! holding a NUL is refused before TOML reads it; every error is one line naming the file.
//!
//! - `raw.rs`: the serde structs, as written; `read.rs`: the text checks and TOML errors;
//! - `validate.rs`: raw to validated, table by table (`build_table.rs`, `classify_table.rs`,
//!   `test_table.rs` beside it); `hosts.rs`: `[[hosts]]` of each kind,
//!   its types and their validation;
//! - `bounds.rs`: the range of every number; `expand.rs`: `~/`, `${VAR:-default}`.

pub mod bounds;
mod build_table;
mod classify_table;
pub mod disk;
mod expand;
mod hosts;
pub mod notify;
mod raw;
mod read;
pub mod series;
pub mod ssh;
mod test_table;
pub(crate) mod url;
mod validate;

pub use hosts::{
    Accel, HostConfig, HostKind, Install, LavaConfig, LavaToken, QemuConfig, SshConfig,
};
pub(crate) use read::snippet;
pub use read::MAX_FILE_BYTES;
pub use series::SeriesConfig;

use crate::error::ConfigError;
use firstbad_wire::Workload;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A validated hunt: everything `firstbad run` needs, with absolute paths.
#[derive(Debug, Clone)]
pub struct HuntConfig {
    /// The file this came from, for messages.
    pub source: PathBuf,
    /// Short name of the hunt (used for the default state directory).
    pub name: String,
    /// The kernel git repository (empty in a prebuilt hunt, which has none).
    pub repo: PathBuf,
    /// The known-good revisions (at least one), any syntax git accepts; the first is measured
    /// as the good baseline. Empty in a prebuilt hunt: [`PrebuiltConfig::good`] says.
    pub goods: Vec<String>,
    /// Only commits changing these paths are tested (`git bisect start -- <paths>`).
    pub paths: Vec<String>,
    /// Follow only first parents (`git bisect start --first-parent`).
    pub first_parent: bool,
    /// The known-bad revision (empty in a prebuilt hunt: [`PrebuiltConfig::bad`] says).
    pub bad: String,
    /// Where the journal, build logs and console logs of this hunt live.
    pub state_dir: PathBuf,
    /// How candidates are built, or which prebuilt kernels are the candidates.
    pub build: Build,
    /// The test hosts (at least one).
    pub hosts: Vec<HostConfig>,
    /// The workload and the metric it is judged by.
    pub workload: WorkloadConfig,
    /// Classification parameters.
    pub classify: ClassifyConfig,
    /// What reports add: a web link for commits and the trailers of the e-mail report.
    pub report: ReportConfig,
}

/// A validated hunt file: a kernel hunt, or a command run on this machine.
#[derive(Debug, Clone)]
pub enum HuntFile {
    /// `[build]`, `[[hosts]]`, `[workload]`: build, boot and measure kernels.
    Kernel(Box<HuntConfig>),
    /// `[test]`: run a command in a checkout of each candidate (see [`crate::local`]).
    Local(Box<LocalConfig>),
}

impl HuntFile {
    /// The hunt's name.
    pub fn name(&self) -> &str {
        match self {
            HuntFile::Kernel(c) => &c.name,
            HuntFile::Local(c) => &c.name,
        }
    }

    /// Where the hunt's journal lives.
    pub fn state_dir(&self) -> &Path {
        match self {
            HuntFile::Kernel(c) => &c.state_dir,
            HuntFile::Local(c) => &c.state_dir,
        }
    }

    /// The repository bisected.
    pub fn repo(&self) -> &Path {
        match self {
            HuntFile::Kernel(c) => &c.repo,
            HuntFile::Local(c) => &c.repo,
        }
    }

    /// Steps of one regression its run hunts ([`ClassifyConfig::max_culprits`]): 1 for the
    /// hunts that hunt one (prebuilt kernels, exit-status command hunts).
    pub fn max_culprits(&self) -> u32 {
        match self {
            HuntFile::Kernel(c) if c.build.prebuilt().is_none() => c.classify.max_culprits,
            HuntFile::Local(c) => c
                .test
                .measure
                .as_ref()
                .map_or(1, |m| m.classify.max_culprits),
            HuntFile::Kernel(_) => 1,
        }
    }
}

/// A validated local command hunt: `[hunt]` and `[test]`, no kernel.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The file this came from, for messages.
    pub source: PathBuf,
    /// Short name of the hunt (used for the default state directory).
    pub name: String,
    /// The git repository.
    pub repo: PathBuf,
    /// The known-good revisions (at least one).
    pub goods: Vec<String>,
    /// The known-bad revision.
    pub bad: String,
    /// Only commits changing these paths are tested (`git bisect start -- <paths>`).
    pub paths: Vec<String>,
    /// Follow only first parents (`git bisect start --first-parent`).
    pub first_parent: bool,
    /// Where the journal, the checkouts and the command logs live.
    pub state_dir: PathBuf,
    /// The command and how it runs.
    pub test: TestConfig,
    /// What reports add.
    pub report: ReportConfig,
}

/// The `[test]` table: the command that judges a candidate.
#[derive(Debug, Clone)]
pub struct TestConfig {
    /// Run with `sh -c` in a checkout of the candidate; exit status as `git bisect run`, or,
    /// in a metric hunt, once per sample.
    pub command: String,
    /// A run that lasts longer is killed (with its process group): the commit is skipped, or
    /// in a metric hunt the sample failed.
    pub timeout_s: u64,
    /// Checkouts tested at once (the "hosts" of a local hunt).
    pub jobs: u32,
    /// Set in a metric hunt: the command prints a number, judged by the hunt's statistics.
    pub measure: Option<MeasureConfig>,
}

/// What a metric command hunt adds to `[test]`: how a candidate is built, where its number is
/// read, and `[classify]`.
#[derive(Debug, Clone)]
pub struct MeasureConfig {
    /// Run once per candidate in its own checkout before any sample; a failure is a skip.
    pub build: Option<String>,
    /// A build that lasts longer is killed, and the commit skipped.
    pub build_timeout_s: u64,
    /// The file the command writes its result to, relative to the checkout; standard output
    /// when unset.
    pub output: Option<PathBuf>,
    /// Which number of the output is the metric.
    pub metric: crate::metric::MetricSpec,
    /// Which way is worse.
    pub direction: Direction,
    /// The statistics, as in a kernel hunt.
    pub classify: ClassifyConfig,
}

impl MeasureConfig {
    /// The metric as one line for messages and the journal: `mean`, or `./bench: mean`, with
    /// the format.
    pub fn metric_name(&self) -> String {
        let m = &self.metric;
        match &m.benchmark {
            Some(b) => format!("{b}: {} ({})", m.field, m.format.name()),
            None => format!("{} ({})", m.field, m.format.name()),
        }
    }
}

/// The optional `[report]` table.
#[derive(Debug, Clone, Default)]
pub struct ReportConfig {
    /// Web link to a commit, with `{commit}` standing for its full id, e.g.
    /// `https://git.kernel.org/torvalds/c/{commit}`.
    pub web_link: Option<String>,
    /// `Bisected-by:` trailer of the e-mail report (`Name <address>`).
    pub bisected_by: Option<String>,
    /// `Reported-by:` trailer of the e-mail report.
    pub reported_by: Option<String>,
    /// `Closes:` trailer of the e-mail report: the bug report's address.
    pub closes: Option<String>,
}

/// Where a kernel hunt's kernels come from: `[build] kind`.
#[derive(Debug, Clone)]
pub enum Build {
    /// `kind = "source"` (the default): each candidate commit of `hunt.repo` is built.
    Source(BuildConfig),
    /// `kind = "prebuilt"`: the candidates are a list of kernels already built.
    Prebuilt(PrebuiltConfig),
}

/// `[build] kind = "prebuilt"`: an ordered list of kernels, oldest first, as a linear
/// history (see [`crate::prebuilt`]).
#[derive(Debug, Clone)]
pub struct PrebuiltConfig {
    /// The kernels, oldest first (at least two).
    pub kernels: Vec<PrebuiltKernel>,
    /// `hunt.good` as written, naming an entry of the list; `None`: the first.
    pub good: Option<String>,
    /// `hunt.bad` as written, naming an entry of the list; `None`: the last.
    pub bad: Option<String>,
    /// Where downloaded packages and unpacked kernels are cached (`<build cache>/prebuilt`).
    pub cache_dir: PathBuf,
    /// `[chain]`: after the first bad kernel, a source hunt between its revision and the last
    /// good kernel's (coarse to fine, issue 22 item 3).
    pub chain: Option<ChainConfig>,
}

/// `[chain]`: the source tree the prebuilt kernels were built from, which revision each is,
/// and how the source stage builds.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    /// The kernel git repository (`chain.repo`).
    pub repo: PathBuf,
    /// Entry of `build.kernels` (as written) → its revision in `repo`.
    pub revisions: BTreeMap<String, String>,
    /// The source stage's build (`chain.config`, `chain.jobs`, ...).
    pub build: BuildConfig,
}

/// One entry of `build.kernels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrebuiltKernel {
    /// The entry as written in the hunt file (what `hunt.good`/`hunt.bad` may name).
    pub entry: String,
    /// Where the kernel is.
    pub source: KernelSource,
}

/// Where a prebuilt kernel comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// A Debian package fetched with `apt-get download` (`name` or `name=version`).
    Package {
        /// The package name, e.g. `linux-image-6.1.0-47-cloud-amd64`.
        name: String,
        /// A version apt knows; `None`: apt's candidate version, resolved at the run's start.
        version: Option<String>,
    },
    /// A `.deb` file.
    Deb(PathBuf),
    /// A directory holding a `bzImage` (or `vmlinuz*`) and `lib/modules/<release>/`.
    Dir(PathBuf),
}

impl Build {
    /// The prebuilt list, in a prebuilt hunt.
    pub fn prebuilt(&self) -> Option<&PrebuiltConfig> {
        match self {
            Build::Prebuilt(p) => Some(p),
            Build::Source(_) => None,
        }
    }
}

/// How candidate kernels are built.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    /// Base kernel config copied to `$O/.config` before `make olddefconfig`.
    pub kernel_config: PathBuf,
    /// Where build directories and kernel artifacts are cached across hunts.
    pub cache_dir: PathBuf,
    /// `make -j`.
    pub jobs: u32,
    /// Whether to build through ccache.
    pub ccache: Ccache,
    /// distcc hosts the compiles are sent to; empty: compile locally. They do not change
    /// what is built, so they are not part of the kernel cache key.
    pub distcc: Vec<DistccHost>,
    /// Extra `make` arguments (`CC=clang`, `LLVM=1`).
    pub make_args: Vec<String>,
    /// A build that runs longer is killed and counted as failed (a skip).
    pub timeout_s: u64,
    /// Commits that change no file the endpoints' builds read are not candidates (issue 35;
    /// `[build] prune`, `firstbad run --no-prune`).
    pub prune: bool,
}

/// One distcc build machine: a `distccd` listening at `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistccHost {
    /// Name or address of the machine (an IPv6 address without brackets).
    pub host: String,
    /// distccd's TCP port (distcc's default 3632).
    pub port: u16,
    /// How many compiles are sent to it at once (distcc's `/LIMIT`).
    pub slots: u32,
}

impl DistccHost {
    /// The host as `DISTCC_HOSTS` names it: `host:port/slots`, `[v6]:port/slots`.
    pub fn spec(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}/{}", self.host, self.port, self.slots)
        } else {
            format!("{}:{}/{}", self.host, self.port, self.slots)
        }
    }
}

/// ccache use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ccache {
    /// Use it when `ccache` is on PATH.
    Auto,
    /// Always; fail when missing.
    On,
    /// Never.
    Off,
}

/// Which way is worse for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Latency: higher is a regression.
    LowerIsBetter,
    /// Throughput: lower is a regression.
    HigherIsBetter,
}

/// The workload and how it is judged.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    /// The workload file, for messages and reports.
    pub file: PathBuf,
    /// The workload sent to the agent.
    pub workload: Workload,
    /// The per-boot metric compared between commits (a key of `WorkloadResult::metrics`).
    pub metric: String,
    /// Which way is worse.
    pub direction: Direction,
    /// A workload that runs longer is cancelled and the boot counted as failed.
    pub timeout_s: u64,
}

/// What "bad" means for a commit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClassifyMode {
    /// Like the bad endpoint rather than the good one: both endpoints are measured, interleaved,
    /// until the regression is confirmed or refuted (the default).
    Baselines,
    /// Worse than the good endpoint by at least this share (0.2 = 20% slower): for hunts whose
    /// bad endpoint is not worth measuring as a reference.
    Relative(f64),
    /// Worse than this absolute value of the metric (e.g. fsync p99 above 500 ms).
    Absolute(f64),
}

/// Parameters of the statistics (see [`crate::sequential`] and [`crate::posterior`]).
#[derive(Debug, Clone)]
pub struct ClassifyConfig {
    /// What "bad" means.
    pub mode: ClassifyMode,
    /// Boots of a candidate before a verdict may be given, however clear the first ones are.
    pub min_boots: u32,
    /// Boots of a candidate after which it is called undecided (a skip).
    pub max_boots: u32,
    /// Smallest relative difference between good and bad that counts (0.05 = 5%).
    pub min_effect: f64,
    /// Failed boots of a candidate after which it is skipped.
    pub max_failed_boots: u32,
    /// Sequential test: probability of calling a good commit bad (default 0.01).
    pub alpha: f64,
    /// Sequential test: probability of calling a bad commit good (default 0.01).
    pub beta: f64,
    /// The culprit is confirmed when its posterior probability reaches this (default 0.95).
    pub confidence: f64,
    /// Re-measure the good endpoint after every this many verdicts: the posterior's firmest
    /// hold on how the host moves, and a check that stops the hunt on a move the earlier
    /// re-measurements' trend does not explain; 0 turns it off.
    pub drift_check_every: u32,
    /// Re-measurements of the good endpoint in a row over which a move must last before a
    /// drift check calls it drift; a shorter move is a burst (a busy neighbour), waited out.
    pub drift_lasts_boots: u32,
    /// Minutes of boots (boot and workload time) the move must last as well; 0 leaves it to
    /// `drift_lasts_boots`.
    pub drift_lasts_minutes: u32,
    /// Interleaved boots of the culprit and its parent, each, in the final re-test; 0 turns
    /// it off.
    pub confirm_pairs: u32,
    /// Rounds the re-test may grow to while its own figures cannot yet separate the culprit
    /// from its parent (a burst hit a round, or the effect is small).
    pub confirm_max_pairs: u32,
    /// Boots the posterior phase may spend after the bisection, per bit of the range
    /// (⌈log2(candidates + 1)⌉), re-testing what is in doubt; 0 turns it off (git bisect's
    /// answer stands).
    pub refine_boots: u32,
    /// Boots of each endpoint at the baselines' last look, where they decide.
    pub max_baseline_boots: u32,
    /// Steps of one regression a run hunts: when the re-test puts part of the regression
    /// before the culprit's parent or after the culprit, that part is hunted next, in the
    /// same run and journal ([`crate::hunt::steps`]), up to this many culprits in all.
    pub max_culprits: u32,
    /// Revert a confirmed culprit on top of bad and measure what that recovers (kernel hunts
    /// over git, baselines mode; issue 34).
    pub revert: bool,
}

impl ClassifyConfig {
    /// The hunt file's defaults: what an empty `[classify]` table gives (the simulator and
    /// the engine's tests run with these, not with a copy of them).
    pub fn defaults() -> ClassifyConfig {
        classify_table::classify_defaults()
    }
}

/// The metrics a workload of this kind reports, when they are known before it runs (fio's and a
/// command's are known once a run has reported).
pub fn known_metrics(workload: &Workload) -> Option<&'static [&'static str]> {
    match workload {
        Workload::FsyncLatency(_) => Some(FSYNC_LATENCY_METRICS),
        Workload::Sequential(_) => Some(firstbad_wire::SEQUENTIAL_METRICS),
        Workload::Threads(_) => Some(firstbad_wire::THREADS_METRICS),
        Workload::Fio(_) | Workload::Command(_) => None,
    }
}

/// Metric keys the `fsync-latency` workload reports.
pub const FSYNC_LATENCY_METRICS: &[&str] = &[
    "fsync_latency_p50_ms",
    "fsync_latency_p90_ms",
    "fsync_latency_p99_ms",
    "fsync_latency_p999_ms",
    "fsync_latency_max_ms",
    "fsync_latency_mean_ms",
    "writer_mb_s",
];

impl HuntConfig {
    /// Reads and validates a hunt file.
    pub fn load(path: &Path) -> Result<HuntConfig, ConfigError> {
        Self::parse(path, &read::text_file(path)?)
    }

    /// Validates hunt-file text; `path` names it in errors and anchors relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<HuntConfig, ConfigError> {
        match HuntFile::parse(path, text)? {
            HuntFile::Kernel(cfg) => Ok(*cfg),
            HuntFile::Local(_) => Err(ConfigError::Field {
                path: path.to_owned(),
                field: "test".into(),
                message: "this hunt runs a command on this machine ([test]), it boots no kernel: \
                          `firstbad run` handles it; `try` is for kernel hunts"
                    .into(),
            }),
        }
    }
}

impl HuntFile {
    /// Reads and validates a hunt file of either kind.
    pub fn load(path: &Path) -> Result<HuntFile, ConfigError> {
        Self::parse(path, &read::text_file(path)?)
    }

    /// Validates hunt-file text of either kind: `[test]` makes a local command hunt,
    /// `[build]` + `[[hosts]]` + `[workload]` a kernel hunt.
    pub fn parse(path: &Path, text: &str) -> Result<HuntFile, ConfigError> {
        validate::hunt_file(path, text)
    }
}

/// The per-user cache directory (`$XDG_CACHE_HOME/firstbad` or `~/.cache/firstbad`).
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FIRSTBAD_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("firstbad");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("firstbad")
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
